// One sweep variant, evaluated (docs/sweep.md, "Figures"): the scenario document with the
// variant's overrides, validated by the scenario parser, lowered and evaluated without a timeline
// (run/summary_eval.hpp): by default on the block path (docs/block-eval.md), which reproduces the
// op-level simulator's figures within 1 % and falls back to it outside its scope; with
// run::Evaluation::kOpLevel by the op-level simulator itself. The figures are the summary's
// (docs/summary.md): the step time from the same ProfilerStep spans, MFU with the same formula.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/program/executor.hpp"
#include "core/scenario/scenario.hpp"
#include "run/summary_eval.hpp"

namespace csim::sweep {

enum class VariantStatus { kOk, kOom, kInvalid, kFailed };
const char* to_string(VariantStatus s);
bool parse_variant_status(const std::string& text, VariantStatus* out);

struct GpuPeak {
  int gpu = 0;
  double peak_gib = 0;
};

struct VariantResult {
  std::size_t index = 0;            // the variant's place in the space
  std::vector<std::string> values;  // one per knob
  VariantStatus status = VariantStatus::kFailed;
  std::string error;  // kInvalid: the parser's message; kOom: the verdict; kFailed: why
  double step_time_s = 0;
  double samples_per_s = 0;
  double mfu = 0;                // model FLOPs / (step time x GPUs x dense peak)
  int gpus = 0;                  // GPUs the variant uses
  double peak_gib = 0;           // the largest peak allocated over GPUs
  double usable_gib = 0;         // that GPU's usable memory
  std::vector<GpuPeak> per_gpu;  // simulated GPUs (representatives under rank symmetry)
  block::EvalPath evaluation = block::EvalPath::kOpLevel;  // which path gave the figures
};

// A parsed scenario, lowered and simulated (index and values left empty).
VariantResult evaluate_scenario(const core::Scenario& scenario,
                                const core::RunControl& control = {},
                                run::Evaluation evaluation = run::Evaluation::kBlock);

// `doc` is the scenario file's JSON; `name` stands for the file in messages.
VariantResult evaluate_variant(const nlohmann::json& doc, const std::string& name,
                               const std::vector<std::string>& sets,
                               const core::RunControl& control = {},
                               run::Evaluation evaluation = run::Evaluation::kBlock);

}  // namespace csim::sweep
