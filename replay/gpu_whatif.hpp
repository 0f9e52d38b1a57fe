// Another GPU for a replayed run (docs/replay.md, "Another GPU"): each measured GPU op rescaled by
// its class, with the class and the rule kept per kernel name for --explain.
//   gemm          d' = d * peak(from, p) / peak(to, p)   p: TF32, BF16 or FP32 by the kernel name
//   memory-bound  d' = d * mem_bw(from) / mem_bw(to)
//   launch-bound, collective, host copy: d' = d (collectives are re-costed on the job's cluster
//   afterwards: replay/collective_recost.hpp)
// Never below min(d, kLaunchBoundNs): a kernel does not get shorter than a launch-bound one.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "replay/replay_program.hpp"

namespace csim::replay {

struct ExplainRow {
  std::string name;  // kernel name
  KernelClass cls = KernelClass::kMemoryBound;
  std::string rule;  // "x0.315 (BF16 peak 312 -> 989 TFLOP/s)"
  std::int64_t count = 0;
  TimeNs measured_ns = 0, replayed_ns = 0;  // summed over its ops
};

// The scale factor of one class between two GPUs and the rule's text.
double class_ratio(const GpuOpInfo& k, const core::GpuSpec& from, const core::GpuSpec& to,
                   std::string* rule);

// Rescales every GPU op of `rp` from `from` to `to` (Op::fixed_ns); returns one row per kernel
// name and class, in the order the names first appear, largest total first when `sorted`.
std::vector<ExplainRow> apply_gpu_whatif(ReplayProgram& rp, const core::GpuSpec& from,
                                         const core::GpuSpec& to);

void print_explain(const std::vector<ExplainRow>& rows, std::ostream& out, std::size_t limit);

}  // namespace csim::replay
