// The attention core per kernel (core/model/attention_kernels.hpp; formulas: docs/attention.md).
// Expected values are derived in the comments.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cost/compute_cost.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/model/attention_kernels.hpp"
#include "core/model/model_builders.hpp"

using namespace csim;
using namespace csim::core;

namespace {

const LayerSpec& find_layer(const std::vector<LayerSpec>& layers, const std::string& name) {
  for (const LayerSpec& l : layers)
    if (l.name == name) return l;
  FAIL("no layer " << name);
  return layers.front();
}

}  // namespace

TEST_CASE("eager core on a GPT-2 shape equals build_gpt's attention layers", "[attention]") {
  // GPT-2 small-ish shape with dropout on: kv_heads = heads, head_dim = h / a. Every figure of
  // attn.scores / softmax / dropout / av must be build_gpt's exactly (same formulas, GQA-general).
  for (int act_bytes : {2, 4}) {
    GptConfig cfg;
    cfg.layers = 2;
    cfg.hidden = 768;
    cfg.heads = 12;
    cfg.seq_len = 1024;
    const ModelSpec gpt = build_gpt(cfg, act_bytes);
    AttentionShape sh;
    sh.seq_len = 1024;
    sh.heads = 12;
    sh.kv_heads = 12;
    sh.head_dim = 64;
    sh.dropout = true;
    const std::vector<LayerSpec> core =
        attention_core_layers(AttentionKernel::kEager, sh, act_bytes, "h.1.");
    REQUIRE(core.size() == 4);
    const char* names[4] = {"h.1.attn.scores", "h.1.attn.softmax", "h.1.attn.dropout",
                            "h.1.attn.av"};
    for (int i = 0; i < 4; ++i) {
      const LayerSpec& want = find_layer(gpt.layers, names[i]);
      const LayerSpec& got = core[i];
      INFO(names[i] << " act_bytes " << act_bytes);
      CHECK(got.name == want.name);
      CHECK(got.kind == want.kind);
      CHECK(got.tp_role == want.tp_role);
      CHECK(got.params == want.params);
      CHECK(got.fwd_flops_per_sample == want.fwd_flops_per_sample);
      CHECK(got.fwd_bytes_per_sample == want.fwd_bytes_per_sample);
      CHECK(got.activation_bytes_per_sample == want.activation_bytes_per_sample);
      CHECK(got.selective_activation_bytes_per_sample ==
            want.selective_activation_bytes_per_sample);
      CHECK(got.output_bytes_per_sample == want.output_bytes_per_sample);
      CHECK(got.bwd_bytes_per_sample == want.bwd_bytes_per_sample);
      CHECK(got.bwd_flops_per_sample == want.bwd_flops_per_sample);
      CHECK(got.selective_recompute == want.selective_recompute);
      CHECK(got.kernels == want.kernels);
      CHECK(got.extra_python_us == want.extra_python_us);
    }
  }
}

TEST_CASE("eager core without dropout has three layers", "[attention]") {
  AttentionShape sh;
  sh.seq_len = 8;
  sh.heads = 4;
  sh.kv_heads = 4;
  sh.head_dim = 2;
  const auto core = attention_core_layers(AttentionKernel::kEager, sh, 2, "");
  REQUIRE(core.size() == 3);
  CHECK(core[0].name == "attn.scores");
  CHECK(core[1].name == "attn.softmax");
  CHECK(core[2].name == "attn.av");
}

TEST_CASE("eager core under GQA: K and V are kv_heads * head_dim wide", "[attention]") {
  // s = 8, a = 4 query heads, g = 2 kv heads, d = 2, e = 2 B: Q = O = s a d = 64 elems,
  // K = V = s g d = 32 elems, P = a s^2 = 256 elems.
  AttentionShape sh;
  sh.seq_len = 8;
  sh.heads = 4;
  sh.kv_heads = 2;
  sh.head_dim = 2;
  const auto core = attention_core_layers(AttentionKernel::kEager, sh, 2, "");
  // scores: 2 s^2 a d = 2*64*8 = 1024 FLOPs; reads Q + K, writes P: 2*(64+32+256) = 704 B;
  // saves Q and K: 2*(64+32) = 192 B
  CHECK(core[0].fwd_flops_per_sample == 1024.0);
  CHECK(core[0].fwd_bytes_per_sample == 704.0);
  CHECK(core[0].activation_bytes_per_sample == 192.0);
  // av: reads P and V, writes O: 2*(256+32+64) = 704 B; saves P and V: 2*(256+32) = 576 B;
  // selective keeps V: 64 B; output O 128 B
  CHECK(core[2].fwd_bytes_per_sample == 704.0);
  CHECK(core[2].activation_bytes_per_sample == 576.0);
  CHECK(core[2].selective_activation_bytes_per_sample == 64.0);
  CHECK(core[2].output_bytes_per_sample == 128.0);
}

namespace {

// s = 8 tokens, a = 4 query heads, g = 2 kv heads, d = 2, causal, e = 2 B (bf16):
// Q = O = s a d = 64 elems, K = V = s g d = 32 elems, logsumexp = 4 B * s * a = 128 B.
AttentionShape small_gqa() {
  AttentionShape sh;
  sh.seq_len = 8;
  sh.heads = 4;
  sh.kv_heads = 2;
  sh.head_dim = 2;
  return sh;
}

const GpuSpec& catalog_gpu(const char* name) {
  const GpuCatalogEntry* e = find_gpu(name);
  REQUIRE(e != nullptr);
  return e->gpu;
}

}  // namespace

TEST_CASE("attended pairs: full, causal, windowed", "[attention]") {
  AttentionShape sh = small_gqa();
  // causal: s^2 - s^2/2 = 64 - 32 = 32 (a fused kernel skips the fully masked half)
  CHECK(attended_pairs(sh) == 32.0);
  sh.causal = false;
  CHECK(attended_pairs(sh) == 64.0);  // s^2
  sh.causal = true;
  sh.window = 2;
  // causal window w = 2: s w - w^2/2 = 16 - 2 = 14
  CHECK(attended_pairs(sh) == 14.0);
  sh.window = 100;  // a window wider than the sequence is full causal attention
  CHECK(attended_pairs(sh) == 32.0);
  // s = 8192, w = 4096: 8192 * 4096 - 4096^2 / 2 = 33,554,432 - 8,388,608 = 25,165,824
  sh.seq_len = 8192;
  sh.window = 4096;
  CHECK(attended_pairs(sh) == 25165824.0);
}

TEST_CASE("flash2 core: FLOPs, bytes, saved bytes by hand", "[attention]") {
  const auto core = attention_core_layers(AttentionKernel::kFlash2, small_gqa(), 2, "h.0.");
  REQUIRE(core.size() == 1);
  const LayerSpec& l = core[0];
  CHECK(l.name == "h.0.attn.core");
  CHECK(l.kind == ComputeKind::kAttention);
  CHECK(l.tp_role == TpRole::kSharded);
  CHECK(l.params == 0);
  CHECK(l.kernels == 1);
  // forward: 4 P a d = 4 * 32 * 4 * 2 = 1024 FLOPs (the non-causal count 4 s^2 a d = 2048 halved)
  CHECK(l.fwd_flops_per_sample == 1024.0);
  // backward: 2.5x the forward (5 matmuls vs 2) = 2560
  CHECK(l.bwd_flops_per_sample == 2560.0);
  // forward traffic: e (Q + K + V + O) + lse = 2 (64 + 32 + 32 + 64) + 128 = 512 B
  CHECK(l.fwd_bytes_per_sample == 512.0);
  // backward: e (4 * 64 + 4 * 32) + 3 * 128 = 768 + 384 = 1152 B
  CHECK(l.bwd_bytes_per_sample == 1152.0);
  // saved: Q, K, V and the fp32 logsumexp: 2 (64 + 32 + 32) + 128 = 384 B; no s^2 tensor
  CHECK(l.activation_bytes_per_sample == 384.0);
  // output O: 2 * 64 = 128 B
  CHECK(l.output_bytes_per_sample == 128.0);
  // selective recompute is a no-op: not re-run, keeps everything it saves
  CHECK_FALSE(l.selective_recompute);
  CHECK(l.selective_activation_bytes_per_sample < 0);
  CHECK(l.fused_attention.kernel == AttentionKernel::kFlash2);
  CHECK(l.fused_attention.head_dim == 2);
  CHECK(l.fused_attention.keys_per_query == 4.0);  // P / s = 32 / 8
}

TEST_CASE("flash cores: the same figures for flash3 and cudnn, dropout", "[attention]") {
  AttentionShape sh = small_gqa();
  const LayerSpec f2 = attention_core_layers(AttentionKernel::kFlash2, sh, 2, "")[0];
  for (AttentionKernel k : {AttentionKernel::kFlash3, AttentionKernel::kCudnn}) {
    const LayerSpec l = attention_core_layers(k, sh, 2, "")[0];
    CHECK(l.fwd_flops_per_sample == f2.fwd_flops_per_sample);
    CHECK(l.fwd_bytes_per_sample == f2.fwd_bytes_per_sample);
    CHECK(l.activation_bytes_per_sample == f2.activation_bytes_per_sample);
    CHECK(l.fused_attention.kernel == k);
  }
  // flash2 and cudnn fuse dropout (no mask is stored); FlashAttention-3 has none
  sh.dropout = true;
  CHECK(attention_core_layers(AttentionKernel::kFlash2, sh, 2, "")[0].activation_bytes_per_sample ==
        f2.activation_bytes_per_sample);
  CHECK_THROWS_AS(attention_core_layers(AttentionKernel::kFlash3, sh, 2, ""),
                  std::invalid_argument);
}

TEST_CASE("GQA shrinks the fused core's K/V traffic", "[attention]") {
  AttentionShape mha = small_gqa();
  mha.kv_heads = 4;
  AttentionShape mqa = small_gqa();
  mqa.kv_heads = 1;
  const LayerSpec a = attention_core_layers(AttentionKernel::kFlash2, mha, 2, "")[0];
  const LayerSpec b = attention_core_layers(AttentionKernel::kFlash2, mqa, 2, "")[0];
  // K and V shrink from s*4*d = 64 to s*1*d = 16 elems each: forward reads 2 * 2 * 48 = 192 B less,
  // saves 192 B less; backward reads and writes both: 2 * 4 * 48 = 384 B less. FLOPs unchanged.
  CHECK(a.fwd_bytes_per_sample - b.fwd_bytes_per_sample == 192.0);
  CHECK(a.activation_bytes_per_sample - b.activation_bytes_per_sample == 192.0);
  CHECK(a.bwd_bytes_per_sample - b.bwd_bytes_per_sample == 384.0);
  CHECK(a.fwd_flops_per_sample == b.fwd_flops_per_sample);
}

TEST_CASE("sliding window scales the fused work with the window", "[attention]") {
  AttentionShape sh;
  sh.seq_len = 8192;
  sh.heads = 32;
  sh.kv_heads = 8;
  sh.head_dim = 128;
  const LayerSpec full = attention_core_layers(AttentionKernel::kFlash2, sh, 2, "")[0];
  sh.window = 4096;
  const LayerSpec win = attention_core_layers(AttentionKernel::kFlash2, sh, 2, "")[0];
  // pairs: full causal s^2/2 = 33,554,432; window 4096: 25,165,824 (attended pairs test) ->
  // forward FLOPs ratio 0.75; keys per query 4096 -> 3072; the traffic does not change
  CHECK(win.fwd_flops_per_sample / full.fwd_flops_per_sample == Approx(0.75));
  CHECK(full.fused_attention.keys_per_query == 4096.0);
  CHECK(win.fused_attention.keys_per_query == 3072.0);
  CHECK(win.fwd_bytes_per_sample == full.fwd_bytes_per_sample);
  // eager materialises the s^2 scores whatever the window: its FLOPs do not change
  AttentionShape sh_full = sh;
  sh_full.window = 0;
  CHECK(attention_core_layers(AttentionKernel::kEager, sh, 2, "")[0].fwd_flops_per_sample ==
        attention_core_layers(AttentionKernel::kEager, sh_full, 2, "")[0].fwd_flops_per_sample);
}

TEST_CASE("fused attention efficiency by kernel, GPU, head_dim and keys", "[attention]") {
  const GpuSpec& h100 = catalog_gpu("H100-SXM5-80GB");
  const GpuSpec& a100 = catalog_gpu("A100-SXM4-80GB");
  FusedAttentionShape f;
  f.kernel = AttentionKernel::kFlash3;
  f.head_dim = 128;
  f.keys_per_query = 8192;
  // flash3 on Hopper, forward, d = 128: 0.674 * 8192 / (8192 + 200) = 0.65794...
  CHECK(fused_attention_max_efficiency(h100, f, false) == Approx(0.674 * 8192.0 / 8392.0));
  // backward: 0.596 * 8192 / (8192 + 420)
  CHECK(fused_attention_max_efficiency(h100, f, true) == Approx(0.596 * 8192.0 / 8612.0));
  // d = 64 is lower: 0.500 * 8192 / 8392
  f.head_dim = 64;
  CHECK(fused_attention_max_efficiency(h100, f, false) == Approx(0.500 * 8192.0 / 8392.0));
  // d = 96: linear in log2(d): 0.500 + 0.174 * (log2(96) - 6)
  f.head_dim = 96;
  CHECK(fused_attention_max_efficiency(h100, f, false) ==
        Approx((0.500 + 0.174 * (std::log2(96.0) - 6.0)) * 8192.0 / 8392.0));
  // short sequences are slower: k = 256 -> 0.674 * 256 / 456
  f.head_dim = 128;
  f.keys_per_query = 256;
  CHECK(fused_attention_max_efficiency(h100, f, false) == Approx(0.674 * 256.0 / 456.0));
  // flash2 on Ampere: 0.73 * 8192 / 8292 forward; on Hopper only 0.380 * 8192 / 8292
  f.kernel = AttentionKernel::kFlash2;
  f.keys_per_query = 8192;
  CHECK(fused_attention_max_efficiency(a100, f, false) == Approx(0.730 * 8192.0 / 8292.0));
  CHECK(fused_attention_max_efficiency(h100, f, false) == Approx(0.380 * 8192.0 / 8292.0));
  // eager: 0, the GPU's attention curve applies
  f.kernel = AttentionKernel::kEager;
  CHECK(fused_attention_max_efficiency(h100, f, false) == 0.0);
}

TEST_CASE("causal cores pay for the diagonal tiles", "[attention]") {
  // docs/attention.md, "Causal diagonal tiles". flash3 on H100, d = 128: forward tiles 128 x 128,
  // backward 64 x 128 (hopper/tile_size.h, flash_bwd_launch_template.h).
  const GpuSpec& h100 = catalog_gpu("H100-SXM5-80GB");
  FusedAttentionShape f;
  f.kernel = AttentionKernel::kFlash3;
  f.head_dim = 128;
  f.seq_len = 512;
  f.keys_per_query = 256;  // P / s = (512^2 / 2) / 512
  const double base = 0.674 * 256.0 / (256.0 + 200.0);
  // Not causal (or causal with a window): no tile factor.
  CHECK(fused_attention_max_efficiency(h100, f, false) == Approx(base));
  f.causal = true;
  // Forward, s = 512: 4 query blocks of 128 rows process 128 x 128 x (1 + 2 + 3 + 4) = 163,840
  // pairs for 512^2 / 2 = 131,072 useful: u = 0.8.
  CHECK(fused_attention_max_efficiency(h100, f, false) == Approx(base * 0.8));
  // Backward, s = 512, key blocks j of 128 from query row floor(128 j / 64) x 64 = 128 j:
  // 128 x (512 + 384 + 256 + 128) = 163,840: u = 0.8 too.
  const double bwd = 0.596 * 256.0 / (256.0 + 420.0);
  CHECK(fused_attention_max_efficiency(h100, f, true) == Approx(bwd * 0.8));
  // s = 8192 (64 blocks): 128^2 x 64 x 65 / 2 = 34,078,720 processed, 33,554,432 useful:
  // u = 0.98462 = 8192 / 8320.
  f.seq_len = 8192;
  f.keys_per_query = 4096;
  CHECK(fused_attention_max_efficiency(h100, f, false) ==
        Approx(0.674 * 4096.0 / 4296.0 * 8192.0 / 8320.0));
  // flash2 forward on A100, d = 128: tiles 128 x 64, so each query block i runs 2 (i + 1) key
  // blocks of 64: the same 128^2 (i + 1) pairs as 128 x 128: u = 0.8 at s = 512.
  const GpuSpec& a100 = catalog_gpu("A100-SXM4-80GB");
  f.kernel = AttentionKernel::kFlash2;
  f.seq_len = 512;
  f.keys_per_query = 256;
  CHECK(fused_attention_max_efficiency(a100, f, false) == Approx(0.730 * 256.0 / 356.0 * 0.8));
  // The core's layer carries s and the mask (a window turns the tile factor off).
  AttentionShape sh;
  sh.seq_len = 2048;
  sh.heads = 8;
  sh.kv_heads = 8;
  sh.head_dim = 128;
  const LayerSpec causal = attention_core_layers(AttentionKernel::kFlash3, sh, 2, "")[0];
  CHECK(causal.fused_attention.seq_len == 2048);
  CHECK(causal.fused_attention.causal);
  sh.window = 512;
  CHECK_FALSE(attention_core_layers(AttentionKernel::kFlash3, sh, 2, "")[0].fused_attention.causal);
}

TEST_CASE("flash3 causal forward against the FA3 paper's causal panel (not fitted)",
          "[attention]") {
  // Shah et al. 2024, figure 5, causal, d = 128, FP16, H100 SXM5: 292, 423, 521, 579, 602, 616
  // TFLOP/s at s = 512 ... 16k (FLOPs halved for the mask). Predicted: 0.674 k / (k + 200) x u x
  // 989.5 with k = s/2 and u = s / (s + 128): 300, 426, 525, 589, 626, 646 (+0.8 .. +4.9 %).
  const GpuSpec& h100 = catalog_gpu("H100-SXM5-80GB");
  const double published[] = {292, 423, 521, 579, 602, 616};
  FusedAttentionShape f;
  f.kernel = AttentionKernel::kFlash3;
  f.head_dim = 128;
  f.causal = true;
  for (int i = 0; i < 6; ++i) {
    f.seq_len = 512LL << i;
    f.keys_per_query = static_cast<double>(f.seq_len) / 2;
    const double tflops = fused_attention_max_efficiency(h100, f, false) * 989.5;
    INFO("s = " << f.seq_len << ": " << tflops << " vs " << published[i]);
    CHECK(std::abs(tflops / published[i] - 1) < 0.05);
  }
}

TEST_CASE("unsupported attention kernels name the GPU and the capability", "[attention]") {
  const GpuSpec& a100 = catalog_gpu("A100-SXM4-80GB");
  const GpuSpec& v100 = catalog_gpu("V100-SXM2-32GB");
  const GpuSpec& h100 = catalog_gpu("H100-SXM5-80GB");
  CHECK(attention_kernel_unsupported(AttentionKernel::kFlash3, a100) ==
        "attention kernel flash3 needs Hopper (compute capability 9.0); A100-SXM4-80GB has 8.0");
  CHECK(attention_kernel_unsupported(AttentionKernel::kFlash2, v100) ==
        "attention kernel flash2 needs Ampere or later (compute capability 8.0 or higher); "
        "V100-SXM2-32GB has 7.0");
  CHECK(attention_kernel_unsupported(AttentionKernel::kCudnn, v100) ==
        "attention kernel cudnn needs Ampere or later (compute capability 8.0 or higher); "
        "V100-SXM2-32GB has 7.0");
  CHECK(attention_kernel_unsupported(AttentionKernel::kEager, v100).empty());
  CHECK(attention_kernel_unsupported(AttentionKernel::kFlash2, a100).empty());
  CHECK(attention_kernel_unsupported(AttentionKernel::kFlash3, h100).empty());
  CHECK(attention_kernel_unsupported(AttentionKernel::kCudnn, h100).empty());
  // Blackwell (10.0): FlashAttention-3 is built for sm_90a only
  GpuSpec b200 = h100;
  b200.name = "B200";
  b200.compute_capability = 100;
  CHECK(attention_kernel_unsupported(AttentionKernel::kFlash3, b200) ==
        "attention kernel flash3 needs Hopper (compute capability 9.0); B200 has 10.0");
  CHECK(attention_kernel_unsupported(AttentionKernel::kFlash2, b200).empty());
}

TEST_CASE("default attention kernel per GPU", "[attention]") {
  CHECK(default_attention_kernel(catalog_gpu("A100-SXM4-80GB")) == AttentionKernel::kFlash2);
  CHECK(default_attention_kernel(catalog_gpu("H100-SXM5-80GB")) == AttentionKernel::kFlash3);
  CHECK(default_attention_kernel(catalog_gpu("H200-SXM-141GB")) == AttentionKernel::kFlash3);
  CHECK(default_attention_kernel(catalog_gpu("V100-SXM2-32GB")) == AttentionKernel::kEager);
  CHECK(default_attention_kernel(catalog_gpu("GTX-1080-Ti")) == AttentionKernel::kEager);
}

TEST_CASE("flash3 core on H100 at s = 8192 is faster than eager", "[attention]") {
  // Llama-3-8B-shaped core, one sample: a = 32, g = 8, d = 128, s = 8192, bf16.
  // Eager writes and re-reads a s^2 = 32 * 8192^2 = 2.15e9 elements per matrix: scores writes
  // 4.3 GB, softmax reads + writes 8.6 GB, av reads 4.3 GB: ~17.2 GB at 3.35 TB/s * 0.85 ~ 6 ms,
  // memory-bound (its 1.1e12 FLOPs take ~2.8 ms at the attention curve's 0.40 of 989.5 TFLOP/s).
  // flash3 moves only Q, K, V, O (~0.2 GB) and, causal, does 2 s^2 a d = 5.5e11 FLOPs at
  // ~0.64 of peak: ~0.87 ms. So flash3 is more than 5x faster.
  const GpuSpec& h100 = catalog_gpu("H100-SXM5-80GB");
  AttentionShape sh;
  sh.seq_len = 8192;
  sh.heads = 32;
  sh.kv_heads = 8;
  sh.head_dim = 128;
  auto fwd_ns = [&](AttentionKernel k) {
    TimeNs t = 0;
    for (const LayerSpec& l : attention_core_layers(k, sh, 2, "")) {
      const double eff = fused_attention_max_efficiency(h100, l.fused_attention, false);
      t += compute_duration_ns(h100, l.kind, Dtype::kBf16, l.fwd_flops_per_sample,
                               static_cast<Bytes>(l.fwd_bytes_per_sample), eff);
    }
    return t;
  };
  const TimeNs eager = fwd_ns(AttentionKernel::kEager);
  const TimeNs flash = fwd_ns(AttentionKernel::kFlash3);
  CHECK(eager > 5'000'000);  // > 5 ms
  CHECK(flash < 1'000'000);  // < 1 ms
  CHECK(flash * 5 < eager);
}
