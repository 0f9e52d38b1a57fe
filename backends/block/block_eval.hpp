// Summary-only evaluation (docs/block-eval.md): the op-level simulator's step time, memory peaks
// and exposed communication without a timeline. The Program is cut into chains (runs of ops on one
// stream that wait for nothing but the op before them: a layer sequence's forward or backward for
// one micro-batch with its in-line tensor-parallel collectives); each chain is timed at kernel
// level from the cost model once and moved as one unit through a discrete-event schedule of the
// streams, the pipeline's send/recv rendezvous and the data-parallel collectives. Where the
// Program's structure is outside what that schedule reproduces, the op-level simulator runs
// instead and the result says so.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "core/program/executor.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::block {

enum class EvalPath { kBlock, kOpLevel };
const char* to_string(EvalPath p);

struct GpuPeak {
  int gpu = 0;
  Bytes peak_bytes = 0;  // max(simulated peak, steady-state peak), as the summary (docs/memory.md)
  Bytes capacity_bytes = 0;  // usable memory (docs/scenario.md, "Usable memory")
};

// core::memory_timeline's verdict (docs/memory.md, "OOM verdict"): the first allocation, in time,
// that exceeds its GPU's capacity, else (one step) the first that would in the steady state.
struct Oom {
  int gpu = 0;
  core::OpId op = core::kNoOp;  // in the Program evaluated; kNoOp when from two short pipelines
  bool steady_state = false;
  std::string op_name;  // the allocation's name (what sweeps and tune print)
};

struct EvalResult {
  EvalPath path = EvalPath::kOpLevel;
  std::string fallback_reason;  // why the op-level path ran (empty on the block path)
  TimeNs step_time_ns = 0;      // the summary's step time (docs/summary.md, "Steps")
  std::vector<GpuPeak> peaks;   // simulated GPUs (representatives under rank symmetry), in order
  // The summary's exposed_comm_s in ns: per step, sum over GPUs (stands_for times) of
  // |communication kernels \ compute kernels| within the window (docs/summary.md).
  TimeNs exposed_comm_ns = 0;
  std::optional<Oom> oom;
  // Block path: units moved through the schedule, of which chains, ops they hold, distinct
  // transfers timed on the flow network.
  std::int64_t units = 0, chains = 0, chained_ops = 0, transfers_timed = 0;
  // evaluate_periodic: the two micro-batch counts simulated ({0, 0}: the Program as lowered);
  // evaluate_scenario: why it lowered the whole Program instead (empty when periodic).
  std::array<int, 2> periodic_micro_batches{0, 0};
  std::string periodic_reason;
  // evaluate_scenario_verdict: an OOM verdict from one shorter pipeline (its micro-batches in
  // periodic_micro_batches[0]); the other figures are that pipeline's, not the scenario's.
  bool verdict_only = false;
  bool periodic() const { return periodic_micro_batches[0] > 0; }
  Bytes max_peak_bytes() const;
};

// Why the block path does not apply to this Program (empty when it does): docs/block-eval.md,
// "Scope".
std::string block_path_unsupported(const core::Scenario& scenario, const core::Program& program);

// The block path where it applies, else the op-level simulation (path and reason say which).
EvalResult evaluate(const core::Scenario& scenario, const core::Program& program);

// The block path alone: nullopt where it does not apply (*why, when given, says why).
std::optional<EvalResult> evaluate_block(const core::Scenario& scenario,
                                         const core::Program& program, std::string* why = nullptr);

// [SECTION] Periodic steady state (block_periodic.cpp; docs/block-eval.md, "Periodic steady state")

// The shorter pipeline has kPeriodicFirst * pp micro-batches, the longer one pp more.
inline constexpr int kPeriodicFirst = 2;

// Why a scenario is not evaluated from two shorter pipelines (empty when it may be).
std::string periodic_unsupported(const core::Scenario& scenario);

// The figures of `scenario` from the block path on the same configuration with 2p and 3p
// micro-batches (p stages), extended linearly to its m, the OOM verdict included where the two
// fix it (docs/block-eval.md, "Out of memory"): nullopt (*why says why) where the scenario is
// outside periodic_unsupported's scope, either short Program leaves the block path, the two are
// not one period apart (time and memory growing), or their memory does not fix the verdict.
std::optional<EvalResult> evaluate_periodic(const core::Scenario& scenario,
                                            std::string* why = nullptr);

// What a sweep asks: evaluate_periodic where it applies, else the scenario lowered whole and
// evaluate()d; `program`, when given, receives that whole Program (left untouched when periodic).
EvalResult evaluate_scenario(const core::Scenario& scenario, core::Program* program = nullptr);

// What tune asks: evaluate_scenario, but where the periodic path declines for too few micro-batches
// (m = 3p), first one pipeline of 2p micro-batches: where it runs out of memory before its last
// forward, the scenario's verdict alone (verdict_only; docs/block-eval.md, "A verdict alone").
EvalResult evaluate_scenario_verdict(const core::Scenario& scenario,
                                     core::Program* program = nullptr);

// Always the op-level simulator (backends/sim), figures computed from its op timings.
EvalResult evaluate_op_level(const core::Scenario& scenario, const core::Program& program);

// The figures of an op-level run already made (its timings and memory report): what
// evaluate_op_level returns after simulating.
EvalResult figures_from_timings(const core::Program& program, const core::ExecutionResult& result,
                                const core::MemoryReport& memory);

}  // namespace csim::block
