// Optimizer and clipping kernels by PyTorch release (core/lowering/optimizer_kernels.hpp;
// docs/program.md, "Optimizer and clipping kernels") and Hugging Face's eager attention masks and
// cross-entropy (core/model/eager_kernels.hpp; docs/transformer.md, "Eager kernel sequences").
#include <catch2/catch.hpp>

#include <string>

#include "core/lowering/lowering.hpp"
#include "core/lowering/optimizer_kernels.hpp"
#include "core/lowering/program_builder.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim::core;

namespace {

// GPT-2 124M (scenarios/models/gpt2.json) at seq 1024, fp32, on 2 GPUs under STRATEGY; EXTRA
// training keys.
Scenario gpt2(const std::string& strategy, const std::string& extra = "") {
  const std::string text =
      R"({"cluster": {"nodes": 1, "gpus_per_node": 2, "gpu": "A100-SXM4-80GB"},
          "model": {"hf_config": ")" +
      std::string(CSIM_SOURCE_DIR) + R"(/scenarios/models/gpt2.json", "seq_len": 1024},
          "training": {"global_batch": 8, "precision": "fp32", "optimizer": "adam", "steps": 2)" +
      extra + R"(}, "strategy": )" + strategy + "}";
  return parse_scenario_string(text, "gpt2.json");
}

const std::string kDdp = R"({"kind": "ddp"})";

int count_named(const Program& p, const std::string& prefix) {
  int n = 0;
  for (const Op& op : p.ops)
    if (p.name_of(op).rfind(prefix, 0) == 0) ++n;
  return n;
}

}  // namespace

TEST_CASE("GPT-2 124M holds 148 parameter tensors", "[optimizer]") {
  // wte and wpe (the embedding's second table) 2; per block ln_1, c_attn, c_proj, ln_2, c_fc,
  // c_proj each a weight and a bias: 12 x 12 = 144; ln_f 2; lm_head tied to wte: 148 (the
  // tensors transformers.AdamW loops over for GPT2LMHeadModel).
  const Scenario s = gpt2(kDdp);
  CHECK(parameter_tensors(s.model) == 148);
  CHECK(s.model.total_params() == 124439808);
  // The largest is wte, 50257 x 768.
  CHECK(largest_parameter_tensor(s.model) == 50257LL * 768);
}

TEST_CASE("for-loop Adam: 7 kernels per tensor, 76 B per fp32 parameter", "[optimizer]") {
  TrainingSpec t;
  t.optimizer = OptimizerKind::kAdam;
  t.pytorch_version = 108;
  const PrecisionBytes fp32 = precision_bytes(Precision::kFp32, Dtype::kFp16);
  const OptimizerLaunch o = optimizer_launch(t, fp32, 1000, 10, true);
  // mul_ 8 + add_ 12 + mul_ 8 + addcmul_ 16 + sqrt 8 + add_ 8 + addcdiv_ 16 = 76 B per element
  // = 14 s + 3 G + 2 P with s = G = P = 4.
  CHECK(o.kernels == 70);
  CHECK(o.traffic == 76 * 1000);
  CHECK(o.python_ops == 80);  // 7 ops + the loop body per tensor
  // The same step in PyTorch 2.x: foreach's 5 kernels, params x (2W + G + 2 x 8) = 28 B.
  t.pytorch_version = 205;
  const OptimizerLaunch f = optimizer_launch(t, fp32, 1000, 10, true);
  CHECK(f.kernels == 5);
  CHECK(f.traffic == 28 * 1000);
  // A fused library optimizer (Megatron, DeepSpeed) ignores the release.
  t.pytorch_version = 108;
  CHECK(optimizer_launch(t, fp32, 1000, 10, false).kernels == 5);
}

TEST_CASE("for-loop SGD: 1 kernel per tensor, 3 with momentum", "[optimizer]") {
  TrainingSpec t;
  t.optimizer = OptimizerKind::kSgd;
  t.pytorch_version = 112;
  const PrecisionBytes fp32 = precision_bytes(Precision::kFp32, Dtype::kFp16);
  // p.add_(grad): reads P and G, writes P: 12 B.
  CHECK(optimizer_launch(t, fp32, 100, 4, true).kernels == 4);
  CHECK(optimizer_launch(t, fp32, 100, 4, true).traffic == 12 * 100);
  // buf.mul_ (8) + buf.add_(grad) (12) + p.add_(buf) (12) = 32 = 5 s + G + 2 P.
  t.sgd_momentum = 0.9;
  CHECK(optimizer_launch(t, fp32, 100, 4, true).kernels == 12);
  CHECK(optimizer_launch(t, fp32, 100, 4, true).traffic == 32 * 100);
}

TEST_CASE("clip_grad_norm_: the host waits before PyTorch 1.10, foreach from 2.0", "[optimizer]") {
  TrainingSpec t;
  t.clip_grad_norm = 1.0;
  const PrecisionBytes fp32 = precision_bytes(Precision::kFp32, Dtype::kFp16);
  t.pytorch_version = 108;
  ClipLaunch c = clip_grad_norm_launch(t, fp32, 1000, 10);
  CHECK(c.host_sync);  // `if clip_coef < 1:` at v1.8.0
  CHECK(c.norms.kernels + c.total.kernels ==
        15);                           // 10 norms + stack, norm, + eps, reciprocal, * max_norm
  CHECK(c.norms.traffic == 4 * 1000);  // every gradient read once
  CHECK(c.scale.kernels == 10);
  CHECK(c.scale.traffic == 8 * 1000);  // read and written
  t.pytorch_version = 110;             // pytorch PR 61042: clamp, no host read
  c = clip_grad_norm_launch(t, fp32, 1000, 10);
  CHECK_FALSE(c.host_sync);
  CHECK(c.norms.kernels + c.total.kernels == 15);
  t.pytorch_version = 200;  // pytorch PR 91846: _foreach_norm ... _foreach_mul_
  c = clip_grad_norm_launch(t, fp32, 1000, 10);
  CHECK(c.norms.kernels + c.total.kernels == 6);
  CHECK(c.scale.kernels == 1);
}

TEST_CASE("DDP on PyTorch 1.8 with clipping: per-layer ops and the host wait", "[optimizer]") {
  const Scenario old = gpt2(kDdp, R"(, "pytorch_version": "1.8.1", "clip_grad_norm": 1.0)");
  CHECK(old.training.pytorch_version == 108);
  const Program p = lower(old);
  // GPT-2's layers with parameters: embed, 6 per block x 12, ln_f = 74 (lm_head is tied); per
  // rank and step one optimizer op each: 2 ranks x 2 steps x 74.
  CHECK(count_named(p, "optimizer.step (adam) ") == 2 * 2 * 74);
  CHECK(count_named(p, "clip_coef < 1 (host sync)") == 2 * 2);
  CHECK(count_named(p, "clip_grad_norm_ mul_ ") == 2 * 2 * 74);
  // The multiply waits for the host's read of the total norm.
  for (const Op& op : p.ops) {
    if (p.name_of(op) != "clip_grad_norm_ mul_ embed") continue;
    REQUIRE(op.deps.size() == 1);
    CHECK(op.deps[0].kind == DepKind::kHostWaits);
    CHECK(p.name_of(op.deps[0].op) == "clip_coef < 1 (host sync)");
  }
  // PyTorch 2.5 (the default): one foreach optimizer op and clip without a host wait.
  const Program q = lower(gpt2(kDdp, R"(, "clip_grad_norm": 1.0)"));
  CHECK(count_named(q, "optimizer.step (adam)") == 2 * 2);
  CHECK(count_named(q, "clip_coef < 1") == 0);
  CHECK(count_named(q, "clip_grad_norm_ norms") == 2 * 2);
}

TEST_CASE("pytorch_version and clip_grad_norm: bad input and where clipping is not lowered",
          "[optimizer]") {
  CHECK_THROWS_WITH(
      gpt2(kDdp, R"(, "pytorch_version": "1.x")"),
      Catch::Contains("training.pytorch_version") && Catch::Contains("is not a PyTorch release"));
  CHECK_THROWS_WITH(gpt2(kDdp, R"(, "pytorch_version": "2.5rc1")"),
                    Catch::Contains("is not a PyTorch release"));
  CHECK(gpt2(kDdp, R"(, "pytorch_version": "2.10")").training.pytorch_version == 210);
  const Scenario fsdp = gpt2(R"({"kind": "fsdp"})", R"(, "clip_grad_norm": 1.0)");
  bool warned = false;
  for (const std::string& w : fsdp.warnings)
    warned = warned || w.find("training.clip_grad_norm") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("Hugging Face GPT-2 eager attention: scale, where, mask add around the softmax",
          "[optimizer][eager]") {
  // fp32 on a GPU without SDPA's flash backend (cc 7.5 -> eager): the softmax layer of a block
  // over n = a s^2 = 12 x 1024^2 scores per sample, e = 4: forward scale 2e + where 2e + add 2e +
  // softmax 2e = 8e = 32 B per score, 5 kernels (with mask.bool()); backward softmax 3e + where's
  // zeros_like e and where 3e + scale 2e = 9e = 36 B, 4 kernels.
  const std::string turing = R"({"nodes": 1, "gpus_per_node": 2, "gpu": {"name": "T",
      "memory_gib": 24, "peak_fp32_tflops": 16.3, "peak_fp16_tflops": 130, "mem_bw_gbps": 672,
      "sm_count": 72, "compute_capability": 75}})";
  const std::string text = R"({"cluster": )" + turing + R"(, "model": {"hf_config": ")" +
                           std::string(CSIM_SOURCE_DIR) +
                           R"(/scenarios/models/gpt2.json", "seq_len": 1024},
      "training": {"global_batch": 8, "precision": "fp32", "steps": 1}, "strategy": {"kind": "ddp"}})";
  const Scenario s = parse_scenario_string(text, "gpt2.json");
  REQUIRE(s.training.framework == Framework::kHf);
  const double n = 12.0 * 1024 * 1024;
  const LayerSpec* sm = nullptr;
  for (const LayerSpec& l : s.model.layers)
    if (l.name == "h.0.attn.softmax") sm = &l;
  REQUIRE(sm != nullptr);
  CHECK(sm->kernels == 5);
  CHECK(sm->bwd_kernels == 4);
  CHECK(sm->fwd_bytes_per_sample == Approx(32 * n));
  CHECK(sm->bwd_bytes_per_sample == Approx(36 * n));
  // torch.compile's figures stay the fused softmax's: 2e forward, 3e backward.
  CHECK(sm->fused_fwd_bytes_per_sample == Approx(8 * n));
  // Cross-entropy on fp32 logits: log_softmax 8 + nll backward's fill 4 + log_softmax backward 12
  // = 24 B per 4-byte element: 6 bytes per output byte, 5 kernels.
  CHECK(s.model.loss_bytes_per_output_byte == Approx(6.0));
  CHECK(s.model.loss_kernels == 5);
  CHECK(loss_traffic_bytes(s.model, 1000) == 6000);
}
