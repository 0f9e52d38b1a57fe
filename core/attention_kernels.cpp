// The attention core per kernel (core/attention_kernels.hpp). Formulas and sources:
// docs/attention.md; each is cited at the line that implements it.
//
// Index: [SECTION] Eager, [SECTION] Fused, [SECTION] Support and defaults
#include "core/attention_kernels.hpp"

#include <stdexcept>
#include <utility>

namespace csim::core {

namespace {

LayerSpec make(std::string name, ComputeKind kind, double flops, double bytes, double act,
               double out, int kernels) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = kind;
  l.tp_role = TpRole::kSharded;
  l.fwd_flops_per_sample = flops;
  l.fwd_bytes_per_sample = bytes;
  l.activation_bytes_per_sample = act;
  l.output_bytes_per_sample = out;
  l.kernels = kernels;
  return l;
}

const char* kernel_name(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::kEager:
      return "eager";
    case AttentionKernel::kFlash2:
      return "flash2";
    case AttentionKernel::kFlash3:
      return "flash3";
    case AttentionKernel::kCudnn:
      return "cudnn";
  }
  return "?";
}

void check_shape(const AttentionShape& sh) {
  if (sh.seq_len < 1 || sh.heads < 1 || sh.kv_heads < 1 || sh.head_dim < 1 || sh.window < 0)
    throw std::invalid_argument("attention shape: seq_len, heads, kv_heads, head_dim must be >= 1");
  if (sh.heads % sh.kv_heads != 0)
    throw std::invalid_argument("attention shape: kv_heads must divide heads");
}

// [SECTION] Eager --------------------------------------------------------------------------------
// docs/attention.md, "Eager": build_gpt's four layers with Q (s*a*d) and K, V (s*g*d) apart.
std::vector<LayerSpec> eager_layers(const AttentionShape& sh, double e, const std::string& p) {
  const double s = static_cast<double>(sh.seq_len), d = static_cast<double>(sh.head_dim);
  const double a = sh.heads, g = sh.kv_heads;
  const double q = s * a * d;    // Q and the core's output O, elements
  const double kv = s * g * d;   // K or V, elements
  const double as2 = a * s * s;  // one s^2 matrix per query head
  std::vector<LayerSpec> out;
  //   scores  2 s^2 a d FLOPs; reads Q, K, writes as^2; saves Q and K
  out.push_back(make(p + "attn.scores", ComputeKind::kAttention, 2.0 * s * s * a * d,
                     e * (q + kv + as2), e * (q + kv), e * as2, 1));
  out.back().selective_activation_bytes_per_sample = e * (q + kv);
  //   softmax scale, mask, softmax (2 kernels), 5 FLOPs/elem; backward reads y, dy, writes dx
  out.push_back(make(p + "attn.softmax", ComputeKind::kElementwise, 5.0 * as2, 2.0 * e * as2,
                     e * as2, e * as2, 2));
  out.back().bwd_bytes_per_sample = 3.0 * e * as2;
  out.back().selective_activation_bytes_per_sample = 0;
  if (sh.dropout) {
    //   dropout 1 FLOP/elem; writes its 1-byte mask; backward reads dy and the mask, writes dx
    out.push_back(make(p + "attn.dropout", ComputeKind::kElementwise, as2, 2.0 * e * as2 + as2,
                       as2 / 2.0 * e, e * as2, 1));
    out.back().bwd_bytes_per_sample = 2.0 * e * as2 + as2;
    out.back().selective_activation_bytes_per_sample = 0;
  }
  //   av      2 s^2 a d FLOPs; reads P (as^2) and V, writes O; saves P and V
  out.push_back(make(p + "attn.av", ComputeKind::kAttention, 2.0 * s * s * a * d,
                     e * (as2 + kv + q), e * (as2 + kv), e * q, 1));
  out.back().selective_activation_bytes_per_sample = e * kv;
  for (LayerSpec& l : out) l.selective_recompute = true;
  return out;
}

}  // namespace

std::vector<LayerSpec> attention_core_layers(AttentionKernel kernel, const AttentionShape& shape,
                                             double act_bytes, const std::string& prefix) {
  check_shape(shape);
  switch (kernel) {
    case AttentionKernel::kEager:
      return eager_layers(shape, act_bytes, prefix);
    default:
      break;
  }
  throw std::invalid_argument(std::string("attention kernel ") + kernel_name(kernel) +
                              ": not implemented yet");
}

// [SECTION] Support and defaults -----------------------------------------------------------------

std::string attention_kernel_unsupported(AttentionKernel kernel, const GpuSpec& gpu) {
  const int cc = gpu.compute_capability;
  auto cc_str = [](int c) { return std::to_string(c / 10) + "." + std::to_string(c % 10); };
  auto why = [&](const char* needs) {
    return std::string("attention kernel ") + kernel_name(kernel) + " needs " + needs + "; " +
           gpu.name + " has " + cc_str(cc);
  };
  switch (kernel) {
    case AttentionKernel::kEager:
      return "";
    case AttentionKernel::kFlash2:
      return cc >= 80 ? "" : why("Ampere or later (compute capability 8.0 or higher)");
    case AttentionKernel::kFlash3:
      return cc == 90 ? "" : why("Hopper (compute capability 9.0)");
    case AttentionKernel::kCudnn:
      return cc >= 80 ? "" : why("Ampere or later (compute capability 8.0 or higher)");
  }
  return "";
}

AttentionKernel default_attention_kernel(const GpuSpec& gpu) {
  if (gpu.compute_capability == 90) return AttentionKernel::kFlash3;
  if (gpu.compute_capability >= 80) return AttentionKernel::kFlash2;
  return AttentionKernel::kEager;
}

}  // namespace csim::core
