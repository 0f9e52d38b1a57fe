// docs/block-eval.md, "Where it runs"; docs/sweep.md, "Figures".
#include "run/summary_eval.hpp"

#include <algorithm>
#include <cmath>

#include "core/lowering/lowering.hpp"
#include "core/step_spans.hpp"
#include "run/run.hpp"

namespace csim::run {

const char* to_string(Evaluation e) {
  return e == Evaluation::kBlock ? "block" : "op-level";
}

namespace {

// The op-level figures of a run without a trace: the same step spans, peaks and verdict as
// block::evaluate_op_level, but through run() so that control.cancel stops the simulation.
SummaryEval op_level(const core::Scenario& scenario, const core::RunControl& control) {
  RunRequest rq;
  rq.scenario = &scenario;
  rq.trace = false;
  rq.control = control;
  RunResult run_result = run(rq);
  SummaryEval out;
  out.complete = run_result.result.complete;
  block::EvalResult& f = out.figures;
  f.path = block::EvalPath::kOpLevel;
  f.fallback_reason = "asked for (--op-level)";
  const std::vector<core::StepSpan> spans =
      core::step_spans(run_result.program, run_result.result.timings);
  out.step_time_s = core::step_time_s(spans);
  f.step_time_ns = static_cast<TimeNs>(std::llround(out.step_time_s * 1e9));
  for (const core::GpuMemory& g : run_result.memory.gpus)
    f.peaks.push_back({g.gpu, std::max(g.peak_bytes, g.steady_peak_bytes), g.capacity_bytes});
  if (run_result.memory.oom)
    f.oom = block::Oom{run_result.memory.oom->gpu, run_result.memory.oom->op,
                       run_result.memory.oom->steady_state};
  out.program = std::move(run_result.program);
  return out;
}

}  // namespace

SummaryEval evaluate_summary(const core::Scenario& scenario, Evaluation evaluation,
                             const core::RunControl& control) {
  if (evaluation == Evaluation::kOpLevel) return op_level(scenario, control);
  SummaryEval out;
  out.program = core::lower(scenario);
  out.figures = block::evaluate(scenario, out.program);
  out.step_time_s = static_cast<double>(out.figures.step_time_ns) / 1e9;
  return out;
}

}  // namespace csim::run
