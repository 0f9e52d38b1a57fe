// docs/block-eval.md, "Where it runs"; docs/sweep.md, "Figures".
#include "run/summary_eval.hpp"

#include "core/lowering/lowering.hpp"
#include "core/step_spans.hpp"
#include "run/run.hpp"

namespace csim::run {

const char* to_string(Evaluation e) {
  return e == Evaluation::kBlock ? "block" : "op-level";
}

namespace {

// The op-level figures of a run without a trace, through run() so that control.cancel stops the
// simulation; the step time also in seconds exactly as the summary computes it.
SummaryEval op_level(const core::Scenario& scenario, const core::RunControl& control) {
  RunRequest rq;
  rq.scenario = &scenario;
  rq.trace = false;
  rq.control = control;
  RunResult run_result = run(rq);
  SummaryEval out;
  out.complete = run_result.result.complete;
  out.figures =
      block::figures_from_timings(run_result.program, run_result.result, run_result.memory);
  out.figures.fallback_reason = "asked for (--op-level)";
  out.step_time_s =
      core::step_time_s(core::step_spans(run_result.program, run_result.result.timings));
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
