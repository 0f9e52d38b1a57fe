// Eager kernel sequences per framework (core/model/eager_kernels.hpp). Every count and byte figure
// is derived in docs/transformer.md, "Eager kernel sequences", from the framework's source, cited
// there and beside each function below. e = bytes per activation element (2 for bf16 / fp16, 4
// for fp32); fp32 intermediates are 4 bytes.
#include "core/model/eager_kernels.hpp"

#include <string>

#include "core/model/model_transformer.hpp"

namespace csim::core {

Framework default_framework(StrategyKind kind, int fsdp_version, bool megatron_fsdp,
                            bool hf_model) {
  if (megatron_fsdp) return Framework::kMegatronTe;
  switch (kind) {
    case StrategyKind::kFsdp:
      if (fsdp_version == 2) return Framework::kTorchtitan;
      break;
    case StrategyKind::k3d:
    case StrategyKind::kTensorParallel:
    case StrategyKind::kPipeline:
    case StrategyKind::kZero:
      return Framework::kMegatronTe;
    default:
      break;
  }
  return hf_model ? Framework::kHf : Framework::kPlain;
}

std::optional<AttentionKernel> framework_attention_kernel(Framework f, const GpuSpec& gpu) {
  if (f != Framework::kTorchtitan && f != Framework::kHf) return std::nullopt;
  // F.scaled_dot_product_attention: the flash backend is FlashAttention-2 (PyTorch bundles
  // FA2; FA3 is not an SDPA backend), sm80+ (docs/attention.md, "Defaults").
  return gpu.compute_capability >= 80 ? AttentionKernel::kFlash2 : AttentionKernel::kEager;
}

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Keeps the built (fused) figures for torch.compile before the eager ones replace them.
void keep_fused(LayerSpec& l) {
  l.fused_fwd_bytes_per_sample = l.fwd_bytes_per_sample;
  l.fused_bwd_bytes_per_sample =
      l.bwd_bytes_per_sample >= 0 ? l.bwd_bytes_per_sample : 2.0 * l.fwd_bytes_per_sample;
  l.fused_activation_bytes_per_sample = l.activation_bytes_per_sample;
}

// torchtitan's RMSNorm (torchtitan/models/norms.py at 9dec370, RMSNorm.forward:
// `self._norm(x.float()).type_as(x) * self.weight`, _norm = `x * torch.rsqrt(x.pow(2).mean(-1,
// keepdim=True) + self.eps)`) and Hugging Face's LlamaRMSNorm (the same operations:
// to(float32), pow, mean, add, rsqrt, mul, to(input dtype), weight *). Over N = t w elements and
// t rows (docs/transformer.md, "Eager kernel sequences", RMSNorm):
//   forward  8 kernels (6 when e = 4: the two casts are no-ops), (28 + 4e) B/elem with the casts
//            ((e+4) cast + 8 pow + 4 mean + 8 mul + (4+e) cast back + 2e weight), else 20 + 2e;
//   backward 14 kernels (12), (68 + 8e) B/elem with the casts, else 60 + 6e;
//   saved    the fp32 copy of x (4 B/elem; x itself when e = 4, unless another layer saves it),
//            the normalized output the weight multiplies (e), fp32 rstd per row (4 B).
void eager_rmsnorm(LayerSpec& l, double e, double width) {
  const double n = l.output_bytes_per_sample / e;  // t w elements
  const bool cast = e != 4.0;
  const double stats = 4.0 * n / width;                            // fp32 rstd per row
  const bool input_saved = l.activation_bytes_per_sample < e * n;  // norm_spec's input_saved
  keep_fused(l);
  l.kernels = cast ? 8 : 6;
  l.bwd_kernels = cast ? 14 : 12;
  l.fwd_bytes_per_sample = n * (cast ? 28 + 4 * e : 20 + 2 * e);
  l.bwd_bytes_per_sample = n * (cast ? 68 + 8 * e : 60 + 6 * e);
  l.activation_bytes_per_sample = n * ((cast ? 4.0 : (input_saved ? 0.0 : e)) + e) + stats;
}

// RoPE of q and k over n = s (a + g) r rotated elements, plus the GQA repeat of k and v to a
// heads (n_rep = a / g > 1): torchtitan's repeat_kv (expand + reshape: a copy each), Hugging
// Face's repeat_kv (the same) (docs/transformer.md, "Eager kernel sequences", RoPE).
//  torchtitan (models/llama/model.py apply_rotary_emb: view_as_complex(x.float()), * freqs_cis,
//    view_as_real, type_as): per tensor cast + complex mul + cast back = 3 kernels (1 when
//    e = 4), (16 + 2e) B/elem (8); the backward the same.
//  hf (modeling_llama.py apply_rotary_pos_emb: q * cos + rotate_half(q) * sin, rotate_half =
//    cat(-x2, x1)): per tensor mul, neg, cat, mul, add = 5 kernels, 12e B/elem; backward 13e.
//  repeat (both): forward writes s a d per tensor from s g d read, 2 kernels; backward sums the
//    copies back (reads s a d, writes s g d), 2 kernels.
// Fused (torch.compile): q, k, v read once, q and the repeated k and v written once.
void eager_rope(LayerSpec& l, Framework f, const TransformerConfig& c, const TransformerDims& d,
                double e) {
  const double s = static_cast<double>(c.seq_len), hd = static_cast<double>(d.head_dim);
  const double a = c.heads, g = static_cast<double>(d.kv_heads);
  const double r = static_cast<double>(d.rotary_dim);
  const double n = s * (a + g) * r;
  const bool cast = e != 4.0;
  keep_fused(l);
  const double tables = 2.0 * e * s * r;  // cos / sin (freqs_cis) read
  if (f == Framework::kTorchtitan) {
    l.kernels = cast ? 6 : 2;
    l.bwd_kernels = l.kernels;
    l.fwd_bytes_per_sample = n * (cast ? 16 + 2 * e : 8) + tables;
    l.bwd_bytes_per_sample = l.fwd_bytes_per_sample;
  } else {
    l.kernels = 10;
    l.bwd_kernels = 10;
    l.fwd_bytes_per_sample = n * 12 * e + tables;
    l.bwd_bytes_per_sample = n * 13 * e + tables;
  }
  if (g < a) {
    const double kv = e * s * g * hd, rep = e * s * a * hd;  // one tensor before / after
    l.kernels += 2;
    l.bwd_kernels += 2;
    l.fwd_bytes_per_sample += 2.0 * (kv + rep);
    l.bwd_bytes_per_sample += 2.0 * (kv + rep);
    l.fused_fwd_bytes_per_sample = e * s * hd * ((a + 2 * g) + 3 * a) + tables;
    l.fused_bwd_bytes_per_sample = l.fused_fwd_bytes_per_sample;
    l.output_bytes_per_sample = 3.0 * rep;  // q and the repeated k, v: the attention's input
  }
}

// Hugging Face's gelu_new / gelu_fast (activations.py NewGELUActivation: 0.5 * x * (1.0 +
// torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))), GPT-2's
// activation, over n = s f elements: forward 8 kernels (pow, mul, add, mul, tanh, add, mul, mul),
// 18e B/elem; backward 11 kernels, 28e B/elem; saved x, tanh's output and the last product's two
// operands, 4e (docs/transformer.md, "Eager kernel sequences", GELU).
void eager_gelu(LayerSpec& l, double e) {
  const double n = l.output_bytes_per_sample / e;
  keep_fused(l);
  l.kernels = 8;
  l.bwd_kernels = 11;
  l.fwd_bytes_per_sample = 18 * e * n;
  l.bwd_bytes_per_sample = 28 * e * n;
  l.activation_bytes_per_sample = 4 * e * n;
}

// Hugging Face's eager attention around its softmax, over n = a s^2 scores per sample
// (modeling_gpt2.py _attn at v4.3.0 and eager_attention_forward through 2025: `w / sqrt(d)`,
// GPT-2's `torch.where(causal_mask, w, mask_value)` with `mask.bool()`, `w + attention_mask`,
// softmax; docs/transformer.md, "Eager kernel sequences", attention masks):
//   forward  scale (2e), where (2e, and the 1-byte cast of the s^2 mask), mask add (2e), softmax
//            (2e): 5 kernels, 8e B/elem (without the where: 3 kernels, 6e);
//   backward softmax (3e), where's zeros_like (e) and where (3e), scale (2e): 4 kernels, 9e
//            (without the where: 2 kernels, 5e); the add passes its gradient through.
// The layer as built is Megatron's fused scale-mask-softmax: 2e forward, 3e backward.
void eager_hf_attention_masks(LayerSpec& l, double e, bool where_mask) {
  const double n = l.output_bytes_per_sample / e;
  keep_fused(l);
  l.kernels = where_mask ? 5 : 3;
  l.bwd_kernels = where_mask ? 4 : 2;
  l.fwd_bytes_per_sample = n * (where_mask ? 8 * e : 6 * e);
  l.bwd_bytes_per_sample = n * (where_mask ? 9 * e : 5 * e);
}

// PyTorch's F.cross_entropy on the logits as torchtitan (`cross_entropy_loss(pred.flatten(0,
// 1).float(), labels)`) and Hugging Face (ForCausalLMLoss: `logits.float()`, then
// cross_entropy; GPT-2's CrossEntropyLoss) call it, per logit element of e bytes
// (docs/transformer.md, "Eager kernel sequences", loss):
//   log_softmax forward reads and writes fp32 (8 B), nll_loss gathers (~0), its backward fills
//   the whole gradient (4 B) and scatters (~0), log_softmax's backward reads the gradient and the
//   output and writes (12 B): 24 B, 5 kernels; bf16 / fp16 logits add the upcast (e + 4) and the
//   gradient's cast back (4 + e), 2 kernels.
void eager_cross_entropy(ModelSpec& m, double e) {
  const bool cast = e != 4.0;
  m.loss_kernels = cast ? 7 : 5;
  m.loss_bytes_per_output_byte = (24.0 + (cast ? 2.0 * (e + 4.0) : 0.0)) / e;
}

}  // namespace

void apply_eager_kernels(ModelSpec& m, Framework f, bool fused_rmsnorm) {
  if (f != Framework::kTorchtitan && f != Framework::kHf) return;
  const TransformerConfig& c = m.transformer_config;
  if (m.source != "transformer" || c.layers <= 0) return;
  const TransformerDims d = transformer_dims(c);
  // Separate q, k, v and gate / up projections: torchtitan's wq, wk, wv and w1, w3; Hugging
  // Face's Llama-family q_proj, k_proj, v_proj and gate_proj, up_proj (GPT-2's c_attn and
  // NeoX's query_key_value are one matrix).
  const bool split_projections = f == Framework::kTorchtitan || c.mlp == MlpKind::kSwiglu;
  // Bytes per activation element: the final norm's output over s h.
  double e = 2;
  for (const LayerSpec& l : m.layers)
    if (l.name == "ln_f") {
      e = l.output_bytes_per_sample /
          (static_cast<double>(c.seq_len) * static_cast<double>(c.hidden));
      break;
    }
  for (LayerSpec& l : m.layers) {
    if (l.block < 0 && l.name != "ln_f") continue;
    // The multi-token-prediction depths' norms too (core/model/mtp_layers.hpp).
    const bool norm = l.name == "ln_f" || ends_with(l.name, ".ln_1") ||
                      ends_with(l.name, ".ln_2") || ends_with(l.name, ".ln_f") ||
                      ends_with(l.name, ".enorm") || ends_with(l.name, ".hnorm");
    if (norm && c.norm == NormKind::kRmsNorm && !fused_rmsnorm) {
      eager_rmsnorm(l, e, static_cast<double>(c.hidden));
    } else if (ends_with(l.name, ".attn.rope")) {
      eager_rope(l, f, c, d, e);
    } else if (ends_with(l.name, ".mlp.gelu") && c.gelu_composite && f == Framework::kHf) {
      eager_gelu(l, e);
    } else if (ends_with(l.name, ".attn.softmax") && f == Framework::kHf) {
      eager_hf_attention_masks(l, e, c.causal_where_mask);
    } else if (split_projections && ends_with(l.name, ".attn.qkv")) {
      l.kernels = 3;  // three GEMMs of the same total shape (cost: their launches)
    } else if (split_projections && ends_with(l.name, ".mlp.fc") && c.mlp == MlpKind::kSwiglu) {
      l.kernels = 2;
    }
  }
  eager_cross_entropy(m, e);
}

int block_forward_kernels(const ModelSpec& m, int block) {
  int k = 0;
  for (const LayerSpec& l : m.layers)
    if (l.block == block) k += l.kernels;
  return k;
}

}  // namespace csim::core
