// model.transformer (core/scenario/parse_transformer.hpp). Every key, unit, default and range:
// docs/scenario.md, "model.transformer"; the layers built: docs/transformer.md.
#include "core/scenario/parse_transformer.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

#include "core/model/attention_kernels.hpp"
#include "core/model/model_transformer.hpp"

namespace csim::core::parse {

namespace {

const std::vector<std::string> kMlpNames{"gelu", "swiglu"};
const std::vector<std::string> kNormNames{"layernorm", "rmsnorm"};
const std::vector<std::string> kPositionNames{"learned", "rope", "alibi", "none"};
const std::vector<std::string> kKernelNames{"eager", "flash2", "flash3", "cudnn"};

std::string n(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::optional<TransformerProblem> transformer_problem(const TransformerConfig& c,
                                                      const GpuSpec& gpu) {
  using P = TransformerProblem;
  if (c.layers < 1) return P{"layers", "must be >= 1", "give the number of decoder blocks"};
  if (c.hidden < 1) return P{"hidden", "must be >= 1", "give the model width h"};
  if (c.heads < 1) return P{"heads", "must be >= 1", "give the number of query heads"};
  if (c.seq_len < 1) return P{"seq_len", "must be >= 1", "give the tokens per sample"};
  if (c.vocab < 1) return P{"vocab", "must be >= 1", "give the tokenizer's vocabulary size"};
  if (c.kv_heads < 0 || c.kv_heads > c.heads)
    return P{"kv_heads", n(c.kv_heads) + " is not between 1 and heads (" + n(c.heads) + ")",
             "kv_heads = heads is multi-head attention, 1 multi-query, a divisor between them GQA"};
  if (c.kv_heads > 0 && c.heads % c.kv_heads != 0)
    return P{"kv_heads", n(c.kv_heads) + " key/value heads do not divide " + n(c.heads) + " heads",
             "each key/value head serves heads / kv_heads query heads: pick a divisor of heads"};
  if (c.head_dim < 0) return P{"head_dim", "must be >= 0", "0 means hidden / heads"};
  if (c.head_dim == 0 && !c.mla.any() && c.hidden % c.heads != 0)
    return P{"heads", n(c.heads) + " heads do not divide hidden " + n(c.hidden),
             "give head_dim explicitly (as Qwen3 and Gemma do) or a divisor of hidden"};
  if (c.mlp == MlpKind::kSwiglu && c.ffn_hidden <= 0)
    return P{"ffn_hidden", "swiglu needs ffn_hidden (no default: 4h would not match any model)",
             "give the published intermediate_size, e.g. 14336 for Llama 3.1 8B"};
  if (c.ffn_hidden < 0) return P{"ffn_hidden", "must be >= 0", "0 means 4 x hidden (gelu)"};
  if (c.vocab_pad_multiple < 1)
    return P{"vocab_pad_multiple", "must be >= 1", "1 keeps the vocabulary as given"};
  if (c.position != PositionKind::kLearned && c.max_positions != 0)
    return P{"max_positions", "applies to position \"learned\" only (the position table's rows)",
             "remove max_positions or set position to learned"};
  if (c.position == PositionKind::kLearned && c.max_positions != 0 && c.max_positions < c.seq_len)
    return P{"max_positions",
             n(c.max_positions) + " learned positions are fewer than seq_len " + n(c.seq_len),
             "a learned table has one row per position: max_positions >= seq_len"};
  if (!(c.rotary_fraction > 0.0 && c.rotary_fraction <= 1.0))
    return P{"rotary_fraction", "must be in (0, 1]", "1 rotates the whole head (Llama)"};
  if (c.position != PositionKind::kRope && c.rotary_fraction != 1.0)
    return P{"rotary_fraction", "applies to position \"rope\" only",
             "remove rotary_fraction or set position to rope"};
  const std::int64_t head_dim = c.head_dim > 0 ? c.head_dim : c.hidden / c.heads;
  if (c.position == PositionKind::kRope &&
      static_cast<std::int64_t>(c.rotary_fraction * static_cast<double>(head_dim)) < 2)
    return P{"rotary_fraction", "rotates fewer than 2 of the " + n(head_dim) + " head dimensions",
             "RoPE rotates pairs of dimensions: raise rotary_fraction"};
  if (c.window < 0) return P{"attention.window", "must be >= 0", "0 means full causal attention"};
  if (c.global_every < 0)
    return P{"attention.global_every", "must be >= 0", "0 means every block is windowed"};
  if (c.global_every > 0 && c.window == 0)
    return P{"attention.global_every", "needs attention.window (global blocks among windowed ones)",
             "set attention.window or remove global_every"};
  if (c.attention_dropout && c.attention_kernel == AttentionKernel::kFlash3)
    return P{"attention.dropout", "attention kernel flash3 has no dropout (docs/attention.md)",
             "use attention.kernel flash2 or cudnn, or remove attention.dropout"};
  if (auto p = moe_problem(c)) return p;
  if (auto p = mla_problem(c)) return p;
  const std::string why = attention_kernel_unsupported(c.attention_kernel, gpu);
  if (!why.empty())
    return P{"attention.kernel", why,
             std::string("use attention.kernel \"") + to_string(default_attention_kernel(gpu)) +
                 "\" (this GPU's default) or another GPU"};
  return std::nullopt;
}

ModelSpec build_checked_transformer(Ctx& ctx, const TransformerConfig& c, const std::string& path,
                                    int act_bytes, const GpuSpec& gpu) {
  if (const auto p = transformer_problem(c, gpu))
    ctx.fail(path + "." + p->key, p->message, p->hint);
  const std::int64_t built = transformer_layer_count(c);  // docs/scenario.md, "model.transformer"
  if (built > ctx.limits.max_layers)
    ctx.over_limit(path + ".layers", n(c.layers) + " blocks = " + n(built) + " layers",
                   ctx.limits.max_layers, "max_layers", ScenarioLimits::kCeilingLayers);
  try {
    return build_transformer(c, act_bytes);
  } catch (const std::invalid_argument& e) {
    ctx.fail(path, e.what());  // transformer_problem checks every case build_transformer refuses
  }
}

ModelSpec parse_transformer(Ctx& ctx, const nlohmann::json& v, const std::string& path,
                            int act_bytes, const GpuSpec& gpu) {
  Obj o(ctx, v, path,
        {"layers",
         "hidden",
         "heads",
         "kv_heads",
         "head_dim",
         "ffn_hidden",
         "seq_len",
         "vocab",
         "vocab_pad_multiple",
         "max_positions",
         "mlp",
         "norm",
         "position",
         "rotary_fraction",
         "tied_embeddings",
         "qkv_bias",
         "attn_out_bias",
         "mlp_bias",
         "qk_norm",
         "parallel_residual",
         "hidden_dropout",
         "attention",
         "moe",
         "mla",
         "mtp_layers"});
  TransformerConfig c;
  c.layers = static_cast<int>(o.req_integer("layers", 1, 100000));
  c.hidden = o.req_integer("hidden", 1, 1 << 17);
  c.heads = static_cast<int>(o.req_integer("heads", 1, 4096));
  c.kv_heads = static_cast<int>(o.integer("kv_heads", 0, 1, 4096));
  c.head_dim = o.integer("head_dim", 0, 1, 1 << 14);
  c.ffn_hidden = o.integer("ffn_hidden", 0, 1, 1 << 20);
  c.seq_len = o.req_integer("seq_len", 1, 1 << 22);
  c.vocab = o.req_integer("vocab", 1, 1 << 24);
  c.vocab_pad_multiple = o.integer("vocab_pad_multiple", 1, 1, 1 << 16);
  c.max_positions = o.integer("max_positions", 0, 1, 1 << 22);
  c.mlp = static_cast<MlpKind>(o.choice("mlp", kMlpNames, 0));
  c.norm = static_cast<NormKind>(o.choice("norm", kNormNames, 0));
  c.position = static_cast<PositionKind>(o.choice("position", kPositionNames, 0));
  c.rotary_fraction = o.number("rotary_fraction", 1.0, 1e-9, 1.0);
  c.tied_embeddings = o.boolean("tied_embeddings", false);
  c.qkv_bias = o.boolean("qkv_bias", false);
  c.attn_out_bias = o.boolean("attn_out_bias", false);
  c.mlp_bias = o.boolean("mlp_bias", false);
  c.qk_norm = o.boolean("qk_norm", false);
  c.parallel_residual = o.boolean("parallel_residual", false);
  c.hidden_dropout = o.boolean("hidden_dropout", false);
  if (o.has("mla")) c.mla = parse_mla(ctx, o.raw("mla"), o.at("mla"));
  c.attention_kernel = mla_default_kernel(c, default_attention_kernel(gpu));
  if (o.has("attention")) {
    Obj a(ctx, o.raw("attention"), o.at("attention"),
          {"kernel", "window", "global_every", "dropout", "sinks"});
    c.attention_kernel = static_cast<AttentionKernel>(
        a.choice("kernel", kKernelNames, static_cast<int>(c.attention_kernel)));
    c.window = a.integer("window", 0, 0, 1 << 22);
    c.global_every = static_cast<int>(a.integer("global_every", 0, 0, 100000));
    c.attention_dropout = a.boolean("dropout", false);
    c.attention_sinks = a.boolean("sinks", false);
  }
  if (o.has("moe")) c.moe = parse_moe(ctx, o.raw("moe"), o.at("moe"));
  // Multi-token-prediction depths (core/model/mtp_layers.hpp); 0 = none.
  c.mtp_layers = static_cast<int>(o.integer("mtp_layers", 0, 0, 64));
  return build_checked_transformer(ctx, c, path, act_bytes, gpu);
}

bool pad_transformer_vocab_for_tp(Ctx& ctx, ModelSpec& m, int tp, int act_bytes) {
  TransformerConfig c = m.transformer_config;
  const std::int64_t rows = m.transformer.vocab;  // the padded rows
  if (c.layers == 0 || tp <= 1 || rows % tp == 0) return false;
  // Megatron (megatron/training/tokenizer, vocab_size_with_padding; make_vocab_size_divisible_by
  // = 128): V' = ceil(V / (128 tp)) * 128 tp.
  c.vocab_pad_multiple = 128LL * tp;
  ModelSpec rebuilt = build_transformer(c, act_bytes);
  rebuilt.name = m.name;
  rebuilt.input_bytes_per_sample = m.input_bytes_per_sample;
  rebuilt.python_hooks = m.python_hooks;
  ctx.warn("model.transformer.vocab", n(rows) + " rows do not split over tp " + std::to_string(tp) +
                                          ": padded to " + n(rebuilt.transformer.vocab) +
                                          " (a multiple of 128 x tp, as Megatron pads it)");
  m = std::move(rebuilt);
  return true;
}

}  // namespace csim::core::parse
