// Model builders (core/model/model_builders.hpp). Formulas: docs/scenario.md, "Model"; each is
// cited at the line that implements it.
//
// Index: [SECTION] Layer formulas, [SECTION] Layer list, [SECTION] GPT, [SECTION] ResNet-50,
//        [SECTION] Explicit
#include "core/model/model_builders.hpp"

#include <stdexcept>
#include <utility>

namespace csim::core {

LayerSpec make_layer(std::string name, ComputeKind kind, TpRole role, std::int64_t params,
                     double flops, double bytes, double act, double out, int kernels) {
  LayerSpec l;
  l.name = std::move(name);
  l.kind = kind;
  l.tp_role = role;
  l.params = params;
  l.fwd_flops_per_sample = flops;
  l.fwd_bytes_per_sample = bytes;
  l.activation_bytes_per_sample = act;
  l.output_bytes_per_sample = out;
  l.kernels = kernels;
  return l;
}

namespace {

using i64 = std::int64_t;

// [SECTION] Layer formulas -----------------------------------------------------------------------
// Per sample, forward; e = bytes per activation element; FLOPs = 2 per MAC. `count_input` is false
// when the layer's input tensor is already counted as saved by the layer that produced it.

LayerSpec make(std::string name, ComputeKind kind, i64 params, double flops, double bytes,
               double act, double out, int kernels) {
  return make_layer(std::move(name), kind, TpRole::kReplicated, params, flops, bytes, act, out,
                    kernels);
}

i64 conv_out(i64 in, int kernel, int stride, int padding) {
  // torch.nn.Conv2d / MaxPool2d (dilation 1): floor((in + 2p - k) / s) + 1
  return (in + 2 * padding - kernel) / stride + 1;
}

// Linear(in, out) applied at `tokens` positions: params in*out (+out bias); FLOPs 2*t*in*out;
// traffic e*t*(in + out); saves its input (e*t*in).
LayerSpec linear_spec(std::string name, i64 in, i64 out, i64 tokens, bool bias, double e,
                      bool count_input) {
  const double t = static_cast<double>(tokens);
  LayerSpec l =
      make(std::move(name), ComputeKind::kGemm, in * out + (bias ? out : 0),
           2.0 * t * static_cast<double>(in) * static_cast<double>(out),
           e * t * static_cast<double>(in + out), count_input ? e * t * static_cast<double>(in) : 0,
           e * t * static_cast<double>(out), 1);
  l.gemm = GemmShape{1, tokens, out, in};  // docs/cost-model.md, "GEMM shape"
  return l;
}

// Conv2d(cin, cout, k, s, p) on H x W: params cout*cin*k^2 (+cout bias);
// FLOPs 2*cout*Ho*Wo*cin*k^2; traffic e*(cin*H*W + cout*Ho*Wo); saves its input (e*cin*H*W).
LayerSpec conv_spec(std::string name, i64 cin, i64 cout, int k, int stride, int pad, i64 h, i64 w,
                    bool bias, double e, bool count_input) {
  const i64 ho = conv_out(h, k, stride, pad), wo = conv_out(w, k, stride, pad);
  const double in_elems = static_cast<double>(cin * h * w);
  const double out_elems = static_cast<double>(cout * ho * wo);
  return make(std::move(name), ComputeKind::kConv, cout * cin * k * k + (bias ? cout : 0),
              2.0 * out_elems * static_cast<double>(cin * k * k), e * (in_elems + out_elems),
              count_input ? e * in_elems : 0, e * out_elems, 1);
}

// BatchNorm2d(C) over C x H x W: params 2C (weight, bias); buffers 2C + 1 (running_mean,
// running_var, num_batches_tracked); FLOPs 4/elem; traffic 3e/elem (stats read, normalise
// read + write); saves its input.
LayerSpec bn_spec(std::string name, i64 c, i64 h, i64 w, double e, bool count_input) {
  const double n = static_cast<double>(c * h * w);
  LayerSpec l = make(std::move(name), ComputeKind::kElementwise, 2 * c, 4.0 * n, 3.0 * e * n,
                     count_input ? e * n : 0, e * n, 1);
  l.buffer_elems = 2 * c + 1;
  return l;
}

// Pointwise op over n elements: traffic 2e/elem. Saved: relu/sigmoid/tanh their output (e/elem),
// gelu/generic their input, dropout its mask (1 B/elem, torch.bool).
struct PointwiseOp {
  const char* op;
  double flops_per_elem;
  bool saves_output;
  bool saves_mask;
};
constexpr PointwiseOp kPointwiseOps[] = {
    {"relu", 1, true, false},  {"sigmoid", 4, true, false}, {"tanh", 4, true, false},
    {"gelu", 8, false, false}, {"dropout", 2, false, true}, {"elementwise", 1, false, false},
};

LayerSpec maxpool_spec(std::string name, i64 c, i64 h, i64 w, int k, int stride, int pad, double e,
                       bool count_input) {
  // max_pool2d_with_indices: FLOPs k^2 comparisons per output; saves its input and int64 indices.
  const i64 ho = conv_out(h, k, stride, pad), wo = conv_out(w, k, stride, pad);
  const double in_elems = static_cast<double>(c * h * w),
               out_elems = static_cast<double>(c * ho * wo);
  return make(std::move(name), ComputeKind::kElementwise, 0, static_cast<double>(k * k) * out_elems,
              e * (in_elems + out_elems), (count_input ? e * in_elems : 0) + 8.0 * out_elems,
              e * out_elems, 1);
}

LayerSpec avgpool_spec(std::string name, i64 c, i64 h, i64 w, double e) {
  // adaptive_avg_pool2d to 1x1: 1 FLOP per input element; backward needs only the shape.
  const double in_elems = static_cast<double>(c * h * w);
  return make(std::move(name), ComputeKind::kElementwise, 0, in_elems,
              e * (in_elems + static_cast<double>(c)), 0, e * static_cast<double>(c), 1);
}

LayerSpec add_spec(std::string name, i64 elems, double e) {
  // residual add: 1 FLOP/elem, reads two tensors and writes one, saves nothing.
  const double n = static_cast<double>(elems);
  return make(std::move(name), ComputeKind::kElementwise, 0, n, 3.0 * e * n, 0, e * n, 1);
}

LayerSpec relu_spec(std::string name, i64 elems, double e) {
  const double n = static_cast<double>(elems);
  return make(std::move(name), ComputeKind::kElementwise, 0, n, 2.0 * e * n, e * n, e * n, 1);
}

}  // namespace

// [SECTION] Layer list ---------------------------------------------------------------------------

void LayerListBuilder::start(const ActivationShape& in, double input_bytes) {
  shape_ = in;
  input_bytes_ = input_bytes;
  started_ = true;
  prev_saved_output_ = false;
}

void LayerListBuilder::push(LayerSpec l, bool saves_output) {
  layers_.push_back(std::move(l));
  prev_saved_output_ = saves_output;
}

double LayerListBuilder::saved_input_bytes() const {
  return prev_saved_output_ ? 0.0 : act_bytes_ * static_cast<double>(shape_.elems());
}

namespace {
void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}
std::string s(i64 v) {
  return std::to_string(v);
}
}  // namespace

void LayerListBuilder::linear(std::string name, i64 in, i64 out, bool bias) {
  require(in >= 1 && out >= 1, "in and out must be >= 1");
  if (!started_) {
    ActivationShape sh;
    sh.features = in;
    start(sh, 4.0 * static_cast<double>(in));  // fp32 features
  }
  require(!shape_.is_image, "linear needs a vector input, the previous layer gives an image (" +
                                s(shape_.channels) + "x" + s(shape_.height) + "x" +
                                s(shape_.width) + "): add {\"type\": \"flatten\"} first");
  require(shape_.features == in, "in = " + s(in) + " does not match the previous layer's output (" +
                                     s(shape_.features) + " features)");
  const bool count = !prev_saved_output_;
  push(linear_spec(std::move(name), in, out, shape_.tokens, bias, act_bytes_, count), false);
  shape_.features = out;
}

void LayerListBuilder::conv2d(std::string name, i64 in_channels, i64 out_channels, int kernel,
                              int stride, int padding, i64 in_h, i64 in_w, bool bias) {
  require(in_channels >= 1 && out_channels >= 1 && kernel >= 1 && stride >= 1 && padding >= 0,
          "channels, kernel and stride must be >= 1, padding >= 0");
  if (!started_) {
    require(in_h >= 1 && in_w >= 1, "the first conv2d needs in_h and in_w (input image size)");
    ActivationShape sh;
    sh.is_image = true;
    sh.channels = in_channels;
    sh.height = in_h;
    sh.width = in_w;
    start(sh, 4.0 * static_cast<double>(in_channels * in_h * in_w));  // fp32 image
  }
  require(shape_.is_image, "conv2d needs an image input, the previous layer gives " +
                               s(shape_.elems()) + " features");
  require(shape_.channels == in_channels, "in = " + s(in_channels) +
                                              " does not match the previous layer's channels (" +
                                              s(shape_.channels) + ")");
  require(in_h == 0 || in_h == shape_.height,
          "in_h = " + s(in_h) + " does not match the incoming height " + s(shape_.height));
  require(in_w == 0 || in_w == shape_.width,
          "in_w = " + s(in_w) + " does not match the incoming width " + s(shape_.width));
  const i64 ho = conv_out(shape_.height, kernel, stride, padding);
  const i64 wo = conv_out(shape_.width, kernel, stride, padding);
  require(ho >= 1 && wo >= 1, "kernel " + std::to_string(kernel) +
                                  " is larger than the padded input " + s(shape_.height) + "x" +
                                  s(shape_.width));
  push(conv_spec(std::move(name), in_channels, out_channels, kernel, stride, padding, shape_.height,
                 shape_.width, bias, act_bytes_, !prev_saved_output_),
       false);
  shape_.channels = out_channels;
  shape_.height = ho;
  shape_.width = wo;
}

void LayerListBuilder::batchnorm2d(std::string name, i64 channels) {
  require(started_ && shape_.is_image, "batchnorm2d needs an image input (after a conv2d)");
  if (channels == 0) channels = shape_.channels;
  require(channels == shape_.channels, "channels = " + s(channels) +
                                           " does not match the previous layer's channels (" +
                                           s(shape_.channels) + ")");
  push(bn_spec(std::move(name), channels, shape_.height, shape_.width, act_bytes_,
               !prev_saved_output_),
       false);
}

void LayerListBuilder::maxpool2d(std::string name, int kernel, int stride, int padding) {
  require(started_ && shape_.is_image, "maxpool2d needs an image input");
  require(kernel >= 1 && stride >= 1 && padding >= 0 && 2 * padding <= kernel,
          "kernel and stride must be >= 1 and padding at most half the kernel");
  const i64 ho = conv_out(shape_.height, kernel, stride, padding);
  const i64 wo = conv_out(shape_.width, kernel, stride, padding);
  require(ho >= 1 && wo >= 1, "kernel larger than the padded input");
  push(maxpool_spec(std::move(name), shape_.channels, shape_.height, shape_.width, kernel, stride,
                    padding, act_bytes_, !prev_saved_output_),
       false);
  shape_.height = ho;
  shape_.width = wo;
}

void LayerListBuilder::adaptive_avgpool(std::string name) {
  require(started_ && shape_.is_image, "adaptive_avgpool needs an image input");
  push(avgpool_spec(std::move(name), shape_.channels, shape_.height, shape_.width, act_bytes_),
       false);
  ActivationShape sh;
  sh.features = shape_.channels;
  shape_ = sh;
}

void LayerListBuilder::flatten() {
  require(started_, "flatten needs an input shape: start with linear, conv2d or embedding");
  if (!shape_.is_image) return;
  ActivationShape sh;
  sh.features = shape_.elems();
  shape_ = sh;
}

void LayerListBuilder::elementwise(std::string name, const std::string& op) {
  require(started_, op + " needs an input shape: start with linear, conv2d or embedding");
  const PointwiseOp* found = nullptr;
  for (const PointwiseOp& p : kPointwiseOps) {
    if (op == p.op) found = &p;
  }
  require(found != nullptr, "unknown pointwise op '" + op + "'");
  const double n = static_cast<double>(shape_.elems());
  double act = 0;
  if (found->saves_output)
    act = act_bytes_ * n;
  else if (found->saves_mask)
    act = n;
  else
    act = saved_input_bytes();
  LayerSpec l = make(std::move(name), ComputeKind::kElementwise, 0, found->flops_per_elem * n,
                     2.0 * act_bytes_ * n + (found->saves_mask ? n : 0), act, act_bytes_ * n, 1);
  // Backward (docs/scenario.md, "Backward traffic"): reads the saved tensor and dy, writes dx
  // (3e/elem); dropout reads dy and its 1-byte mask, writes dx (2e + 1).
  l.bwd_bytes_per_sample = found->saves_mask ? 2.0 * act_bytes_ * n + n : 3.0 * act_bytes_ * n;
  push(std::move(l), found->saves_output);
}

void LayerListBuilder::embedding(std::string name, i64 num, i64 dim, i64 tokens) {
  require(!started_, "embedding must be the first layer: its input is token ids");
  require(num >= 1 && dim >= 1 && tokens >= 1, "num, dim and tokens must be >= 1");
  ActivationShape sh;
  sh.tokens = tokens;
  sh.features = dim;
  start(sh, 8.0 * static_cast<double>(tokens));  // int64 token ids
  // Row gather: reads and writes tokens*dim elements; saves the int64 ids for backward.
  const double n = static_cast<double>(tokens * dim);
  push(make(std::move(name), ComputeKind::kElementwise, num * dim, 0, 2.0 * act_bytes_ * n,
            8.0 * static_cast<double>(tokens), act_bytes_ * n, 1),
       false);
}

void LayerListBuilder::layernorm(std::string name, i64 features) {
  require(started_ && !shape_.is_image, "layernorm needs a vector or sequence input");
  if (features == 0) features = shape_.features;
  require(features == shape_.features, "features = " + s(features) +
                                           " does not match the previous layer's output (" +
                                           s(shape_.features) + ")");
  // params 2f; FLOPs 5/elem; traffic 2e/elem; saves its input + fp32 mean and rstd per position.
  const double n = static_cast<double>(shape_.elems());
  LayerSpec l =
      make(std::move(name), ComputeKind::kElementwise, 2 * features, 5.0 * n, 2.0 * act_bytes_ * n,
           saved_input_bytes() + 8.0 * static_cast<double>(shape_.tokens), act_bytes_ * n, 1);
  // Backward (docs/scenario.md, "Backward traffic"): dx from dy and x, then dgamma and dbeta
  // from dy and x again: 5e/elem + the fp32 statistics.
  l.bwd_bytes_per_sample = 5.0 * act_bytes_ * n + 8.0 * static_cast<double>(shape_.tokens);
  push(std::move(l), false);
}

void LayerListBuilder::attention(std::string name, i64 hidden, int heads) {
  require(started_ && !shape_.is_image, "attention needs a sequence input (after an embedding)");
  if (hidden == 0) hidden = shape_.features;
  require(hidden == shape_.features, "hidden = " + s(hidden) +
                                         " does not match the previous layer's output (" +
                                         s(shape_.features) + ")");
  require(heads >= 1 && hidden % heads == 0,
          "heads = " + std::to_string(heads) + " must divide hidden = " + s(hidden));
  const double sq = static_cast<double>(shape_.tokens), h = static_cast<double>(hidden), a = heads,
               e = act_bytes_;
  // params 4h^2 + 4h (QKV + output projection, with biases); FLOPs 8sh^2 + 4s^2h (Narayanan et al.
  // 2021); saved (11sh + 5as^2) * e/2 (Korthikanti et al. 2022, attention block), minus the input
  // (sh*e) when the previous layer already saved it; traffic e*(10sh + 6as^2); 7 kernels.
  double act = (11.0 * sq * h + 5.0 * a * sq * sq) * e / 2.0;
  if (prev_saved_output_) act -= sq * h * e;
  push(make(std::move(name), ComputeKind::kAttention, 4 * hidden * hidden + 4 * hidden,
            8.0 * sq * h * h + 4.0 * sq * sq * h, e * (10.0 * sq * h + 6.0 * a * sq * sq), act,
            e * sq * h, 7),
       false);
}

void LayerListBuilder::add_python_us(double us) {
  require(!layers_.empty(), "no layer to attach Python time to");
  layers_.back().extra_python_us += us;
}

// [SECTION] GPT ----------------------------------------------------------------------------------

ModelSpec build_gpt(const GptConfig& cfg, int act_bytes) {
  require(
      cfg.layers >= 1 && cfg.hidden >= 1 && cfg.heads >= 1 && cfg.seq_len >= 1 && cfg.vocab >= 1,
      "gpt sizes must be >= 1");
  require(cfg.hidden % cfg.heads == 0, "heads must divide hidden");
  const i64 h = cfg.hidden, f = cfg.ffn_hidden > 0 ? cfg.ffn_hidden : 4 * h;
  const double s = static_cast<double>(cfg.seq_len), hd = static_cast<double>(h),
               fd = static_cast<double>(f), a = cfg.heads, v = static_cast<double>(cfg.vocab);
  const double e = act_bytes, k = e / 2.0;  // k scales Korthikanti's 2-byte figures to the dtype
  const double sh = s * hd, sf = s * fd, as2 = a * s * s;

  ModelSpec m;
  m.name = "gpt";
  m.source = "gpt";
  m.input_bytes_per_sample = 8.0 * s;  // int64 token ids
  // The embedding, 13 layers per block, ln_f and the LM head: one allocation (a sweep or tune
  // builds the model once per variant).
  m.layers.reserve(static_cast<std::size_t>(cfg.layers) * 13 + 3);
  // Token + position embeddings, add, dropout: params V*h + s*h; saves the ids (8 B each) and the
  // dropout mask (1 B/elem).
  m.layers.push_back(make("embed", ComputeKind::kElementwise, cfg.vocab * h + cfg.seq_len * h,
                          2.0 * sh, 5.0 * e * sh + sh, 8.0 * s + sh, e * sh, 4));
  m.layers.back().second_tensor_params = cfg.seq_len * h;  // wpe beside wte
  // One block = 13 layers. Per sample (Korthikanti et al. 2022, section 4.1; f = ffn width, 4h):
  //   activations (2-byte units): ln_1 2sh, qkv 2sh, core 6sh + 5as^2 (scores 4sh, softmax 2as^2,
  //   dropout as^2, av 2as^2 + 2sh), proj 2sh, residual sh,
  //   ln_2 2sh, fc 2sh, gelu 2sf, proj 2sf, residual sh  ->  sh(34 + 5as/h) for f = 4h;
  //   FLOPs: qkv 6sh^2, core 4s^2h (scores and av), proj 2sh^2, fc 2shf, proj 2sfh  ->
  //   24sh^2 + 4s^2h for f = 4h (Narayanan et al. 2021); the pointwise layers add a few FLOPs per
  //   element, which model FLOPs leave out; params 12h^2 + 13h for f = 4h.
  // Tensor-parallel roles per block (Shoeybi et al. 2019, "Megatron-LM", section 3, fig. 3):
  // ln_1 R, qkv column, core (scores, softmax, dropout, av) sharded by heads, proj row,
  // residual R, ln_2 R, fc column, gelu sharded, proj row, residual R.
  const TpRole kRoles[13] = {TpRole::kReplicated, TpRole::kColumn,     TpRole::kSharded,
                             TpRole::kSharded,    TpRole::kSharded,    TpRole::kSharded,
                             TpRole::kRow,        TpRole::kReplicated, TpRole::kReplicated,
                             TpRole::kColumn,     TpRole::kSharded,    TpRole::kRow,
                             TpRole::kReplicated};
  for (int i = 0; i < cfg.layers; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    using CK = ComputeKind;
    const std::size_t first = m.layers.size();
    m.layers.push_back(
        make(p + "ln_1", CK::kElementwise, 2 * h, 5.0 * sh, 2.0 * e * sh, k * 2.0 * sh, e * sh, 1));
    m.layers.back().second_tensor_params = h;  // weight and bias: two tensors of h
    m.layers.back().recompute_modules = recompute_module::kLayernorm;
    // Backward traffic of the pointwise layers (docs/scenario.md, "Backward traffic"): layer norm
    // 5e/elem + its fp32 statistics (apex's fused layer norm, as Megatron: one kernel reads dy
    // and x and writes dx, a second reads dy and x again for dgamma and dbeta).
    m.layers.back().bwd_bytes_per_sample = 5.0 * e * sh + 8.0 * s;
    m.layers.push_back(make(p + "attn.qkv", CK::kGemm, 3 * h * h + 3 * h, 6.0 * sh * hd,
                            4.0 * e * sh, k * 2.0 * sh, 3.0 * e * sh, 1));
    m.layers.back().gemm = GemmShape{1, cfg.seq_len, 3 * h, h};  // docs/cost-model.md, "GEMM shape"
    m.layers.back().second_tensor_params = 3 * h;                // the bias
    // The attention core, per head-sharded kernel (Korthikanti et al. 2022, section 4.1: Q K^T
    // saves Q and K, 4sh; softmax its output, 2as^2; dropout its mask, as^2; attention x values the
    // dropout output and V, 2as^2 + 2sh; together 6sh + 5as^2). Selective recompute keeps Q, K, V
    // (6sh) and re-runs all four (section 4.2; Megatron checkpoints the whole core attention).
    //   scores   batched GEMM Q K^T: 2s^2h FLOPs; reads Q, K (2sh), writes as^2
    //   softmax  scale, mask, softmax (2 kernels): ~5 FLOPs/elem; reads and writes as^2;
    //            backward reads y and dy, writes dx: 3as^2
    //   dropout  1 FLOP/elem; reads as^2, writes as^2 and its 1-byte mask; backward reads dy and
    //            the mask, writes dx
    //   av       batched GEMM: 2s^2h FLOPs; reads the probabilities (as^2) and V (sh), writes sh
    m.layers.push_back(make(p + "attn.scores", CK::kAttention, 0, 2.0 * s * sh,
                            e * (2.0 * sh + as2), k * 4.0 * sh, e * as2, 1));
    m.layers.back().selective_activation_bytes_per_sample = k * 4.0 * sh;
    m.layers.push_back(make(p + "attn.softmax", CK::kElementwise, 0, 5.0 * as2, 2.0 * e * as2,
                            k * 2.0 * as2, e * as2, 2));
    m.layers.back().bwd_bytes_per_sample = 3.0 * e * as2;
    m.layers.back().selective_activation_bytes_per_sample = 0;
    m.layers.push_back(make(p + "attn.dropout", CK::kElementwise, 0, as2, 2.0 * e * as2 + as2,
                            k * as2, e * as2, 1));
    m.layers.back().bwd_bytes_per_sample = 2.0 * e * as2 + as2;
    m.layers.back().selective_activation_bytes_per_sample = 0;
    m.layers.push_back(make(p + "attn.av", CK::kAttention, 0, 2.0 * s * sh, e * (as2 + 2.0 * sh),
                            k * (2.0 * as2 + 2.0 * sh), e * sh, 1));
    m.layers.back().selective_activation_bytes_per_sample = k * 2.0 * sh;
    for (std::size_t j = m.layers.size() - 4; j < m.layers.size(); ++j)
      m.layers[j].selective_recompute = true;
    m.layers.push_back(make(p + "attn.proj", CK::kGemm, h * h + h, 2.0 * sh * hd, 2.0 * e * sh,
                            k * 2.0 * sh, e * sh, 1));
    m.layers.back().gemm = GemmShape{1, cfg.seq_len, h, h};
    m.layers.back().second_tensor_params = h;
    m.layers.push_back(make(p + "attn.residual", CK::kElementwise, 0, 3.0 * sh, 3.0 * e * sh + sh,
                            k * sh, e * sh, 2));
    m.layers.back().output_reused = true;  // the residual stream, read again by mlp.residual
    // Dropout's backward reads dy and the mask and writes dx (2e + 1 per elem); the residual
    // stream's two gradients (the add's and the norm's) are summed by one add (3e).
    m.layers.back().bwd_bytes_per_sample = 5.0 * e * sh + sh;
    m.layers.push_back(
        make(p + "ln_2", CK::kElementwise, 2 * h, 5.0 * sh, 2.0 * e * sh, k * 2.0 * sh, e * sh, 1));
    m.layers.back().bwd_bytes_per_sample = 5.0 * e * sh + 8.0 * s;
    m.layers.back().second_tensor_params = h;
    m.layers.back().recompute_modules = recompute_module::kLayernorm;
    m.layers.push_back(make(p + "mlp.fc", CK::kGemm, h * f + f, 2.0 * sh * fd, e * (sh + sf),
                            k * 2.0 * sh, e * sf, 1));
    m.layers.back().gemm = GemmShape{1, cfg.seq_len, f, h};
    m.layers.back().second_tensor_params = f;
    m.layers.push_back(
        make(p + "mlp.gelu", CK::kElementwise, 0, 8.0 * sf, 2.0 * e * sf, k * 2.0 * sf, e * sf, 1));
    m.layers.back().bwd_bytes_per_sample = 3.0 * e * sf;  // reads x and dy, writes dx
    m.layers.push_back(make(p + "mlp.proj", CK::kGemm, f * h + h, 2.0 * sf * hd, e * (sf + sh),
                            k * 2.0 * sf, e * sh, 1));
    m.layers.back().gemm = GemmShape{1, cfg.seq_len, h, f};
    m.layers.back().second_tensor_params = h;
    for (std::size_t j = m.layers.size() - 3; j < m.layers.size(); ++j)
      m.layers[j].recompute_modules = recompute_module::kMlp;  // fc, gelu, proj
    m.layers.push_back(make(p + "mlp.residual", CK::kElementwise, 0, 3.0 * sh, 3.0 * e * sh + sh,
                            k * sh, e * sh, 2));
    m.layers.back().output_reused = true;  // the residual stream, read by the next block
    m.layers.back().bwd_bytes_per_sample = 5.0 * e * sh + sh;
    for (std::size_t j = first; j < m.layers.size(); ++j) {
      m.layers[j].block = i;
      m.layers[j].tp_role = kRoles[j - first];
    }
  }
  m.layers.push_back(make("ln_f", ComputeKind::kElementwise, 2 * h, 5.0 * sh, 2.0 * e * sh,
                          e * sh + 8.0 * s, e * sh, 1));
  m.layers.back().bwd_bytes_per_sample = 5.0 * e * sh + 8.0 * s;
  m.layers.back().second_tensor_params = h;
  // LM head: logits = x W_e^T, FLOPs 2shV; params 0 when tied to the token embedding; saves its
  // input; output = the logits (what DataParallel gathers). The loss is added by the lowering.
  m.layers.push_back(make("lm_head", ComputeKind::kGemm, cfg.tied_embeddings ? 0 : cfg.vocab * h,
                          2.0 * sh * v, e * (sh + s * v), e * sh, e * s * v, 1));
  m.layers.back().gemm = GemmShape{1, cfg.seq_len, cfg.vocab, h};
  // Megatron splits the word embedding and the LM head by vocabulary rows.
  m.layers.front().tp_role = TpRole::kVocabInput;
  m.layers.back().tp_role = TpRole::kVocabOutput;
  m.transformer = TransformerShape{cfg.layers, h, cfg.heads, cfg.seq_len, cfg.vocab, f};
  return m;
}

// [SECTION] ResNet-50 ----------------------------------------------------------------------------

ModelSpec build_resnet50(const ResNet50Config& cfg, int act_bytes) {
  require(cfg.image_size >= 32 && cfg.num_classes >= 1,
          "image_size must be >= 32, num_classes >= 1");
  const double e = act_bytes;
  ModelSpec m;
  m.name = "resnet50";
  m.source = "resnet50";
  m.input_bytes_per_sample = 4.0 * 3.0 * static_cast<double>(cfg.image_size * cfg.image_size);

  // Stem: conv 7x7/2 (3 -> 64), bn, relu, maxpool 3x3/2.
  i64 hw = cfg.image_size;
  m.layers.push_back(conv_spec("conv1", 3, 64, 7, 2, 3, hw, hw, false, e, true));
  hw = conv_out(hw, 7, 2, 3);
  m.layers.push_back(bn_spec("bn1", 64, hw, hw, e, true));
  m.layers.push_back(relu_spec("relu", 64 * hw * hw, e));
  m.layers.push_back(maxpool_spec("maxpool", 64, hw, hw, 3, 2, 1, e, false));
  hw = conv_out(hw, 3, 2, 1);

  // Bottleneck stages (torchvision v1.5): planes 64/128/256/512, blocks 3/4/6/3, expansion 4,
  // stride on conv2 of the first block of stages 2-4, a 1x1 downsample conv + bn on each first
  // block. Inputs of conv1, conv2, conv3 and downsample are ReLU outputs, already counted as saved.
  const int kPlanes[4] = {64, 128, 256, 512};
  const int kBlocks[4] = {3, 4, 6, 3};
  i64 inplanes = 64;
  for (int st = 0; st < 4; ++st) {
    const i64 planes = kPlanes[st], outc = 4 * planes;
    for (int b = 0; b < kBlocks[st]; ++b) {
      const int stride = (b == 0 && st > 0) ? 2 : 1;
      const std::string p = "layer" + std::to_string(st + 1) + "." + std::to_string(b) + ".";
      const i64 hw_out = conv_out(hw, 3, stride, 1);
      m.layers.push_back(
          conv_spec(p + "conv1", inplanes, planes, 1, 1, 0, hw, hw, false, e, false));
      m.layers.push_back(bn_spec(p + "bn1", planes, hw, hw, e, true));
      m.layers.push_back(relu_spec(p + "relu1", planes * hw * hw, e));
      m.layers.push_back(
          conv_spec(p + "conv2", planes, planes, 3, stride, 1, hw, hw, false, e, false));
      m.layers.push_back(bn_spec(p + "bn2", planes, hw_out, hw_out, e, true));
      m.layers.push_back(relu_spec(p + "relu2", planes * hw_out * hw_out, e));
      m.layers.push_back(
          conv_spec(p + "conv3", planes, outc, 1, 1, 0, hw_out, hw_out, false, e, false));
      m.layers.push_back(bn_spec(p + "bn3", outc, hw_out, hw_out, e, true));
      if (b == 0) {
        m.layers.push_back(
            conv_spec(p + "downsample.0", inplanes, outc, 1, stride, 0, hw, hw, false, e, false));
        m.layers.push_back(bn_spec(p + "downsample.1", outc, hw_out, hw_out, e, true));
      }
      m.layers.push_back(add_spec(p + "add", outc * hw_out * hw_out, e));
      m.layers.push_back(relu_spec(p + "relu3", outc * hw_out * hw_out, e));
      inplanes = outc;
      hw = hw_out;
    }
  }
  m.layers.push_back(avgpool_spec("avgpool", inplanes, hw, hw, e));
  m.layers.push_back(linear_spec("fc", inplanes, cfg.num_classes, 1, true, e, true));
  return m;
}

// [SECTION] Explicit -----------------------------------------------------------------------------

ModelSpec build_explicit(std::vector<LayerSpec> layers, double input_bytes_per_sample) {
  require(!layers.empty(), "an explicit model needs at least one layer");
  require(input_bytes_per_sample >= 0, "input_bytes_per_sample must be >= 0");
  for (const LayerSpec& l : layers) {
    require(l.params >= 0 && l.buffer_elems >= 0 && l.fwd_flops_per_sample >= 0 &&
                l.fwd_bytes_per_sample >= 0 && l.activation_bytes_per_sample >= 0 &&
                l.output_bytes_per_sample >= 0 && l.kernels >= 0 && l.extra_python_us >= 0,
            "layer '" + l.name + "': figures must be >= 0");
  }
  ModelSpec m;
  m.name = "explicit";
  m.source = "explicit";
  m.layers = std::move(layers);
  m.input_bytes_per_sample = input_bytes_per_sample;
  return m;
}

}  // namespace csim::core
