// simrun compare: one scenario simulated and run for real (docs/real-execution.md, "Compare"),
// one Program for both, compared per GPU and op class and for the largest ops individually.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/program/executor.hpp"
#include "core/program/program.hpp"

namespace csim::app {

// The op classes of the comparison: GEMM (gemm, attention, conv kernels), element-wise, copy,
// collective, host (host work).
enum class OpClass { kGemm, kElementwise, kCopy, kCollective, kHost, kNone };
inline constexpr int kNumOpClasses = 5;
const char* to_string(OpClass c);
OpClass op_class(const core::Op& op);

struct ClassTimes {
  double sim_s = 0, real_s = 0;
  int ops = 0;
};

struct Comparison {
  std::string real_backend;
  bool real_measured = false;
  // [gpu][class]: summed op durations (end - start) over the run.
  std::vector<std::vector<ClassTimes>> by_gpu;
  struct Largest {
    core::OpId op = core::kNoOp;
    double sim_s = 0, real_s = 0;
  };
  std::vector<Largest> largest;  // by simulated duration, longest first
  double sim_span_s = 0, real_span_s = 0;
  std::string note;  // printed under the header (the stand-in's time scale)
};

// Both results must come from the same Program (ids line up).
Comparison compare_runs(const core::Program& p, const core::ExecutionResult& sim,
                        const core::ExecutionResult& real, int largest);

void print_comparison(const core::Program& p, const Comparison& c, std::ostream& out);

// `simrun compare SCENARIO [...]`; args without the leading "compare".
int compare_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace csim::app
