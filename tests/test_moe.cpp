// Mixture-of-experts blocks (core/model/moe_layers.hpp; docs/transformer.md, "Mixture of
// experts"): parameter counts total and active, the layers of an MoE block, which blocks are MoE,
// model FLOPs on the experts a token uses, the Hugging Face import of Mixtral and Qwen3-MoE, the
// bad inputs, and a lowering that runs them.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/model/model_transformer.hpp"
#include "core/model/moe_layers.hpp"
#include "core/model/transformer_flops.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/input_error_support.hpp"
#include "tests/layer_lookup.hpp"
#include "tests/test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

Scenario hf(const std::string& file, const std::string& strategy = "\"kind\": \"single\"") {
  const std::string path = test::repo_path("scenarios/models/" + file);
  return parse_scenario_string(
      R"({"cluster": {"gpus_per_node": 8, "gpu": "H100-SXM5-80GB"}, "model": {"hf_config": ")" +
          path + R"(", "seq_len": 4096}, "training": {"global_batch": 8, "precision": "bf16",
          "steps": 1}, "strategy": {)" +
          strategy + "}}",
      "moe.json");
}

// A small MoE transformer: 4 blocks, h 256, 4 heads, SwiGLU ffn 512, s 64; `moe` and `strategy`
// as given.
std::string tiny(const std::string& moe, const std::string& strategy = "\"kind\": \"single\"",
                 int gpus = 1) {
  return R"({"cluster": {"gpus_per_node": )" + std::to_string(gpus) +
         R"(, "gpu": "H100-SXM5-80GB"}, "model": {"transformer": {"layers": 4, "hidden": 256,
         "heads": 4, "ffn_hidden": 512, "seq_len": 64, "vocab": 1000, "mlp": "swiglu",
         "norm": "rmsnorm", "position": "rope", "moe": )" +
         moe + R"(}}, "training": {"global_batch": 8, "precision": "bf16", "steps": 2},
         "strategy": {)" +
         strategy + "}}";
}

using csim::test::error_of;

using csim::test::layer;

}  // namespace

TEST_CASE("Mixtral 8x7B: 46,702,792,704 parameters, 12,879,925,248 active", "[moe][hf_config]") {
  // Per block: attention q, o 4096^2 each + k, v 4096 x 1024 each = 41,943,040; two RMSNorms
  // 8,192; the router 4096 x 8 = 32,768; 8 experts of 3 x 4096 x 14,336 = 176,160,768 each =
  // 1,409,286,144. 32 blocks = 46,440,644,608; + token embedding and LM head 2 x 32,000 x 4,096 =
  // 262,144,000 + the final norm 4,096 = 46,702,792,704 (the issue's figure).
  // Active: 2 of the 8 experts, 352,321,536 per block: 394,305,536 x 32 + 262,148,096 =
  // 12,879,925,248.
  const Scenario s = hf("mixtral_8x7b.json");
  CHECK(s.model.total_params() == 46'702'792'704LL);
  CHECK(s.model.active_params() == 12'879'925'248LL);
  CHECK(s.model.transformer_config.moe.experts == 8);
  CHECK(s.model.transformer_config.moe.top_k == 2);
  CHECK(expert_ffn_hidden(s.model.transformer_config) == 14336);
}

TEST_CASE("Qwen3-30B-A3B: 30,532,122,624 parameters, 3,353,032,704 active", "[moe][hf_config]") {
  // Per block: q 2048 x 4096 = 8,388,608, k and v 2048 x 512 = 1,048,576 each, o 4096 x 2048 =
  // 8,388,608 (18,874,368); QK-norm 2 x 128; two RMSNorms 4,096; the router 2048 x 128 = 262,144;
  // 128 experts of 3 x 2048 x 768 = 4,718,592 each = 603,979,776: 623,120,640 per block, x 48 =
  // 29,909,790,720; + embedding and LM head 2 x 151,936 x 2,048 = 622,329,856 + final norm 2,048
  // = 30,532,122,624 ("30.5B"). Active: 8 experts, 37,748,736 per block: 56,889,600 x 48 +
  // 622,331,904 = 3,353,032,704 ("3.3B activated").
  const Scenario s = hf("qwen3_30b_a3b.json");
  CHECK(s.model.total_params() == 30'532'122'624LL);
  CHECK(s.model.active_params() == 3'353'032'704LL);
  CHECK(s.model.transformer_config.moe.top_k == 8);
}

TEST_CASE("An MoE block: router, routing, shared experts, grouped expert GEMMs, un-permutation",
          "[moe]") {
  const Scenario sc = parse_scenario_string(
      tiny(R"({"experts": 4, "top_k": 2, "expert_ffn_hidden": 128, "shared_experts": 1})"),
      "tiny.json");
  const ModelSpec& m = sc.model;
  std::vector<std::string> mlp;
  for (const LayerSpec& l : m.layers)
    if (l.block == 0 && l.name.find("h.0.mlp.") == 0) mlp.push_back(l.name);
  CHECK(mlp == std::vector<std::string>{"h.0.mlp.shared.fc", "h.0.mlp.shared.swiglu",
                                        "h.0.mlp.shared.proj", "h.0.mlp.router", "h.0.mlp.route",
                                        "h.0.mlp.permute", "h.0.mlp.experts.fc",
                                        "h.0.mlp.experts.swiglu", "h.0.mlp.experts.proj",
                                        "h.0.mlp.unpermute", "h.0.mlp.residual"});
  // s = 64 tokens, k = 2: t = 128 routed copies, 32 per expert (balanced). experts.fc: 4 experts
  // of 256 x 2 x 128 = 65,536 parameters = 262,144, 2 of 4 inactive for a token (131,072); FLOPs
  // 2 t h 2 f_e = 2 x 128 x 256 x 256 = 16,777,216; one grouped GEMM of 4 x (32 x 256 x 256).
  const LayerSpec& fc = layer(m, "h.0.mlp.experts.fc");
  CHECK(fc.params == 262'144);
  CHECK(fc.inactive_params == 131'072);
  CHECK(fc.fwd_flops_per_sample == Approx(16'777'216.0));
  CHECK(fc.gemm.batch == 4);
  CHECK(fc.gemm.m == 32);
  CHECK(fc.gemm.n == 256);
  CHECK(fc.gemm.k == 256);
  // The router: 256 x 4 parameters, 2 s h E = 131,072 FLOPs; the shared expert one dense SwiGLU
  // MLP of width 128 (1 x f_e): fc 256 x 256, proj 128 x 256.
  CHECK(layer(m, "h.0.mlp.router").params == 1024);
  CHECK(layer(m, "h.0.mlp.router").fwd_flops_per_sample == Approx(131'072.0));
  CHECK(layer(m, "h.0.mlp.shared.fc").params == 65'536);
  CHECK(layer(m, "h.0.mlp.shared.proj").params == 32'768);
  // The layer count the limits check uses is the count built.
  CHECK(transformer_layer_count(m.transformer_config) ==
        static_cast<std::int64_t>(m.layers.size()));
}

TEST_CASE("The routing weights are applied in the activation: the un-permutation saves nothing",
          "[moe]") {
  // docs/transformer.md, "Where the routing weights are applied" (Megatron-Core's unpermute
  // without probs; WeightedSwiGLUFunction saving its input and the FP32 weights).
  const Scenario sc = parse_scenario_string(
      tiny(R"({"experts": 4, "top_k": 2, "expert_ffn_hidden": 128})"), "tiny.json");
  const ModelSpec& m = sc.model;
  // s = 64, k = 2: t = 128 copies, n = t f_e = 128 x 128 = 16,384 SwiGLU outputs, e = 2 (bf16).
  // experts.swiglu: gate, up and silu(gate) (3 e n = 98,304) + the t FP32 weights (4 t = 512)
  // = 98,816.
  CHECK(layer(m, "h.0.mlp.experts.swiglu").activation_bytes_per_sample == Approx(98'816.0));
  // unpermute: 0 (it held e t h = 2 x 128 x 256 = 65,536 before); its output is still e s h =
  // 2 x 64 x 256 = 32,768.
  CHECK(layer(m, "h.0.mlp.unpermute").activation_bytes_per_sample == 0.0);
  CHECK(layer(m, "h.0.mlp.unpermute").output_bytes_per_sample == Approx(32'768.0));
}

TEST_CASE("Which blocks are MoE: the dense prefix and every k-th block", "[moe]") {
  const Scenario sc = parse_scenario_string(
      tiny(R"({"experts": 4, "top_k": 1, "first_dense_layers": 1, "every_k_layers": 2})"),
      "tiny.json");
  const TransformerConfig& c = sc.model.transformer_config;
  // Blocks 0..3: block 0 is in the dense prefix; of the rest, (i + 1) % 2 == 0 holds for 1 and 3.
  CHECK_FALSE(block_is_moe(c, 0));
  CHECK(block_is_moe(c, 1));
  CHECK_FALSE(block_is_moe(c, 2));
  CHECK(block_is_moe(c, 3));
  CHECK(layer(sc.model, "h.2.mlp.fc").params == 256 * 1024);  // the dense SwiGLU MLP, h x 2f
  CHECK(transformer_layer_count(c) == static_cast<std::int64_t>(sc.model.layers.size()));
}

TEST_CASE("Model FLOPs count the experts a token uses", "[moe]") {
  const Scenario moe = parse_scenario_string(
      tiny(R"({"experts": 8, "top_k": 2, "expert_ffn_hidden": 128})"), "tiny.json");
  const TransformerConfig& c = moe.model.transformer_config;
  // One block, one sample (s = 64, h = 256, head_dim 64, 4 heads, MHA): projections 2 s h (a + 2a)
  // d + 2 s a d h = 2 x 64 x 256 x 768 + 2 x 64 x 256 x 256 = 33,554,432; the MoE MLP: router
  // 2 s h E = 262,144 and 2 of the experts 6 s h k f_e = 6 x 64 x 256 x 2 x 128 = 25,165,824;
  // attention 4 a d (s^2 / 2 causal pairs, attended_pairs) = 4 x 4 x 64 x 2,048 = 2,097,152.
  const double block = 33'554'432.0 + 262'144.0 + 25'165'824.0 + 2'097'152.0;
  CHECK(transformer_forward_flops(c).blocks == Approx(4 * block));
  // The per-token counts that use N use the active parameters.
  const FlopsPerToken t = transformer_flops_per_token(moe.model);
  CHECK(t.six_n_attention ==
        Approx(6.0 * static_cast<double>(moe.model.active_params()) + 12.0 * 4 * 4 * 64 * 64));
}

TEST_CASE("MoE bad inputs name the key", "[moe]") {
  InputError e =
      error_of([] { parse_scenario_string(tiny(R"({"experts": 4, "top_k": 5})"), "bad.json"); });
  CHECK(e.json_path() == "model.transformer.moe.top_k");
  CHECK(e.message().find("top_k 5 is not between 1 and experts (4)") != std::string::npos);
  e = error_of([] {
    parse_scenario_string(tiny(R"({"experts": 4, "top_k": 1, "first_dense_layers": 4})"),
                          "bad.json");
  });
  CHECK(e.json_path() == "model.transformer.moe.first_dense_layers");
  // Tensor parallelism would split the experts (not modelled yet).
  e = error_of([] {
    parse_scenario_string(
        tiny(R"({"experts": 4, "top_k": 1})", R"("kind": "tensor_parallel", "tp": 2)", 2),
        "bad.json");
  });
  CHECK(e.json_path().find("strategy.tp") != std::string::npos);
  CHECK(e.json_path().find("model.transformer.moe") != std::string::npos);
}

TEST_CASE("An MoE model lowers under DDP and FSDP2: every expert GEMM on every rank", "[moe]") {
  for (const std::string& strategy :
       {std::string(R"("kind": "ddp")"), std::string(R"("kind": "fsdp", "fsdp_version": 2)")}) {
    INFO(strategy);
    const Scenario sc = parse_scenario_string(
        tiny(R"({"experts": 4, "top_k": 2, "expert_ffn_hidden": 128})", strategy, 2), "t.json");
    const Program p = lower(sc);
    CHECK(validate_program(p).empty());
    // 2 steps x 4 blocks of expert fc forward kernels on each rank that is emitted; each runs one
    // sample's routed copies per micro-batch of 4 samples: 4 x 16,777,216 FLOPs.
    int fc = 0;
    for (const Op& op : p.ops) {
      if (op.kind != OpKind::kCompute) continue;
      const std::string name = p.name_of(op);
      if (name.find("mlp.experts.fc.fwd") == std::string::npos) continue;
      ++fc;
      CHECK(op.flops == Approx(4 * 16'777'216.0));
    }
    CHECK(fc >= 2 * 4);
  }
}

TEST_CASE("GPT-OSS-120B: 116,829,156,672 parameters, 5,711,982,912 active", "[moe][hf_config]") {
  // Per block (h 2880, 64 heads of 64, 8 key/value heads, biases on q, k, v and o): q, k, v
  // 2880 x (4096 + 2 x 512) + 5120 = 14,750,720; o 4096 x 2880 + 2880 = 11,799,360; 64 sinks;
  // two RMSNorms 5,760; the router 2880 x 128 + its 128 biases = 368,768; 128 experts of
  // gate_up 2880 x 5760 + 5760 and down 2880 x 2880 + 2880 = 24,891,840 each = 3,186,155,520:
  // 3,213,080,192 per block, x 36 = 115,670,886,912; + embedding and LM head 2 x 201,088 x 2,880 =
  // 1,158,266,880 + the final norm 2,880 = 116,829,156,672 (the model card's 116.83B).
  // Active: 4 of 128 experts, 124 x 24,891,840 = 3,086,588,160 inactive per block, x 36 =
  // 111,117,173,760: 5,711,982,912 (the card's 5.13B leaves out the 579,133,440-parameter
  // embedding table).
  const Scenario s = hf("gpt_oss_120b.json");
  CHECK(s.model.total_params() == 116'829'156'672LL);
  CHECK(s.model.active_params() == 5'711'982'912LL);
  const TransformerConfig& c = s.model.transformer_config;
  CHECK(c.moe.experts == 128);
  CHECK(c.moe.top_k == 4);
  CHECK(c.moe.expert_bias);
  CHECK(c.moe.router.bias);
  CHECK(c.attention_sinks);
  // layer_types alternates sliding_attention and full_attention from block 0: a window of 128
  // with every 2nd block full.
  CHECK(c.window == 128);
  CHECK(c.global_every == 2);
  CHECK(block_is_windowed(c, 0));
  CHECK_FALSE(block_is_windowed(c, 1));
  CHECK(layer(s.model, "h.0.attn.core").params == 64);
}
