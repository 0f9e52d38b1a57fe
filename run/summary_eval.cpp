// docs/block-eval.md, "Where it runs"; docs/sweep.md, "Figures".
#include "run/summary_eval.hpp"

#include "core/lowering/lowering.hpp"
#include "core/model/flops.hpp"
#include "core/program/step_spans.hpp"
#include "run/run.hpp"

namespace csim::run {

const char* to_string(Evaluation e) {
  return e == Evaluation::kOpLevel ? "op-level" : "block";
}

namespace {

void describe(SummaryEval& out) {
  out.gpus = static_cast<int>(out.program.active_gpus.size());
  out.samples_per_step = out.program.samples_per_step;
  out.model_flops_per_step = out.program.model_flops_per_step;
}

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
  describe(out);
  if (out.figures.oom) out.oom_op_name = out.figures.oom->op_name;
  return out;
}

}  // namespace

SummaryEval evaluate_summary(const core::Scenario& scenario, Evaluation evaluation,
                             const core::RunControl& control) {
  if (evaluation == Evaluation::kOpLevel) return op_level(scenario, control);
  SummaryEval out;
  out.figures = evaluation == Evaluation::kBlockVerdict
                    ? block::evaluate_scenario_verdict(scenario, &out.program)
                    : block::evaluate_scenario(scenario, &out.program);
  out.step_time_s = static_cast<double>(out.figures.step_time_ns) / 1e9;
  if (out.figures.periodic()) {
    // Lowering of the whole Program skipped: its GPUs are the scenario's, its samples the global
    // batch, its model FLOPs those core/lowering/lowering.cpp gives it.
    out.gpus = static_cast<int>(scenario.strategy.device_ids.size());
    out.samples_per_step = scenario.training.global_batch;
    out.model_flops_per_step = core::model_flops_per_step(scenario);
  } else {
    describe(out);
  }
  if (out.figures.oom) out.oom_op_name = out.figures.oom->op_name;
  return out;
}

}  // namespace csim::run
