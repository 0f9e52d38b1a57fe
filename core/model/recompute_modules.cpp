// Megatron-Core's recompute modules as groups of layers (core/model/recompute_modules.hpp;
// docs/program.md, "Recompute modules").
#include "core/model/recompute_modules.hpp"

namespace csim::core {

namespace rm = recompute_module;

bool recompute_module_discards_output(std::uint8_t module) {
  // transformer_config.py, recompute_modules: "moe_act", "layernorm", "mla_up_proj" ... use
  // output-discarding checkpointing; "core_attn", "mlp", "moe", and "shared_experts" use normal
  // checkpointing.
  return module == rm::kMoeAct || module == rm::kLayernorm || module == rm::kMlaUpProj;
}

namespace {

// The one module a layer is re-run under, 0 for none.
std::uint8_t effective_module(const LayerSpec& l, std::uint8_t modules) {
  const std::uint8_t tags = static_cast<std::uint8_t>(l.recompute_modules & modules &
                                                      static_cast<std::uint8_t>(~rm::kCoreAttn));
  if (l.block < 0 || tags == 0) return 0;
  for (std::uint8_t first : {rm::kMoe, rm::kMlp, rm::kSharedExperts}) {
    if (tags & first) return first;
  }
  return static_cast<std::uint8_t>(tags & -tags);  // the lowest bit left
}

}  // namespace

std::vector<RecomputeGroup> recompute_groups(const ModelSpec& m, int first, int end,
                                             std::uint8_t modules) {
  std::vector<RecomputeGroup> out;
  int mla_group = -1;  // this block's mla_up_proj group, if open
  int mla_block = -1;
  for (int i = first; i < end; ++i) {
    const LayerSpec& l = m.layers[static_cast<std::size_t>(i)];
    const std::uint8_t mod = effective_module(l, modules);
    if (mod == 0) continue;
    if (mod == rm::kMlaUpProj && mla_group >= 0 && mla_block == l.block) {
      out[static_cast<std::size_t>(mla_group)].layers.push_back(i);
      continue;
    }
    const bool extends = !out.empty() && out.back().module == mod && mod != rm::kLayernorm &&
                         out.back().layers.back() == i - 1 &&
                         m.layers[static_cast<std::size_t>(i - 1)].block == l.block;
    if (extends) {
      out.back().layers.push_back(i);
      continue;
    }
    out.push_back(RecomputeGroup{mod, {i}, -1});
    if (mod == rm::kMlaUpProj) {
      mla_group = static_cast<int>(out.size()) - 1;
      mla_block = l.block;
    }
  }
  for (RecomputeGroup& g : out) {
    const int next = g.layers.back() + 1;
    if (recompute_module_discards_output(g.module) && next < end) g.consumer = next;
  }
  return out;
}

double recompute_modules_flops_per_sample(const ModelSpec& m, std::uint8_t modules) {
  double flops = 0;
  for (const RecomputeGroup& g :
       recompute_groups(m, 0, static_cast<int>(m.layers.size()), modules)) {
    for (int i : g.layers) flops += m.layers[static_cast<std::size_t>(i)].fwd_flops_per_sample;
  }
  return flops;
}

}  // namespace csim::core
