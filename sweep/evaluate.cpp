// docs/sweep.md, "Figures".
#include "sweep/evaluate.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "run/scenario_loader.hpp"

namespace csim::sweep {

const char* to_string(VariantStatus s) {
  switch (s) {
    case VariantStatus::kOk:
      return "ok";
    case VariantStatus::kOom:
      return "oom";
    case VariantStatus::kInvalid:
      return "invalid";
    case VariantStatus::kFailed:
      return "failed";
  }
  return "failed";
}

bool parse_variant_status(const std::string& text, VariantStatus* out) {
  for (VariantStatus s :
       {VariantStatus::kOk, VariantStatus::kOom, VariantStatus::kInvalid, VariantStatus::kFailed})
    if (text == to_string(s)) {
      *out = s;
      return true;
    }
  return false;
}

VariantResult evaluate_variant(const nlohmann::json& doc, const std::string& name,
                               const std::vector<std::string>& sets,
                               const core::RunControl& control, run::Evaluation evaluation) {
  core::Scenario sc;
  try {
    sc = run::load_scenario_document(doc, name, sets);
  } catch (const InputError& e) {
    VariantResult r;
    r.status = VariantStatus::kInvalid;
    r.error = e.what();
    return r;
  }
  return evaluate_scenario(sc, control, evaluation);
}

VariantResult evaluate_scenario(const core::Scenario& sc, const core::RunControl& control,
                                run::Evaluation evaluation) {
  VariantResult r;
  try {
    const run::SummaryEval ev = run::evaluate_summary(sc, evaluation, control);
    if (!ev.complete) {
      r.error = "cancelled";
      return r;
    }
    const block::EvalResult& f = ev.figures;
    r.evaluation = f.path;
    r.step_time_s = ev.step_time_s;
    r.gpus = ev.gpus;
    if (r.step_time_s > 0) {
      r.samples_per_s = static_cast<double>(ev.samples_per_step) / r.step_time_s;
      // docs/summary.md, "MFU and HFU": model FLOPs per step / (step time x GPUs x dense peak).
      const double peak = sc.cluster.gpu.peak_flops_per_s(
          core::precision_bytes(sc.training.precision, sc.training.amp_dtype).compute);
      if (peak > 0 && r.gpus > 0) r.mfu = ev.model_flops_per_step / (r.step_time_s * r.gpus * peak);
    }
    for (const block::GpuPeak& g : f.peaks) {
      // The larger of the simulated and steady-state peaks, as the summary (docs/memory.md).
      const double gib = static_cast<double>(g.peak_bytes) / static_cast<double>(kGiB);
      r.per_gpu.push_back({g.gpu, gib});
      if (gib >= r.peak_gib) {
        r.peak_gib = gib;
        r.usable_gib = static_cast<double>(g.capacity_bytes) / static_cast<double>(kGiB);
      }
    }
    if (f.oom) {
      r.status = VariantStatus::kOom;
      r.error =
          "GPU " + std::to_string(f.oom->gpu) + " runs out of memory at '" + ev.oom_op_name + "'";
    } else {
      r.status = VariantStatus::kOk;
    }
  } catch (const InputError& e) {  // a lowering rule the parser does not check
    r.status = VariantStatus::kInvalid;
    r.error = e.what();
  }
  return r;
}

}  // namespace csim::sweep
