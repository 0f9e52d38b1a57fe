// Eager kernel sequences per framework (core/model/eager_kernels.hpp; docs/transformer.md, "Eager
// kernel sequences"): the Llama 3 8B block under torchtitan and as built, the RMSNorm's traffic
// derived from torchtitan's RMSNorm, torch.compile recovering the one-kernel figures, the defaults.
#include <catch2/catch.hpp>

#include <string>

#include "core/hardware/gpu_catalog.hpp"
#include "core/model/eager_kernels.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim::core;

namespace {

// Llama 3.1 8B (scenarios/models/llama3_1_8b.json) at seq 8192, bf16, on 8 H100 under STRATEGY;
// EXTRA training keys.
Scenario llama(const std::string& strategy, const std::string& extra = "") {
  const std::string text =
      R"({"cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "H100-SXM5-80GB"},
          "model": {"hf_config": ")" +
      std::string(CSIM_SOURCE_DIR) + R"(/scenarios/models/llama3_1_8b.json", "seq_len": 8192},
          "training": {"global_batch": 8, "precision": "bf16", "optimizer": "adam", "steps": 1)" +
      extra + R"(}, "strategy": )" + strategy + "}";
  return parse_scenario_string(text, "llama.json");
}

const LayerSpec& layer(const ModelSpec& m, const std::string& name) {
  for (const LayerSpec& l : m.layers)
    if (l.name == name) return l;
  FAIL("no layer " << name);
  return m.layers.front();
}

const std::string kFsdp2 = R"({"kind": "fsdp", "fsdp_version": 2})";
const std::string k3d = R"({"kind": "3d", "tp": 1, "pp": 1, "dp": 8})";
constexpr double kS = 8192, kH = 4096;

}  // namespace

TEST_CASE("framework: FSDP2 is torchtitan's, 3D Megatron's, DDP of an HF config Hugging Face's",
          "[eager]") {
  CHECK(llama(kFsdp2).training.framework == Framework::kTorchtitan);
  CHECK(llama(k3d).training.framework == Framework::kMegatronTe);
  CHECK(llama(R"({"kind": "ddp"})").training.framework == Framework::kHf);
  CHECK(llama(R"({"kind": "fsdp"})").training.framework == Framework::kHf);  // FSDP1
  CHECK(default_framework(StrategyKind::kDdp, 1, false, false) == Framework::kPlain);
  CHECK(default_framework(StrategyKind::kFsdp, 2, true, true) == Framework::kMegatronTe);
  // Given, it wins over the strategy's.
  CHECK(llama(kFsdp2, R"(, "framework": "plain")").training.framework == Framework::kPlain);
}

TEST_CASE("a Llama 3 8B block: 13 forward kernels as built, 36 under torchtitan", "[eager]") {
  // As built (megatron_te): ln_1 1, qkv 1, rope 2, flash attention 1, proj 1, residual 1,
  // ln_2 1, fc 1, swiglu 2, proj 1, residual 1 = 13. torchtitan: each RMSNorm 8 (cast, pow,
  // mean, add, rsqrt, mul, cast back, * weight), q, k, v 3 GEMMs, RoPE 2 x 3 + the k and v
  // repeat 2 = 8, gate and up 2 GEMMs: 8 + 3 + 8 + 1 + 1 + 1 + 8 + 2 + 2 + 1 + 1 = 36.
  CHECK(block_forward_kernels(llama(k3d).model, 1) == 13);
  CHECK(block_forward_kernels(llama(kFsdp2).model, 1) == 36);
  // torch.compile fuses them again: ln_1, rope+repeat, swiglu and each norm one kernel; the
  // residual add and the next norm are one chain (both replicated, the same block):
  // ln_1 1, qkv 3, rope 1, attention 1, proj 1, residual+ln_2 1, fc 2, swiglu 1, proj 1,
  // residual 1 = 13.
  CHECK(block_forward_kernels(llama(kFsdp2, R"(, "compile": true)").model, 1) == 13);
}

TEST_CASE("torchtitan's RMSNorm moves 36 bytes per element forward, 84 backward, in bf16",
          "[eager]") {
  // Per element (e = 2): x.float() 2 + 4, pow 4 + 4, mean 4, x * rstd 4 + 4, type_as 4 + 2,
  // * weight 2 + 2 = 36 (28 + 4e); backward 68 + 8e = 84; saved: the fp32 copy (4) and the
  // normalized output (2) per element, rstd 4 per row. As built: 2e = 4 forward, 5e = 10
  // backward (+ 4 per row), saved the input 2 per element + 4 per row.
  const Scenario eager_run = llama(kFsdp2), built_run = llama(k3d);
  const Scenario compiled_run = llama(kFsdp2, R"(, "compile": true)");
  const Scenario fused_run = llama(kFsdp2, R"(, "fused_rmsnorm": true)");
  const LayerSpec& eager = layer(eager_run.model, "h.1.ln_1");
  const LayerSpec& built = layer(built_run.model, "h.1.ln_1");
  CHECK(eager.fwd_bytes_per_sample == Approx(36 * kS * kH));
  CHECK(eager.bwd_bytes_per_sample == Approx(84 * kS * kH));
  CHECK(eager.activation_bytes_per_sample == Approx(6 * kS * kH + 4 * kS));
  CHECK(built.fwd_bytes_per_sample == Approx(4 * kS * kH));
  CHECK(built.activation_bytes_per_sample == Approx(2 * kS * kH + 4 * kS));
  // The one-kernel figures are kept beside the eager ones, for torch.compile.
  CHECK(eager.fused_fwd_bytes_per_sample == Approx(built.fwd_bytes_per_sample));
  CHECK(eager.fused_activation_bytes_per_sample == Approx(built.activation_bytes_per_sample));
  // Compiled, ln_1 is alone in its chain (a GEMM on each side): one kernel, the built traffic.
  const LayerSpec& compiled = layer(compiled_run.model, "h.1.ln_1");
  CHECK(compiled.kernels == 1);
  CHECK(compiled.fwd_bytes_per_sample == Approx(built.fwd_bytes_per_sample));
  // torchtitan's fused_rmsnorm: one kernel, eager or not.
  const LayerSpec& fused = layer(fused_run.model, "h.1.ln_1");
  CHECK(fused.kernels == 1);
  CHECK(fused.fwd_bytes_per_sample == Approx(built.fwd_bytes_per_sample));
}

TEST_CASE("torchtitan's RoPE and GQA repeat: bytes from the complex multiply and the copies",
          "[eager]") {
  // Rotated elements n = s (a + g) d = 8192 x 40 x 128; complex RoPE 16 + 2e = 20 B each; the
  // cos / sin tables 2 e s d; the repeat of k and v: 2 (s g d + s a d) e.
  const double n = kS * 40 * 128, tables = 2 * 2 * kS * 128;
  const double repeat = 2 * (kS * 8 * 128 + kS * 32 * 128) * 2;
  const Scenario run = llama(kFsdp2);
  const LayerSpec& rope = layer(run.model, "h.1.attn.rope");
  CHECK(rope.kernels == 8);
  CHECK(rope.fwd_bytes_per_sample == Approx(20 * n + tables + repeat));
  // Its output is q and the repeated k and v: 3 s a d e.
  CHECK(rope.output_bytes_per_sample == Approx(3 * kS * 32 * 128 * 2));
}

TEST_CASE("torchtitan and Hugging Face attend through SDPA: FlashAttention-2 on an H100",
          "[eager]") {
  // The GPU's default on Hopper is FlashAttention-3 (Megatron's TE); SDPA's flash backend is FA2.
  CHECK(llama(k3d).model.transformer_config.attention_kernel == AttentionKernel::kFlash3);
  CHECK(llama(kFsdp2).model.transformer_config.attention_kernel == AttentionKernel::kFlash2);
  CHECK(framework_attention_kernel(Framework::kHf, find_gpu("V100-SXM2-32GB")->gpu) ==
        AttentionKernel::kEager);
  CHECK_FALSE(framework_attention_kernel(Framework::kPlain, find_gpu("H100-SXM5-80GB")->gpu));
}
