// Megatron-Core's selective recompute modules (strategy.recompute_modules; docs/program.md,
// "Recompute modules"; core/model/recompute_modules.hpp, core/lowering/recompute_modules.cpp):
// the saved bytes each module removes, derived by hand for a small MLA + MoE model, the re-run
// kernels, the hardware FLOPs, and the bad inputs.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/flops.hpp"
#include "core/program/program.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/input_error_support.hpp"

using namespace csim;
using namespace csim::core;
namespace rm = csim::core::recompute_module;

namespace {

// 2 blocks, bf16 (e = 2), s = 64, h = 256, a = 4 heads; MLA q_lora 64, kv_lora 32, d_nope 32,
// d_rope 16 (d_qk 48), d_v 24; block 0 a dense SwiGLU MLP of f = 512, block 1 a MoE of E = 4
// experts of f_e = 128, top 2 (t = s k = 128 routed copies), one shared expert (f_sh = 128).
std::string tiny(const std::string& strategy, const std::string& attention = "") {
  return R"({"cluster": {"gpus_per_node": 1, "gpu": "H100-SXM5-80GB"}, "host": {"python": false},
    "model": {"transformer": {"layers": 2, "hidden": 256, "heads": 4, "ffn_hidden": 512,
    "seq_len": 64, "vocab": 1000, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope",)" +
         attention + R"(
    "mla": {"q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
    "v_head_dim": 24},
    "moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden": 128, "shared_experts": 1,
    "first_dense_layers": 1}}},
    "training": {"global_batch": 2, "precision": "bf16", "steps": 1},
    "strategy": {"kind": "3d", "micro_batch_size": 1, )" +
         strategy + "}}";
}

Scenario parse(const std::string& json) {
  return parse_scenario_string(json, "rm.json", {});
}

int index_of(const ModelSpec& m, const std::string& name) {
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].name == name) return static_cast<int>(i);
  FAIL("no layer " + name);
  return -1;
}

Segment block_of(const ModelSpec& m, int block) {
  const std::string p = "h." + std::to_string(block) + ".";
  return Segment{index_of(m, p + "ln_1"), index_of(m, p + "mlp.residual") + 1};
}

}  // namespace

TEST_CASE("recompute modules: saved bytes drop by the recomputed modules' outputs",
          "[strategies][recompute][recompute_modules]") {
  const Scenario s = parse(tiny(R"("recompute": "selective")"));
  const ModelSpec& m = s.model;
  const Segment moe = block_of(m, 1), dense = block_of(m, 0);
  auto stored = [&](Segment sg, std::uint8_t mods) {
    return stored_activation_bytes_per_sample(m, sg, 1, false, RecomputeMode::kSelective, 1, mods);
  };
  // The default (core_attn) is today's selective: the fused MLA core saves nothing s^2, so it is
  // the "none" figure.
  const double base = stored(moe, rm::kCoreAttn);
  CHECK(base == stored_activation_bytes_per_sample(m, moe, 1, false, RecomputeMode::kNone));
  // The fused core after the RoPE saves Q, K, V (and O, the logsumexp): at least the RoPE output.
  const int rope = index_of(m, "h.1.attn.rope");
  const double qkv = 2.0 * 64 * 4 * (2 * 48 + 24);  // e s a (2 d_qk + d_v) = 61,440
  REQUIRE(m.layers[static_cast<std::size_t>(rope)].output_bytes_per_sample == qkv);
  REQUIRE(m.layers[static_cast<std::size_t>(rope + 1)].activation_bytes_per_sample > qkv);

  // layernorm: ln_1 and ln_2 keep their input (e s h) but not their fp32 rstd (4 s = 256 B, the
  // norm runs without autograd inside the checkpoint); their output's copies go: q_down's saved
  // input and shared.fc's, e s h = 2 x 64 x 256 = 32,768 each: 2 x (32,768 + 256) = 66,048.
  CHECK(base - stored(moe, rm::kLayernorm) == 66048);
  // mla_up_proj: q_up and kv_up keep their inputs (the checkpoint's), the RoPE saved nothing; the
  // core's saved Q, K, V go: 61,440.
  CHECK(base - stored(moe, rm::kMlaUpProj) == qkv);
  // moe_act: the SwiGLU of n = t f_e = 128 x 128 = 16,384 saves its input (gate and up, 2 e n =
  // 65,536) instead of 3 e n + 4 t (its FP32 routing weights) = 98,304 + 512, and experts.proj's
  // saved input e n = 32,768 goes: 66,048.
  CHECK(base - stored(moe, rm::kMoeAct) == 66048);
  // shared_experts: shared.fc keeps its input (ln_2's output, 32,768); shared.swiglu (3 e s f_sh
  // = 3 x 2 x 64 x 128 = 49,152) and shared.proj (e s f_sh = 16,384) keep nothing: 65,536.
  CHECK(base - stored(moe, rm::kSharedExperts) == 65536);
  // moe: the whole MoE MLP keeps its input (shared.fc's 32,768); the rest goes: shared.swiglu
  // 49,152 + shared.proj 16,384 + route (e s E + 8 t = 512 + 1,024 = 1,536) + experts.fc (e t h =
  // 65,536) + experts.swiglu (3 e t f_e + 4 t = 98,816) + experts.proj (e t f_e = 32,768) +
  // unpermute (0: docs/transformer.md, "Where the routing weights are applied") = 264,192 (the
  // router's input is shared.fc's: it saved nothing).
  CHECK(base - stored(moe, rm::kMoe) == 264192);
  // DeepSeek-V3's set: the three do not overlap: 66,048 + 61,440 + 66,048 = 193,536.
  CHECK(base - stored(moe, rm::kLayernorm | rm::kMlaUpProj | rm::kMoeAct) == 193536);
  // layernorm with moe: ln_2's output is the MoE checkpoint's input, freed too: 66,048 + 264,192.
  CHECK(base - stored(moe, rm::kLayernorm | rm::kMoe) == 66048 + 264192);
  // mlp on the dense block: fc keeps its input; swiglu (3 e s f = 3 x 2 x 64 x 512 = 196,608) and
  // proj (e s f = 65,536) keep nothing: 262,144. The MoE block has no dense MLP.
  CHECK(stored(dense, rm::kCoreAttn) - stored(dense, rm::kMlp) == 262144);
  CHECK(stored(moe, rm::kMlp) == base);
  // Without core_attn an eager core keeps its s^2 tensors again (the "none" figure).
  const Scenario eager =
      parse(tiny(R"("recompute": "selective")", R"("attention": {"kernel": "eager"},)"));
  const Segment emoe = block_of(eager.model, 1);
  CHECK(
      stored_activation_bytes_per_sample(eager.model, emoe, 1, false, RecomputeMode::kSelective, 1,
                                         rm::kLayernorm) ==
      Approx(stored_activation_bytes_per_sample(eager.model, emoe, 1, false, RecomputeMode::kNone) -
             66048));
}

TEST_CASE("recompute modules: the recomputed kernels run once more before the backward",
          "[strategies][recompute][recompute_modules]") {
  // global batch 2, micro-batch 1, dp 1: 2 micro-batches, one step.
  auto lowered = [](const std::string& strategy) {
    Program p = lower(parse(tiny(strategy)));
    const std::string problem = validate_program(p);
    INFO(problem);
    REQUIRE(problem.empty());
    return p;
  };
  auto recompute_kernels = [](const Program& p) {
    std::map<std::string, int> n;
    for (const Op& op : p.ops)
      if (op.kind == OpKind::kCompute && op.phase == Phase::kRecompute) {
        const std::string name = p.name_of(op);  // "mb<k> <layer>.recompute"
        ++n[name.substr(name.find(' ') + 1)];
      }
    return n;
  };
  const Program def = lowered(R"("recompute": "selective")");
  CHECK(recompute_kernels(def).empty());  // a fused core: core_attn re-runs nothing
  const Program p = lowered(
      R"("recompute": "selective", "recompute_modules": ["layernorm", "mla_up_proj", "moe_act"])");
  const auto n = recompute_kernels(p);
  // Per micro-batch: ln_1 and ln_2 of both blocks (4), q_up, kv_up, RoPE of both blocks (6), the
  // MoE block's experts.swiglu (1): 11 kernels, x 2 micro-batches = 22, each layer twice.
  int total = 0;
  for (const auto& [name, count] : n) {
    INFO(name);
    CHECK(count == 2);
    total += count;
  }
  CHECK(total == 22);
  // The hardware FLOPs add those layers' forward FLOPs for the global batch of 2.
  const Scenario s = parse(tiny(
      R"("recompute": "selective", "recompute_modules": ["layernorm", "mla_up_proj", "moe_act"])"));
  double rerun = 0;
  for (const LayerSpec& l : s.model.layers) {
    const bool in = (l.recompute_modules & (rm::kLayernorm | rm::kMlaUpProj | rm::kMoeAct)) != 0 &&
                    (l.recompute_modules & rm::kMoe) == 0;
    const bool act = l.name == "h.1.mlp.experts.swiglu";
    if (in || act) rerun += l.fwd_flops_per_sample;
  }
  CHECK(rerun > 0);
  CHECK(hardware_flops_per_step(s) == Approx(model_flops_per_step(s) + 2 * rerun));
  // The whole MoE layer: its 10 layers re-run with the token dispatch as a forward.
  const auto moe =
      recompute_kernels(lowered(R"("recompute": "selective", "recompute_modules": ["moe"])"));
  int moe_total = 0;
  for (const auto& [name, count] : moe) moe_total += count;
  CHECK(moe_total == 2 * 10);
}

TEST_CASE("recompute modules: bad inputs name the key", "[strategies][recompute_modules]") {
  using csim::test::error_of;
  InputError e =
      error_of([] { parse(tiny(R"("recompute": "selective", "recompute_modules": ["mla_up"])")); });
  CHECK(e.json_path() == "strategy.recompute_modules[0]");
  CHECK(e.hint().find("mla_up_proj") != std::string::npos);
  e = error_of([] { parse(tiny(R"("recompute": "full", "recompute_modules": ["moe_act"])")); });
  CHECK(e.json_path().find("strategy.recompute_modules") != std::string::npos);
  CHECK(e.json_path().find("strategy.recompute") != std::string::npos);
  CHECK(e.message().find("applies to recompute selective") != std::string::npos);
  e = error_of([] { parse(tiny(R"("recompute_modules": ["layernorm"])")); });
  CHECK(e.message().find("applies to recompute selective") != std::string::npos);
  // A dense GPT has no latent attention and no experts.
  e = error_of([] {
    parse_scenario_string(
        R"({"cluster": {"gpus_per_node": 1, "gpu": "H100-SXM5-80GB"}, "model": {"gpt": {"layers": 2,
        "hidden": 64, "heads": 2, "seq_len": 32, "vocab": 100}}, "training": {"global_batch": 2},
        "strategy": {"kind": "3d", "recompute": "selective",
        "recompute_modules": ["layernorm", "moe_act"]}})",
        "b.json");
  });
  CHECK(e.json_path() == "strategy.recompute_modules[1]");
  CHECK(e.message().find("no mixture-of-experts block") != std::string::npos);
  e = error_of(
      [] { parse(tiny(R"("recompute": "selective", "recompute_modules": "layernorm")")); });
  CHECK(e.json_path() == "strategy.recompute_modules");
  // null is the default: allowed with any mode (the OOM advice's full candidate sets it).
  CHECK(parse(tiny(R"("recompute": "full", "recompute_modules": null)"))
            .strategy.parallel.recompute_modules == rm::kCoreAttn);
}
