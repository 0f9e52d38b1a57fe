// OOM advice (docs/memory.md, "OOM advice").
#include "tools/oom_advice.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/model/attention_kernels.hpp"
#include "core/program/step_spans.hpp"
#include "run/run.hpp"

namespace csim::app {
namespace {

using core::StrategyKind;

struct Candidate {
  std::string change;
  std::vector<std::string> sets;
};

// The smallest catalog GPU with more memory than `gpu` (same vendor line up: the catalog is in
// age order, so among equally large ones the newest is taken).
const core::GpuCatalogEntry* bigger_gpu(const core::GpuSpec& gpu) {
  const core::GpuCatalogEntry* best = nullptr;
  for (const core::GpuCatalogEntry& e : core::gpu_catalog()) {
    if (e.gpu.memory_bytes <= gpu.memory_bytes) continue;
    if (e.gpu.compute_capability > 0 && gpu.compute_capability > 0 &&
        e.gpu.compute_capability < gpu.compute_capability)
      continue;  // never advise an older architecture
    if (!best || e.gpu.memory_bytes <= best->gpu.memory_bytes) best = &e;
  }
  return best;
}

std::vector<Candidate> candidates(const core::Scenario& s) {
  std::vector<Candidate> c;
  // 0. The caching allocator's expandable segments (docs/memory.md, "Expandable segments"):
  //    pages mapped into one growing segment per stream, so a request fits wherever the
  //    allocated bytes do (the verdict may be the allocator's: fragmentation).
  if (!s.training.expandable_segments)
    c.push_back({"expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)",
                 {"training.allocator.expandable_segments=true"}});
  const core::StrategySpec& st = s.strategy;
  const core::ParallelSpec& par = st.parallel;
  const std::int64_t g = s.training.global_batch;
  const int accum = s.training.gradient_accumulation;
  // 1. DataParallel keeps every replica's outputs, the loss and the optimizer on device_ids[0];
  //    DDP gives every GPU the same share.
  if (st.kind == StrategyKind::kDataParallel)
    c.push_back({"DDP instead of DataParallel", {"strategy.kind=ddp"}});
  // 2. Smaller micro-batches: the same global batch in more, smaller micro-steps (activations
  //    scale with the micro-batch).
  if (core::is_parallel_kind(st.kind)) {
    if (par.micro_batch_size > 1 && par.micro_batch_size % 2 == 0)
      c.push_back({"half the micro-batch (" + std::to_string(par.micro_batch_size / 2) + ")",
                   {"strategy.micro_batch_size=" + std::to_string(par.micro_batch_size / 2)}});
  } else {
    for (const int f : {2, 4}) {
      const std::int64_t a = static_cast<std::int64_t>(accum) * f;
      if (g % a == 0 && g / a >= 1)
        c.push_back({"gradient accumulation " + std::to_string(a) + " (micro-batches " +
                         std::to_string(f) + "x smaller)",
                     {"training.gradient_accumulation=" + std::to_string(a)}});
    }
  }
  // 3. Activation recompute (transformers built by the GPT builder).
  if (s.model.transformer.layers > 0 && core::is_parallel_kind(st.kind)) {
    if (par.recompute == core::RecomputeMode::kNone)
      c.push_back({"selective activation recompute", {"strategy.recompute=selective"}});
    if (par.recompute != core::RecomputeMode::kFull) {
      // recompute_modules applies to selective only: back to its default (null).
      if (par.recompute_modules != core::recompute_module::kCoreAttn)
        c.push_back({"full activation recompute",
                     {"strategy.recompute=full", "strategy.recompute_modules=null"}});
      else
        c.push_back({"full activation recompute", {"strategy.recompute=full"}});
    }
  }
  // 3b. Megatron-Core's recompute modules for a mixture of experts or latent attention
  //     (docs/memory.md, "OOM advice"; docs/program.md, "Recompute modules"): the output-
  //     discarding ones DeepSeek-V3 uses (technical report sections 3.2.3 and 3.3: the norms, the
  //     MLA up projections, the MoE SwiGLU), then, for a mixture of experts, the whole MoE layer.
  if (s.model.transformer.layers > 0 && core::is_parallel_kind(st.kind) &&
      (par.recompute == core::RecomputeMode::kNone ||
       par.recompute == core::RecomputeMode::kSelective)) {
    namespace rm = core::recompute_module;
    std::uint8_t tagged = 0;
    bool eager_core = false;
    for (const core::LayerSpec& l : s.model.layers) {
      tagged = static_cast<std::uint8_t>(tagged | l.recompute_modules);
      eager_core = eager_core || l.selective_recompute;
    }
    const auto list = [&](std::uint8_t mods) {
      std::string names;
      for (int b = 0; b < rm::kCount; ++b) {
        if (!(mods & (1u << b))) continue;
        names += std::string(names.empty() ? "" : ",") + "\"" + rm::name(b) + "\"";
      }
      return names;
    };
    const std::uint8_t base =
        static_cast<std::uint8_t>((eager_core ? rm::kCoreAttn : 0) |
                                  (tagged & (rm::kLayernorm | rm::kMlaUpProj | rm::kMoeAct)));
    const std::uint8_t current =
        par.recompute == core::RecomputeMode::kSelective ? par.recompute_modules : 0;
    std::vector<std::uint8_t> sets;
    if (tagged & (rm::kMlaUpProj | rm::kMoeAct)) sets.push_back(base);
    if (tagged & rm::kMoe) sets.push_back(static_cast<std::uint8_t>(base | rm::kMoe));
    for (const std::uint8_t mods : sets) {
      if ((mods | current) == current) continue;  // nothing more than what runs now
      const std::string names = list(mods);
      std::string shown = names;
      shown.erase(std::remove(shown.begin(), shown.end(), '"'), shown.end());
      c.push_back({"recompute modules " + shown,
                   {"strategy.recompute=selective", "strategy.recompute_modules=[" + names + "]"}});
    }
  }
  // 4. Shard more over data parallelism: ZeRO stages (DDP-like runs become kind zero).
  const int gpus = static_cast<int>(st.device_ids.size());
  if ((st.kind == StrategyKind::kDdp || st.kind == StrategyKind::kDataParallel) && gpus > 1) {
    for (const int z : {1, 2, 3})
      c.push_back(
          {"ZeRO stage " + std::to_string(z) + " over the " + std::to_string(gpus) + " GPUs",
           {"strategy.kind=zero", "strategy.zero_stage=" + std::to_string(z)}});
  } else if ((st.kind == StrategyKind::kZero || st.kind == StrategyKind::k3d) && par.dp > 1) {
    for (int z = par.zero_stage + 1; z <= 3; ++z)
      c.push_back(
          {"ZeRO stage " + std::to_string(z), {"strategy.zero_stage=" + std::to_string(z)}});
  }
  // 5. More pipeline stages (3D): twice the stages, half the data-parallel replicas.
  if (st.kind == StrategyKind::k3d && par.dp % 2 == 0 &&
      static_cast<int>(s.model.layers.size()) >= 2 * par.pp)
    c.push_back({"pipeline stages " + std::to_string(par.pp) + " -> " + std::to_string(2 * par.pp) +
                     " (dp " + std::to_string(par.dp) + " -> " + std::to_string(par.dp / 2) + ")",
                 {"strategy.pp=" + std::to_string(2 * par.pp),
                  "strategy.dp=" + std::to_string(par.dp / 2)}});
  // 6. More context parallelism (docs/memory.md, "OOM advice"): twice the CP ranks, half the
  //    data-parallel ones; every saved activation is per token, so each rank keeps half as many.
  //    Where the parser allows cp: a fused attention core, 4 cp dividing the sequence, not
  //    DeepSpeed ZeRO-3 or FSDP1.
  const bool fused_attention =
      std::any_of(s.model.layers.begin(), s.model.layers.end(),
                  [](const core::LayerSpec& l) { return core::is_fused_attention_core(l); });
  const bool cp_kind = st.kind == StrategyKind::k3d || st.kind == StrategyKind::kPipeline ||
                       st.kind == StrategyKind::kTensorParallel ||
                       (st.kind == StrategyKind::kZero && par.zero_stage < 3) ||
                       (st.kind == StrategyKind::kFsdp && par.fsdp2.enabled);
  if (fused_attention && cp_kind && par.dp % 2 == 0 &&
      s.model.transformer.seq_len % (4 * par.cp) == 0)
    c.push_back({"context parallelism " + std::to_string(par.cp) + " -> " +
                     std::to_string(2 * par.cp) + " (dp " + std::to_string(par.dp) + " -> " +
                     std::to_string(par.dp / 2) + ")",
                 {"strategy.cp=" + std::to_string(2 * par.cp),
                  "strategy.dp=" + std::to_string(par.dp / 2)}});
  // 6b. More expert parallelism (docs/memory.md, "OOM advice"): twice the EP ranks hold half the
  //     routed experts each (their weights, gradients and optimizer state), where 2 ep divides the
  //     experts and tp x cp x dp and the kind takes ep (3d, pipeline, zero up to stage 1).
  const int experts = s.model.transformer_config.moe.experts;
  const bool ep_kind = (st.kind == StrategyKind::k3d || st.kind == StrategyKind::kPipeline ||
                        (st.kind == StrategyKind::kZero && par.zero_stage <= 1)) &&
                       !par.fsdp2.enabled;
  if (experts > 0 && ep_kind && experts % (2 * par.ep) == 0 &&
      (par.tp * par.cp * par.dp) % (2 * par.ep) == 0)
    c.push_back({"expert parallelism " + std::to_string(par.ep) + " -> " +
                     std::to_string(2 * par.ep) + " (" + std::to_string(experts / (2 * par.ep)) +
                     " experts per GPU)",
                 {"strategy.ep=" + std::to_string(2 * par.ep)}});
  // 7. A GPU with more memory.
  if (const core::GpuCatalogEntry* e = bigger_gpu(s.cluster.gpu))
    c.push_back({"GPU " + e->gpu.name + " (" + std::to_string(e->gpu.memory_bytes / kGiB) + " GiB)",
                 {"cluster.gpu=" + e->gpu.name}});
  return c;
}

}  // namespace

std::vector<AdviceItem> oom_advice(const run::ScenarioLoader& loader,
                                   const core::Scenario& scenario,
                                   const core::RunControl& control) {
  std::vector<AdviceItem> items;
  const std::vector<Candidate> cands = candidates(scenario);
  // One progress unit per change re-simulated; the re-simulations report no phases of their own.
  core::ProgressCount count(control.progress, "re-simulating the OOM advice",
                            static_cast<std::int64_t>(cands.size()), "changes", 1);
  core::RunControl quiet = control;
  quiet.progress = nullptr;
  for (const Candidate& cand : cands) {
    if (control.cancel && control.cancel->load()) break;
    AdviceItem it;
    it.change = cand.change;
    it.overrides = cand.sets;
    try {
      const core::Scenario variant = loader.load(cand.sets);
      run::RunRequest rq;
      rq.scenario = &variant;
      rq.trace = false;
      rq.control = quiet;
      const run::RunResult run = run::run(rq);
      it.simulated = true;
      it.fits = !run.memory.oom.has_value();
      for (const core::GpuMemory& g : run.memory.gpus)
        if (g.capacity_bytes > 0)
          it.worst_fill = std::max(
              it.worst_fill,
              static_cast<double>(std::max(g.peak_bytes, g.steady_peak_bytes)) / g.capacity_bytes);
      // The summary's step time, from the same ProfilerStep spans (core/program/step_spans.hpp).
      it.step_time_s = core::step_time_s(core::step_spans(run.program, run.result.timings));
    } catch (const InputError& e) {
      it.error = e.what();  // the change does not apply to this scenario (e.g. a divisibility rule)
    }
    items.push_back(std::move(it));
    count.add();
  }
  count.finish();
  // Fitting first, fastest first; then the rest by how much they still overfill.
  std::stable_sort(items.begin(), items.end(), [](const AdviceItem& a, const AdviceItem& b) {
    if (a.simulated != b.simulated) return a.simulated;
    if (a.fits != b.fits) return a.fits;
    if (a.fits) return a.step_time_s < b.step_time_s;
    return a.worst_fill < b.worst_fill;
  });
  return items;
}

void print_oom_advice(const std::vector<AdviceItem>& items, double current_step_s,
                      std::ostream& out) {
  out << "\nOOM advice (each change re-simulated; fitting ones first, fastest first):\n";
  if (items.empty()) {
    out << "  no change applies to this strategy and model\n";
    return;
  }
  char line[256];
  std::snprintf(line, sizeof line, "  %-2s %-54s %-5s %13s %11s %8s\n", "#", "change", "fits",
                "peak/usable", "step time", "vs now");
  out << line;
  int n = 0;
  for (const AdviceItem& it : items) {
    ++n;
    if (!it.simulated) {
      std::snprintf(line, sizeof line, "  %-2d %-54s %-5s %s\n", n, it.change.c_str(), "n/a",
                    it.error.substr(0, 120).c_str());
      out << line;
      continue;
    }
    const double ratio = current_step_s > 0 ? it.step_time_s / current_step_s : 0;
    std::snprintf(line, sizeof line, "  %-2d %-54s %-5s %12.0f%% %8.1f ms %7.2fx\n", n,
                  it.change.c_str(), it.fits ? "yes" : "no", 100 * it.worst_fill,
                  it.step_time_s * 1e3, ratio);
    out << line;
  }
  for (const AdviceItem& it : items)
    if (it.simulated && it.fits) {
      std::string sets;
      for (const std::string& s : it.overrides) sets += " --set " + s;
      out << "  try:" << sets << "\n";
      break;
    }
}

}  // namespace csim::app
