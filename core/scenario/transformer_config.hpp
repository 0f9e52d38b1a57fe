// A general decoder-only transformer as a user (or a Hugging Face config.json) describes it:
// plain data, no JSON. `model.transformer` in scenario.json (core/scenario/parse_transformer.cpp)
// and `model.hf_config` (core/model/hf_config.cpp) both fill one TransformerConfig;
// build_transformer (core/model/model_transformer.hpp) turns it into layers. Every key and its
// default: docs/scenario.md, "model.transformer"; every formula: docs/transformer.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace csim::core {

enum class MlpKind { kGelu, kSwiglu };  // gelu: fc + gelu + proj; swiglu: gate, up, silu*mul, down
enum class NormKind { kLayerNorm, kRmsNorm };  // layernorm: weight + bias; rmsnorm: weight only
enum class PositionKind { kLearned, kRope, kAlibi, kNone };
// The attention core's implementation: eager = unfused scores / softmax / (dropout) / AV with the
// s^2 matrices in memory (the 2019 GPT block); flash2 = FlashAttention-2; flash3 =
// FlashAttention-3 (Hopper only); cudnn = PyTorch SDPA's cuDNN backend.
enum class AttentionKernel { kEager, kFlash2, kFlash3, kCudnn };

const char* to_string(MlpKind k);
const char* to_string(NormKind k);
const char* to_string(PositionKind k);
const char* to_string(AttentionKernel k);

// Mixture of experts in the decoder block (docs/transformer.md, "Mixture of experts"): blocks
// whose MLP is `experts` SwiGLU experts of which each token uses `top_k`, chosen by a router, plus
// `shared_experts` every token uses. experts == 0: every block dense.
// How tokens spread over the experts (docs/transformer.md, "Routing imbalance"): each MoE block's
// share of every expert, sampled per block and micro-batch from `seed`.
enum class RoutingKind : std::uint8_t { kBalanced, kZipf, kDirichlet, kHistogram };
struct MoeRouting {
  RoutingKind kind = RoutingKind::kBalanced;
  double skew = 1.0;           // zipf: share of the i-th most popular expert ~ 1 / i^skew
  double concentration = 1.0;  // dirichlet: alpha of the symmetric Dirichlet (small: skewed)
  std::vector<double> tokens;  // histogram: tokens (or any weight) per expert, E entries
  std::uint64_t seed = 0;
};

// The router's scoring (docs/transformer.md, "Router"): softmax over the E logits (Mixtral,
// Qwen3-MoE) or a sigmoid per expert (DeepSeek-V3), optionally with a score-correction bias of E
// entries per MoE block that only the selection reads (DeepSeek-V3's auxiliary-loss-free balancing)
// and group-limited selection (the experts in `groups` groups, a token choosing among the
// `group_top_k` best groups only).
enum class RouterScore : std::uint8_t { kSoftmax, kSigmoid };
struct MoeRouter {
  RouterScore score = RouterScore::kSoftmax;
  bool bias = false;    // E parameters per MoE block (DeepSeek-V3's e_score_correction_bias)
  int groups = 1;       // n_group; 1 = no group limit
  int group_top_k = 1;  // topk_group: groups a token may use (<= groups)
};

struct MoeConfig {
  int experts = 0;                     // E, routed experts per MoE block
  int top_k = 0;                       // k, experts per token
  std::int64_t expert_ffn_hidden = 0;  // f_e, one expert's width; 0 = ffn_hidden
  int shared_experts = 0;              // experts every token uses (DeepSeek, Qwen2-MoE)
  std::int64_t shared_ffn_hidden = 0;  // their total width; 0 = shared_experts x f_e
  int first_dense_layers = 0;          // blocks 0..n-1 keep a dense MLP (DeepSeek-V3: 3)
  int every_k_layers = 1;              // block i is MoE when (i + 1) % k == 0 (Qwen's step)
  // Capacity (docs/transformer.md, "Capacity and dropped tokens"): each expert takes at most
  // capacity_factor x its balanced share of a rank's routed copies, the rest are dropped; 0 =
  // dropless. pad_to_capacity: every expert computes exactly its capacity (Megatron's
  // moe_pad_expert_input_to_capacity).
  double capacity_factor = 0;
  bool pad_to_capacity = false;
  bool expert_bias = false;  // biases on every expert's matrices (GPT-OSS): E (2 f_e + h)
  MoeRouter router;          // softmax, no bias, no groups unless said otherwise
  MoeRouting routing;        // balanced unless the scenario says otherwise
  bool any() const { return experts > 0; }
};

// Multi-head latent attention (DeepSeek-V2/V3; docs/transformer.md, "Multi-head latent
// attention"): q and the joint k/v are projected down to low ranks, normed, and projected back up
// per head; each head's q and k carry qk_nope_head_dim dimensions without positions and
// qk_rope_head_dim rotated ones (k's rotated part computed once and shared by every head).
// kv_lora_rank == 0: ordinary attention (heads, kv_heads, head_dim).
struct MlaConfig {
  std::int64_t q_lora_rank = 0;       // 0: q projected straight from h (DeepSeek-V2-Lite)
  std::int64_t kv_lora_rank = 0;      // the joint k/v latent's width
  std::int64_t qk_nope_head_dim = 0;  // per-head q/k dimensions without RoPE
  std::int64_t qk_rope_head_dim = 0;  // per-head q/k dimensions rotated by RoPE
  std::int64_t v_head_dim = 0;        // per-head value dimensions
  bool any() const { return kv_lora_rank > 0; }
};

struct TransformerConfig {
  std::string name;                     // e.g. "Llama-3.1-8B"; "" = the builder names it by shape
  int layers = 0;                       // l, decoder blocks
  std::int64_t hidden = 0;              // h
  int heads = 0;                        // a, query heads
  int kv_heads = 0;                     // key/value heads (GQA); 0 = heads (MHA); 1 = MQA
  std::int64_t head_dim = 0;            // 0 = hidden / heads
  std::int64_t ffn_hidden = 0;          // f; 0 = 4h for gelu (swiglu needs it given, as published)
  std::int64_t seq_len = 0;             // s, tokens per sample
  std::int64_t vocab = 0;               // V as given (the tokenizer's size)
  std::int64_t vocab_pad_multiple = 1;  // embedding rows padded up to a multiple of this
  std::int64_t max_positions = 0;       // learned position table rows; 0 = seq_len
  MlpKind mlp = MlpKind::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  double rotary_fraction = 1.0;    // share of head_dim that RoPE rotates (GPT-NeoX rotary_pct)
  bool tied_embeddings = false;    // LM head shares the token embedding
  bool qkv_bias = false;           // biases on the q, k, v projections (GPT-2, Qwen2)
  bool attn_out_bias = false;      // bias on the attention output projection (GPT-2, NeoX)
  bool mlp_bias = false;           // biases on the MLP matrices (GPT-2, NeoX)
  bool qk_norm = false;            // RMSNorm over q and k per head (Qwen3): 2 * head_dim params
  bool parallel_residual = false;  // x + attn(ln1(x)) + mlp(ln2(x)) (GPT-NeoX, GPT-J)
  std::int64_t window = 0;         // sliding-window attention span in tokens; 0 = full causal
  int global_every = 0;  // with a window: every k-th block attends fully (0 = all windowed)
  bool attention_dropout = false;  // dropout on the attention probabilities (GPT-2 training)
  // A learned logit per head that joins every softmax row and absorbs part of its mass ("attention
  // sinks", GPT-OSS): `heads` parameters per block in attn.core.
  bool attention_sinks = false;
  // The GELU is a Python formula of separate tensor operations in eager mode (Hugging Face's
  // gelu_new / gelu_fast, GPT-2's): core/model/eager_kernels.hpp costs its kernels under framework
  // hf.
  bool gelu_composite = false;
  // Eager attention masks the causal future with torch.where over its `bias` buffer before adding
  // the attention mask (GPT-2's _attn / eager_attention_forward in transformers <= 4.5x):
  // core/model/eager_kernels.hpp costs the pass under framework hf.
  bool causal_where_mask = false;
  bool hidden_dropout = false;  // dropout after the embeddings and on both residual branches
                                // (GPT-2 training: resid_pdrop, embd_pdrop)
  AttentionKernel attention_kernel = AttentionKernel::kFlash2;  // resolved by the parser
  MoeConfig moe;                                                // dense unless moe.experts > 0
  MlaConfig mla;  // ordinary attention unless mla.kv_lora_rank > 0
  // D, multi-token-prediction depths trained beside the main model (DeepSeek-V3's
  // num_nextn_predict_layers; Megatron-Core's mtp_num_layers): each appends one more block after
  // the final norm, on the last pipeline stage (core/model/mtp_layers.hpp). 0 = none.
  int mtp_layers = 0;
};

}  // namespace csim::core
