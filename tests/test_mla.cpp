// Multi-head latent attention and DeepSeek-V3's router (core/model/mla_layers.hpp,
// core/model/moe_layers.cpp; docs/transformer.md, "Multi-head latent attention" and "Router"):
// DeepSeek-V3's parameter counts through its Hugging Face config, the layers of an MLA block and
// their FLOPs, the kernel MLA runs, the bad inputs, and a lowering that runs it.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/model/mla_layers.hpp"
#include "core/model/model_transformer.hpp"
#include "core/model/transformer_flops.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/input_error_support.hpp"
#include "tests/layer_lookup.hpp"
#include "tests/test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

Scenario deepseek_v3() {
  const std::string path = test::repo_path("scenarios/models/deepseek_v3.json");
  return parse_scenario_string(
      R"({"cluster": {"gpus_per_node": 8, "gpu": "H100-SXM5-80GB"}, "model": {"hf_config": ")" +
          path + R"(", "seq_len": 4096}, "training": {"global_batch": 8, "precision": "bf16",
          "steps": 1}, "strategy": {"kind": "single"}})",
      "dsv3.json");
}

// A small MLA transformer: 2 blocks, h 256, 4 heads, q_lora 64, kv_lora 32, d_nope 32, d_rope 16,
// d_v 24, s 64; `extra` adds keys to model.transformer.
std::string tiny(const std::string& extra = "",
                 const std::string& mla =
                     R"({"q_lora_rank": 64, "kv_lora_rank": 32,
    "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 24})",
                 const std::string& strategy = R"("kind": "single")", int gpus = 1) {
  return R"({"cluster": {"gpus_per_node": )" + std::to_string(gpus) +
         R"(, "gpu": "H100-SXM5-80GB"}, "model": {"transformer": {"layers": 2, "hidden": 256,
         "heads": 4, "ffn_hidden": 512, "seq_len": 64, "vocab": 1000, "mlp": "swiglu",
         "norm": "rmsnorm", "position": "rope", "mla": )" +
         mla + extra + R"(}}, "training": {"global_batch": 8, "precision": "bf16", "steps": 2},
         "strategy": {)" +
         strategy + "}}";
}

using csim::test::error_of;

using csim::test::layer;

}  // namespace

TEST_CASE("DeepSeek-V3: 671,026,419,200 parameters, 37,552,297,472 active", "[mla][hf_config]") {
  // Per block, MLA (h 7168, 128 heads, q_lora 1536, kv_lora 512, d_nope 128, d_rope 64, d_v 128):
  // q_a 7168 x 1536 = 11,010,048; q_a_layernorm 1,536; q_b 1536 x 128 x 192 = 37,748,736;
  // kv_a_proj_with_mqa 7168 x 576 = 4,128,768; kv_a_layernorm 512; kv_b 512 x 128 x 256 =
  // 16,777,216; o_proj 128 x 128 x 7168 = 117,440,512: 187,107,328; + two RMSNorms 14,336 =
  // 187,121,664, x 61 = 11,414,421,504.
  // Dense MLP (blocks 0-2): 3 x 7168 x 18432 = 396,361,728, x 3 = 1,189,085,184.
  // MoE MLP (blocks 3-60): router 256 x 7168 = 1,835,008 + its score-correction bias 256; 256
  // experts of 3 x 7168 x 2048 = 44,040,192 = 11,274,289,152; one shared expert 44,040,192:
  // 11,320,164,608, x 58 = 656,569,547,264.
  // Embedding and LM head 2 x 129,280 x 7,168 = 1,853,358,080; final norm 7,168.
  // Sum: 671,026,419,200 (the multi-token-prediction module excluded).
  // Active: 8 of 256 experts: 248 x 44,040,192 = 10,921,967,616 inactive per MoE block, x 58 =
  // 633,474,121,728; 671,026,419,200 - 633,474,121,728 = 37,552,297,472.
  const Scenario s = deepseek_v3();
  CHECK(s.model.total_params() == 671'026'419'200LL);
  CHECK(s.model.active_params() == 37'552'297'472LL);
  // transformers registers e_score_correction_bias as a buffer, not a parameter: 58 blocks x 256
  // fewer = 671,026,404,352 under that convention.
  std::int64_t bias = 0;
  for (const LayerSpec& l : s.model.layers)
    if (l.name.find("mlp.router") != std::string::npos) bias += l.second_tensor_params;
  CHECK(bias == 58 * 256);
  CHECK(s.model.total_params() - bias == 671'026'404'352LL);
  const TransformerConfig& c = s.model.transformer_config;
  CHECK(c.mla.q_lora_rank == 1536);
  CHECK(c.moe.router.score == RouterScore::kSigmoid);
  CHECK(c.moe.router.groups == 8);
  CHECK(c.moe.router.group_top_k == 4);
  CHECK(c.moe.first_dense_layers == 3);
  // d_qk 192 != d_v 128: FlashAttention-2 cannot run it, H100's default (flash3) can.
  CHECK(c.attention_kernel != AttentionKernel::kFlash2);
}

TEST_CASE("An MLA block: latent projections, norms, RoPE and the core of d_qk and d_v heads",
          "[mla]") {
  const Scenario sc = parse_scenario_string(tiny(), "tiny.json");
  const ModelSpec& m = sc.model;
  // h 256, a 4, q_lora 64, kv_lora 32, d_nope 32, d_rope 16 (d_qk 48), d_v 24.
  CHECK(layer(m, "h.0.attn.q_down").params == 256 * 64);
  CHECK(layer(m, "h.0.attn.q_norm").params == 64);
  CHECK(layer(m, "h.0.attn.q_up").params == 64 * 4 * 48);
  CHECK(layer(m, "h.0.attn.kv_down").params == 256 * (32 + 16));
  CHECK(layer(m, "h.0.attn.kv_norm").params == 32);
  CHECK(layer(m, "h.0.attn.kv_up").params == 32 * 4 * (32 + 24));
  CHECK(layer(m, "h.0.attn.proj").params == 4 * 24 * 256);
  // kv_down reads ln_1's output, which q_down already saved.
  CHECK(layer(m, "h.0.attn.kv_down").activation_bytes_per_sample == 0);
  CHECK(layer(m, "h.0.attn.q_down").activation_bytes_per_sample == 2.0 * 64 * 256);
  // The core: causal, s 64: attended pairs s^2 / 2 = 2,048 per head; FLOPs 2 P a (d_qk + d_v) =
  // 2 x 2,048 x 4 x 72 = 1,179,648.
  const LayerSpec& core = layer(m, "h.0.attn.core");
  AttentionShape sh;
  sh.seq_len = 64;
  const double pairs = attended_pairs(sh);
  CHECK(pairs == 2048.0);
  CHECK(core.fwd_flops_per_sample == Approx(1'179'648.0));
  CHECK(core.fused_attention.head_dim == 48);
  CHECK(core.fused_attention.v_head_dim == 24);
  // Model FLOPs: the block's projection GEMMs are exactly mla_projection_flops.
  double gemm = 0;
  for (const char* n : {"q_down", "q_up", "kv_down", "kv_up", "proj"})
    gemm += layer(m, std::string("h.0.attn.") + n).fwd_flops_per_sample;
  CHECK(gemm == Approx(mla_projection_flops(m.transformer_config, 64)));
  CHECK(transformer_layer_count(m.transformer_config) ==
        static_cast<std::int64_t>(m.layers.size()));
  // Without q_lora_rank, q comes straight from h: one layer h -> a d_qk.
  const Scenario direct = parse_scenario_string(
      tiny("", R"({"kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
                  "v_head_dim": 24})"),
      "tiny.json");
  CHECK(layer(direct.model, "h.0.attn.q").params == 256 * 4 * 48);
  CHECK(transformer_layer_count(direct.model.transformer_config) ==
        static_cast<std::int64_t>(direct.model.layers.size()));
}

TEST_CASE("A sigmoid router with a bias and group-limited selection costs more routing kernels",
          "[mla][moe]") {
  auto route = [](const std::string& router) {
    const Scenario sc = parse_scenario_string(
        tiny(R"(, "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 128, "router": )" +
             router + "}"),
        "tiny.json");
    return layer(sc.model, "h.0.mlp.route");
  };
  const LayerSpec softmax = route(R"({"score": "softmax"})");
  const LayerSpec grouped = route(R"({"score": "sigmoid", "bias": true, "groups": 4,
                                      "group_top_k": 2})");
  // s E = 64 x 8 = 512 scores: softmax 5 + top-k and loss 3 = 8 FLOPs each; sigmoid 4 + 3, the
  // bias 1, the groups 3: 11 each; 6 kernels + 1 + 3.
  CHECK(softmax.fwd_flops_per_sample == 8.0 * 512);
  CHECK(grouped.fwd_flops_per_sample == 11.0 * 512);
  CHECK(softmax.kernels == 6);
  CHECK(grouped.kernels == 10);
}

TEST_CASE("MLA and router bad inputs name the key", "[mla]") {
  InputError e = error_of([] { parse_scenario_string(tiny(R"(, "kv_heads": 2)"), "bad.json"); });
  CHECK(e.json_path() == "model.transformer.kv_heads");
  e = error_of(
      [] { parse_scenario_string(tiny(R"(, "attention": {"kernel": "flash2"})"), "bad.json"); });
  CHECK(e.json_path() == "model.transformer.attention.kernel");
  CHECK(e.message().find("flash2 needs q, k and v heads of one width") != std::string::npos);
  e = error_of([] {
    parse_scenario_string(tiny("", R"({"kv_lora_rank": 32, "qk_nope_head_dim": 32,
                                  "qk_rope_head_dim": 15, "v_head_dim": 24})"),
                          "bad.json");
  });
  CHECK(e.json_path() == "model.transformer.mla.qk_rope_head_dim");
  e = error_of([] {
    parse_scenario_string(tiny(R"(, "moe": {"experts": 8, "top_k": 2, "router": {"groups": 3}})"),
                          "bad.json");
  });
  CHECK(e.json_path() == "model.transformer.moe.router.groups");
  e = error_of([] {
    parse_scenario_string(tiny(R"(, "moe": {"experts": 8, "top_k": 4,
                                   "router": {"groups": 4, "group_top_k": 1}})"),
                          "bad.json");
  });
  CHECK(e.json_path() == "model.transformer.moe.router.group_top_k");
  CHECK(e.message().find("hold fewer than top_k (4)") != std::string::npos);
}

TEST_CASE("An MLA + MoE model lowers under DDP with expert parallelism", "[mla]") {
  const Scenario sc =
      parse_scenario_string(tiny(R"(, "moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden": 128,
              "router": {"score": "sigmoid", "bias": true}})",
                                 R"({"q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32,
               "qk_rope_head_dim": 16, "v_head_dim": 24})",
                                 R"("kind": "3d", "dp": 2, "ep": 2)", 2),
                            "t.json");
  const Program p = lower(sc);
  CHECK(validate_program(p).empty());
  int cores = 0;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kCompute && p.name_of(op).find("attn.core.fwd") != std::string::npos)
      ++cores;
  // 2 steps x 2 blocks x 2 ranks (or the mirrored half): at least one rank's 4 cores.
  CHECK(cores >= 4);
}
