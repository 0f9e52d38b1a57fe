// The attention core per kernel (core/model/attention_kernels.hpp). Formulas and sources:
// docs/attention.md; each is cited at the line that implements it.
//
// Index: [SECTION] Helpers, [SECTION] Eager, [SECTION] Fused, [SECTION] Efficiency,
//        [SECTION] Support and defaults
#include "core/model/attention_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace csim::core {

namespace {

// [SECTION] Helpers ------------------------------------------------------------------------------

std::int64_t v_dim(const AttentionShape& sh) {
  return sh.v_head_dim > 0 ? sh.v_head_dim : sh.head_dim;
}

LayerSpec make(std::string name, ComputeKind kind, double flops, double bytes, double act,
               double out, int kernels) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = kind;
  l.tp_role = TpRole::kSharded;  // split by heads (Shoeybi et al. 2019, section 3)
  l.fwd_flops_per_sample = flops;
  l.fwd_bytes_per_sample = bytes;
  l.activation_bytes_per_sample = act;
  l.output_bytes_per_sample = out;
  l.kernels = kernels;
  return l;
}

void check_shape(const AttentionShape& sh) {
  if (sh.seq_len < 1 || sh.heads < 1 || sh.kv_heads < 1 || sh.head_dim < 1 || sh.window < 0)
    throw std::invalid_argument(
        "attention shape: seq_len, heads, kv_heads and head_dim must be >= 1, window >= 0");
  if (sh.heads % sh.kv_heads != 0)
    throw std::invalid_argument("attention shape: kv_heads must divide heads");
}

// [SECTION] Eager --------------------------------------------------------------------------------
// docs/attention.md, "Eager": build_gpt's four layers (Korthikanti et al. 2022, section 4.1) with
// Q (s*a*d) and K, V (s*g*d) apart. The s^2 matrices are computed whole: the causal mask and a
// window are applied to the scores, not skipped, so neither changes the work.
std::vector<LayerSpec> eager_layers(const AttentionShape& sh, double e, const std::string& p) {
  const double s = static_cast<double>(sh.seq_len), d = static_cast<double>(sh.head_dim);
  const double dv = static_cast<double>(v_dim(sh));
  const double a = sh.heads, g = sh.kv_heads;
  const double q = s * a * d;    // Q, elements
  const double kv = s * g * d;   // K, elements
  const double o = s * a * dv;   // the core's output O, elements
  const double vv = s * g * dv;  // V, elements
  const double as2 = a * s * s;  // one s^2 matrix per query head
  std::vector<LayerSpec> out;
  //   scores  2 s^2 a d FLOPs; reads Q, K, writes as^2; saves Q and K (kept by selective)
  out.push_back(make(p + "attn.scores", ComputeKind::kAttention, 2.0 * s * s * a * d,
                     e * (q + kv + as2), e * (q + kv), e * as2, 1));
  out.back().selective_activation_bytes_per_sample = e * (q + kv);
  //   softmax scale, mask, softmax (2 kernels), 5 FLOPs/elem; saves its output; backward reads
  //           y and dy, writes dx
  out.push_back(make(p + "attn.softmax", ComputeKind::kElementwise, 5.0 * as2, 2.0 * e * as2,
                     e * as2, e * as2, 2));
  out.back().bwd_bytes_per_sample = 3.0 * e * as2;
  out.back().selective_activation_bytes_per_sample = 0;
  if (sh.dropout) {
    //   dropout 1 FLOP/elem; writes its 1-byte mask, saved (as^2 bytes = e/2 * as^2 in
    //           Korthikanti's 2-byte units); backward reads dy and the mask, writes dx
    out.push_back(make(p + "attn.dropout", ComputeKind::kElementwise, as2, 2.0 * e * as2 + as2,
                       e / 2.0 * as2, e * as2, 1));
    out.back().bwd_bytes_per_sample = 2.0 * e * as2 + as2;
    out.back().selective_activation_bytes_per_sample = 0;
  }
  //   av      2 s^2 a d_v FLOPs; reads P (as^2) and V, writes O; saves P and V (selective: V)
  out.push_back(make(p + "attn.av", ComputeKind::kAttention, 2.0 * s * s * a * dv,
                     e * (as2 + vv + o), e * (as2 + vv), e * o, 1));
  out.back().selective_activation_bytes_per_sample = e * vv;
  for (LayerSpec& l : out) l.selective_recompute = true;  // Korthikanti et al. 2022, section 4.2
  return out;
}

// [SECTION] Fused --------------------------------------------------------------------------------
// docs/attention.md, "Fused kernels": one layer attn.core; P = attended_pairs per head.
//   FLOPs   forward 2 P a (d + d_v) = 4 P a d when d_v = d (two matmuls, 2 FLOPs per MAC:
//           Q K^T over d, P V over d_v); backward 2.5x (five matmuls: the
//           scores recomputed, dV, dP, dQ, dK; Dao 2023, section 3.1.2;
//           benchmark_flash_attention.py)
//   bytes   forward reads Q, K, V, writes O and the fp32 logsumexp (4 B per query row and head)
//           backward reads Q, K, V, O, dO and the logsumexp, writes dQ, dK, dV and the fp32
//           rowsum(dO * O) it then reads back: e (2 (Q + K + V) + 2 O) + 12 s a, which is
//           e (4 s a d + 4 s g d) + 12 s a when d_v = d
//   saved   Q, K, V and the logsumexp; O is the output projection's saved input (counted there)
std::vector<LayerSpec> fused_layers(AttentionKernel kernel, const AttentionShape& sh, double e,
                                    const std::string& p) {
  if (kernel == AttentionKernel::kFlash3 && sh.dropout)
    throw std::invalid_argument(
        "attention kernel flash3 has no dropout (FlashAttention-3's flash_attn_func takes no "
        "dropout_p); use flash2 or cudnn, or turn attention dropout off");
  const double s = static_cast<double>(sh.seq_len), d = static_cast<double>(sh.head_dim);
  const double dv = static_cast<double>(v_dim(sh));
  const double a = sh.heads, g = sh.kv_heads;
  // Q and K of d per head, V and O of d_v (= d but under MLA): the d + d_v sums below are 2d.
  const double q = s * a * d, k = s * g * d, v = s * g * dv, o = s * a * dv, lse = 4.0 * s * a;
  const double pairs = attended_pairs(sh);
  const double fwd_flops = 2.0 * pairs * a * (d + dv);
  LayerSpec l = make(p + "attn.core", ComputeKind::kAttention, fwd_flops, e * (q + k + v + o) + lse,
                     e * (q + k + v) + lse, e * o, 1);
  l.bwd_flops_per_sample = 2.5 * fwd_flops;
  l.bwd_bytes_per_sample = e * (2.0 * (q + k + v) + 2.0 * o) + 3.0 * lse;
  // Nothing s^2 is saved, so Megatron's selective recompute has nothing to drop: the layer is not
  // marked and keeps all it saves (selective = a no-op for it).
  l.selective_recompute = false;
  l.selective_activation_bytes_per_sample = -1;
  l.fused_attention.kernel = kernel;
  l.fused_attention.head_dim = sh.head_dim;
  l.fused_attention.v_head_dim = v_dim(sh);
  l.fused_attention.keys_per_query = pairs / s;
  l.fused_attention.seq_len = sh.seq_len;
  l.fused_attention.causal = sh.causal && sh.window == 0;
  return {l};
}

// [SECTION] Efficiency ---------------------------------------------------------------------------
// docs/attention.md, "Efficiency": E at head_dim 64, 128, 256 (fractions of dense fp16/bf16 peak)
// and k_half (keys per query at which half of E is reached), per kernel, GPU generation and pass.
struct EffPoint {
  double e64, e128, e256, k_half;
};
struct EffFigures {
  EffPoint fwd, bwd;
};

// Hopper (compute capability 9.x): fitted to the FP16 bars of FlashAttention-3 (Shah et al.
// 2024), figures 5 and 6 (H100 80GB SXM5, non-causal, batch * s = 16k, hidden 2048), by least
// squares in E with k_half common to both head dims; head_dim 256 forward of flash3: the paper's
// "up to 740 TFLOPs/s (75% utilization)"; where a head dim has no bar, the head_dim-128 figure.
constexpr EffFigures kFlash3Hopper{{0.500, 0.674, 0.748, 200}, {0.512, 0.596, 0.596, 420}};
constexpr EffFigures kCudnnHopper{{0.424, 0.633, 0.633, 130}, {0.474, 0.547, 0.547, 375}};
constexpr EffFigures kFlash2Hopper{{0.334, 0.380, 0.380, 100}, {0.303, 0.332, 0.332, 270}};
// Ampere / Ada (8.x): FlashAttention-2 (Dao 2023), section 4.1: forward up to 73 % and backward up
// to 63 % of the A100's peak (head_dim 128, long sequences); head_dim 64 and k_half: the same
// kernel's ratios and half-points on H100 (the FlashAttention-2 bars above: 0.879 forward, 0.914
// backward).
constexpr EffFigures kFlash2Ampere{{0.642, 0.730, 0.730, 100}, {0.576, 0.630, 0.630, 270}};

// The tiles a kernel runs on a causal core (docs/attention.md, "Causal diagonal tiles"): query rows
// x key columns per thread block, fp16/bf16, as Dao-AILab/flash-attention dispatches them
// (commit 0251105a):
//   flash3 (Hopper)   forward  hopper/tile_size.h, tile_size_fwd_sm90 (is_causal):
//                              d <= 64: 192 x 128, <= 96: 192 x 144, <= 192: 128 x 128, else 128 x
//                              80
//                     backward hopper/flash_bwd_launch_template.h, run_mha_bwd_hdim* (Arch >= 90):
//                              d <= 64: 128 x 128, <= 128: 64 x 128, <= 192: 64 x 96, else 64 x 80
//   flash2 (sm80/sm90) forward csrc/flash_attn/src/flash_fwd_launch_template.h, run_mha_fwd_hdim*:
//                              d <= 64: 128 x 128, else 128 x 64
//                     backward csrc/flash_attn/src/flash_bwd_launch_template.h, run_mha_bwd_hdim*
//                              (>= 144 KB of shared memory, A100 and H100):
//                              d <= 64: 128 x 128, <= 128: 64 x 128, else 64 x 64
//   cudnn             not published: assumed 128 x 128.
struct Tile {
  int m, n;  // query rows, key columns
};

Tile causal_tile(AttentionKernel kernel, int cc, std::int64_t d, bool backward) {
  switch (kernel) {
    case AttentionKernel::kFlash3:
      if (!backward)
        return d <= 64    ? Tile{192, 128}
               : d <= 96  ? Tile{192, 144}
               : d <= 192 ? Tile{128, 128}
                          : Tile{128, 80};
      return d <= 64    ? Tile{128, 128}
             : d <= 128 ? Tile{64, 128}
             : d <= 192 ? Tile{64, 96}
                        : Tile{64, 80};
    case AttentionKernel::kFlash2:
      (void)cc;  // the same dispatch on sm80 and sm90 (cc minor 0) for these head dims
      if (!backward) return d <= 64 ? Tile{128, 128} : Tile{128, 64};
      return d <= 64 ? Tile{128, 128} : d <= 128 ? Tile{64, 128} : Tile{64, 64};
    case AttentionKernel::kCudnn:
    case AttentionKernel::kEager:
      break;
  }
  return Tile{128, 128};
}

// The share of a causal core's processed query-key pairs that are useful (docs/attention.md,
// "Causal diagonal tiles"): the kernel runs whole tiles up to and across the diagonal.
//   forward  (query blocks i of t.m rows, keys up to the diagonal in blocks of t.n):
//            done = sum_i rows_i * min(s, ceil(min((i + 1) t.m, s) / t.n) t.n)
//   backward (key blocks j of t.n columns, queries from the diagonal's block on):
//            done = sum_j cols_j * (s - floor(j t.n / t.m) t.m)
//   useful = s^2 / 2 (attended_pairs, the work the FLOPs count); fraction = useful / done.
double causal_useful_fraction(std::int64_t s, Tile t, bool backward) {
  if (s < 1) return 1.0;
  double done = 0;
  if (!backward) {
    for (std::int64_t q0 = 0; q0 < s; q0 += t.m) {
      const std::int64_t rows = std::min<std::int64_t>(t.m, s - q0);
      const std::int64_t last = std::min<std::int64_t>(q0 + t.m, s);  // keys the block needs
      const std::int64_t keys = std::min<std::int64_t>(s, (last + t.n - 1) / t.n * t.n);
      done += static_cast<double>(rows) * static_cast<double>(keys);
    }
  } else {
    for (std::int64_t k0 = 0; k0 < s; k0 += t.n) {
      const std::int64_t cols = std::min<std::int64_t>(t.n, s - k0);
      const std::int64_t first = k0 / t.m * t.m;  // first query block touching the diagonal
      done += static_cast<double>(cols) * static_cast<double>(s - first);
    }
  }
  const double useful = static_cast<double>(s) * static_cast<double>(s) / 2.0;
  return done > 0 ? std::min(1.0, useful / done) : 1.0;
}

// E at head_dim d: linear in log2(d) between 64, 128 and 256, held flat outside.
double at_head_dim(const EffPoint& p, double d) {
  const double x = std::log2(std::clamp(d, 64.0, 256.0));
  return x <= 7.0 ? p.e64 + (p.e128 - p.e64) * (x - 6.0) : p.e128 + (p.e256 - p.e128) * (x - 7.0);
}

const EffFigures* figures_for(AttentionKernel kernel, int cc) {
  const bool hopper_or_later = cc >= 90;
  switch (kernel) {
    case AttentionKernel::kEager:
      return nullptr;
    case AttentionKernel::kFlash2:
      return hopper_or_later ? &kFlash2Hopper : &kFlash2Ampere;
    case AttentionKernel::kFlash3:
      return &kFlash3Hopper;
    case AttentionKernel::kCudnn:
      // No published cuDNN SDPA figure on Ampere in our sources: FlashAttention-2's (docs).
      return hopper_or_later ? &kCudnnHopper : &kFlash2Ampere;
  }
  return nullptr;
}

}  // namespace

double attended_pairs(const AttentionShape& sh) {
  const double s = static_cast<double>(sh.seq_len), w = static_cast<double>(sh.window);
  if (!sh.causal) return s * (sh.window > 0 ? std::min(2.0 * w + 1.0, s) : s);
  const double span = sh.window > 0 ? std::min(w, s) : s;  // keys a late query sees
  return s * span - span * span / 2.0;                     // s^2 / 2 at span = s
}

std::vector<LayerSpec> attention_core_layers(AttentionKernel kernel, const AttentionShape& shape,
                                             double act_bytes, const std::string& prefix) {
  check_shape(shape);
  if (kernel == AttentionKernel::kEager) return eager_layers(shape, act_bytes, prefix);
  return fused_layers(kernel, shape, act_bytes, prefix);
}

double fused_attention_max_efficiency(const GpuSpec& gpu, const FusedAttentionShape& shape,
                                      bool backward) {
  const EffFigures* f = figures_for(shape.kernel, gpu.compute_capability);
  if (f == nullptr) return 0.0;
  const EffPoint& p = backward ? f->bwd : f->fwd;
  const double k = std::max(shape.keys_per_query, 1.0);
  // docs/attention.md, "Causal diagonal tiles": a causal core also pays for the masked halves of
  // the tiles on the diagonal.
  const double u = shape.causal
                       ? causal_useful_fraction(shape.seq_len,
                                                causal_tile(shape.kernel, gpu.compute_capability,
                                                            shape.head_dim, backward),
                                                backward)
                       : 1.0;
  return at_head_dim(p, static_cast<double>(shape.head_dim)) * k / (k + p.k_half) * u;
}

// [SECTION] Support and defaults -----------------------------------------------------------------
// docs/attention.md, "Support": flash2 >= 8.0 (FlashAttention-2 README: Ampere, Ada, Hopper);
// flash3 = 9.0 (FlashAttention-3 README: H100 / H800); cudnn >= 8.0 (PyTorch's cuDNN SDPA backend).

std::string attention_kernel_unsupported(AttentionKernel kernel, const GpuSpec& gpu) {
  const int cc = gpu.compute_capability;
  auto why = [&](const char* needs) {
    return std::string("attention kernel ") + to_string(kernel) + " needs " + needs + "; " +
           gpu.name + " has " + std::to_string(cc / 10) + "." + std::to_string(cc % 10);
  };
  switch (kernel) {
    case AttentionKernel::kEager:
      return "";
    case AttentionKernel::kFlash2:
      return cc >= 80 ? "" : why("Ampere or later (compute capability 8.0 or higher)");
    case AttentionKernel::kFlash3:
      return cc / 10 == 9 ? "" : why("Hopper (compute capability 9.0)");
    case AttentionKernel::kCudnn:
      return cc >= 80 ? "" : why("Ampere or later (compute capability 8.0 or higher)");
  }
  return "";
}

AttentionKernel default_attention_kernel(const GpuSpec& gpu) {
  // docs/attention.md, "Defaults": FlashAttention-3 on Hopper, FlashAttention-2 from Ampere on
  // (and on Blackwell, where FlashAttention-3 does not run), the unfused core below.
  const int cc = gpu.compute_capability;
  if (cc / 10 == 9) return AttentionKernel::kFlash3;
  if (cc >= 80) return AttentionKernel::kFlash2;
  return AttentionKernel::kEager;
}

}  // namespace csim::core
