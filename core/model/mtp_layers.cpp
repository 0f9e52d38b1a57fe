// Multi-token-prediction depths (core/model/mtp_layers.hpp). Every formula: docs/transformer.md,
// "Multi-token prediction", cited at the line that implements it.
#include "core/model/mtp_layers.hpp"

#include <string>

#include "core/model/block_layers.hpp"
#include "core/model/model_builders.hpp"
#include "core/model/model_transformer.hpp"

namespace csim::core {

namespace {

using CK = ComputeKind;

}  // namespace

void add_mtp_modules(ModelSpec& m, const TransformerConfig& c, double e) {
  if (c.mtp_layers <= 0 || c.layers < 1) return;
  const TransformerDims d = transformer_dims(c);
  const std::int64_t h = c.hidden, vp = d.padded_vocab;
  const double s = static_cast<double>(c.seq_len), sh = s * static_cast<double>(h);
  const double svp = s * static_cast<double>(vp);
  for (int k = 0; k < c.mtp_layers; ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    const int block = c.layers + k;
    // The shifted tokens' embedding: a row gather from the main model's table (Megatron-Core
    // passes GPTModel.embedding to the MTP block; no parameters here), as the main embed layer:
    // reads and writes s h, saves the int64 ids for its backward; vocabulary-parallel under tensor
    // parallelism (an all-reduce of its output).
    m.layers.push_back(make_layer(p + "embed", CK::kElementwise, TpRole::kVocabInput, 0, 0,
                                  2.0 * e * sh, 8.0 * s, e * sh, 1));
    const std::size_t first = m.layers.size();
    // enorm on the embedding (its input saved); hnorm on the previous depth's output, which the
    // LM head (depth 0: the main model's) or the next depth's block already holds, so it keeps
    // only its statistics (MultiTokenPredictionLayer._concat_embeddings).
    m.layers.push_back(norm_spec(p + "enorm", c.norm, h, s, e, false, TpRole::kReplicated));
    m.layers.push_back(norm_spec(p + "hnorm", c.norm, h, s, e, true, TpRole::kReplicated));
    // torch.cat((embedding, hidden), -1): reads 2 e s h, writes 2 e s h, saves nothing; its
    // backward is two views of the gradient (no kernel, no traffic).
    LayerSpec cat = make_layer(p + "concat", CK::kElementwise, TpRole::kReplicated, 0, 0,
                               4.0 * e * sh, 0, 2.0 * e * sh, 1);
    cat.bwd_bytes_per_sample = 0;
    cat.bwd_kernels = 0;
    m.layers.push_back(std::move(cat));
    // eh_proj: Linear(2h, h) without bias, Megatron's column-parallel eh_proj (2 s 2h h FLOPs,
    // 2 h^2 params; saves its [s, 2h] input).
    m.layers.push_back(linear_spec(p + "eh_proj", 2 * h, h, false, s, e, TpRole::kColumn));
    for (std::size_t j = first; j < m.layers.size(); ++j) m.layers[j].block = block;
    // One decoder block shaped as the main model's last (mtp_block_like).
    add_decoder_block(m, c, mtp_block_like(c), block, p, e);
    // The depth's final norm (Megatron's final_layernorm; the checkpoint's shared_head.norm).
    m.layers.push_back(norm_spec(p + "ln_f", c.norm, h, s, e, false, TpRole::kReplicated));
    m.layers.back().block = block;
    // The shared output head: the main LM head's GEMM (2 s h Vp FLOPs) on the depth's output, no
    // parameters of its own; saves its input; its output is the depth's logits.
    LayerSpec head =
        make_layer(p + "lm_head", CK::kGemm, TpRole::kVocabOutput, 0,
                   2.0 * sh * static_cast<double>(vp), e * (sh + svp), e * sh, e * svp, 1);
    head.gemm = GemmShape{1, static_cast<std::int64_t>(s), vp, h};
    m.layers.push_back(std::move(head));
    // The depth's cross-entropy, costed as the main loss (docs/program.md, "A training step": 5
    // FLOPs per logit and one read of the logits, forward and backward together, 3 framework
    // ops); it keeps the logits until its backward, as the main loss keeps the model output.
    // Split by vocabulary under tensor parallelism. Its output is the hidden state it was handed
    // (Megatron's MTPLossAutoScaler returns the main model's hidden states, which the main LM head
    // reads next): e s h.
    LayerSpec loss = make_layer(p + "loss", CK::kElementwise, TpRole::kSharded, 0, 5.0 * svp,
                                e * svp, e * svp, e * sh, 3);
    loss.bwd_flops_per_sample = 0;
    loss.bwd_bytes_per_sample = 0;
    loss.bwd_kernels = 0;
    m.layers.push_back(std::move(loss));
  }
}

bool is_mtp_layer(const LayerSpec& l) {
  return l.name.rfind("mtp.", 0) == 0;
}

MtpParams mtp_params(const ModelSpec& m) {
  MtpParams out;
  for (const LayerSpec& l : m.layers) {
    if (!is_mtp_layer(l)) continue;
    out.total += l.params;
    out.active += l.params - l.inactive_params;
  }
  return out;
}

}  // namespace csim::core
