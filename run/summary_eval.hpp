// Summary-only evaluation for the front ends that need figures, not timelines: sweeps, tune and
// hpo (docs/block-eval.md, docs/sweep.md "Figures"). The scenario is lowered once and evaluated by
// the block-level path (backends/block), which falls back to the op-level simulator where the
// Program's structure is outside its scope; kOpLevel always runs the op-level simulator (through
// run(), without a trace), for the figures a timeline would show to the last nanosecond.
#pragma once

#include <cstdint>
#include <string>

#include "backends/block/block_eval.hpp"
#include "core/program/executor.hpp"
#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::run {

enum class Evaluation {
  kBlock,    // block path where it applies (within 1 % of op-level: tests/test_block_eval.cpp)
  kOpLevel,  // always the op-level simulator (cancellable mid-run through control.cancel)
  // kBlock, but a layout out of memory may get its verdict alone, its other figures those of a
  // shorter pipeline (block::evaluate_scenario_verdict): tune, which reports no more of it
  kBlockVerdict,
};
const char* to_string(Evaluation e);  // "block" (kBlock, kBlockVerdict), "op-level"

struct SummaryEval {
  // The Program evaluated; empty when the figures come from two shorter pipelines
  // (figures.periodic(): docs/block-eval.md, "Periodic steady state").
  core::Program program;
  block::EvalResult figures;
  // The full Program's figures that a front end prints beside the evaluation, whichever way it
  // was made: GPUs used, samples per step, model FLOPs per step (core/model/flops.hpp).
  int gpus = 0;
  std::int64_t samples_per_step = 0;
  double model_flops_per_step = 0;
  std::string oom_op_name;  // the name of figures.oom's op
  // The step time in seconds: kOpLevel exactly as the summary computes it (core::step_time_s),
  // the block path figures.step_time_ns / 1e9.
  double step_time_s = 0;
  bool complete = true;  // false when control.cancel stopped an op-level run
};

// Lowers `scenario` and evaluates it. Throws InputError for a lowering rule the parser cannot see.
// The block path and its fallback run to the end (they take milliseconds on the bundled
// workloads); kOpLevel honours control.cancel.
SummaryEval evaluate_summary(const core::Scenario& scenario, Evaluation evaluation,
                             const core::RunControl& control = {});

}  // namespace csim::run
