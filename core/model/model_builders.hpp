// Model builders: turn a layer list, a GPT-style transformer, ResNet-50 or explicit per-layer
// figures into a ModelSpec (core/scenario/scenario.hpp). Every formula is in docs/scenario.md,
// "Model".
//
// Conventions (all per sample, forward pass):
//   * FLOPs count 2 per multiply-accumulate (Narayanan et al. 2021, "Efficient Large-Scale Language
//     Model Training on GPU Clusters Using Megatron-LM", SC'21, eq. 2 and its derivation).
//   * `act_bytes` is the size of one activation element: dtype_bytes(precision_bytes(..).compute).
//   * activation_bytes_per_sample counts each saved tensor once (a tensor saved by a layer and
//     again by the next one, e.g. an in-place ReLU's output that the next conv saves as its input,
//     is counted at the first).
//   * fwd_bytes_per_sample is the memory traffic of the forward kernels, excluding weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// One layer's figures as given (per sample, forward; the conventions above); the builders' shared
// constructor.
LayerSpec make_layer(std::string name, ComputeKind kind, TpRole role, std::int64_t params,
                     double flops, double bytes, double act, double out, int kernels);

// [SECTION] Layer list ---------------------------------------------------------------------------

// Per-sample shape flowing through a layer list: `tokens` positions of `features` each (flat
// vectors: tokens = 1), or an image of channels x height x width (is_image).
struct ActivationShape {
  bool is_image = false;
  std::int64_t tokens = 1;    // sequence positions (1 for plain vectors)
  std::int64_t features = 0;  // per position
  std::int64_t channels = 0;  // image only
  std::int64_t height = 0;    // image only
  std::int64_t width = 0;     // image only
  std::int64_t elems() const { return is_image ? channels * height * width : tokens * features; }
};

// Builds a sequential model layer by layer, tracking the per-sample shape. Each method throws
// std::invalid_argument when its arguments do not fit the incoming shape (the parser turns that
// into an InputError at the layer's JSON path). The first layer fixes the input shape.
class LayerListBuilder {
 public:
  explicit LayerListBuilder(int act_bytes) : act_bytes_(act_bytes) {}

  void linear(std::string name, std::int64_t in, std::int64_t out, bool bias);
  // in_h/in_w: 0 = take from the incoming image shape (required for a first layer).
  void conv2d(std::string name, std::int64_t in_channels, std::int64_t out_channels, int kernel,
              int stride, int padding, std::int64_t in_h, std::int64_t in_w, bool bias);
  void batchnorm2d(std::string name, std::int64_t channels);  // channels 0 = incoming channels
  void maxpool2d(std::string name, int kernel, int stride, int padding);
  void adaptive_avgpool(std::string name);  // global average pool to 1x1, then flattened
  void flatten();                           // image -> vector (a view: no layer, no kernel)
  // relu / gelu / dropout / sigmoid / tanh / "elementwise": one pointwise kernel over the shape.
  void elementwise(std::string name, const std::string& op);
  void embedding(std::string name, std::int64_t num, std::int64_t dim, std::int64_t tokens);
  void layernorm(std::string name, std::int64_t features);  // features 0 = incoming features
  // Self-attention block (QKV projection, scores, softmax, dropout, AV, output projection).
  void attention(std::string name, std::int64_t hidden, int heads);

  // Adds extra Python time (e.g. the notes' print() in forward) to the last layer added.
  void add_python_us(double us);

  bool empty() const { return layers_.empty(); }
  const ActivationShape& shape() const { return shape_; }
  // Bytes of one input sample as loaded: fp32 features/images (4 B/elem), int64 token ids (8 B).
  double input_bytes_per_sample() const { return input_bytes_; }
  std::vector<LayerSpec> take_layers() { return std::move(layers_); }

 private:
  void start(const ActivationShape& in, double input_bytes);
  void push(LayerSpec l, bool saves_output);
  double saved_input_bytes() const;  // 0 when the previous layer already saved its output
  int act_bytes_;
  ActivationShape shape_;
  bool started_ = false;
  bool prev_saved_output_ = false;
  double input_bytes_ = 0;
  std::vector<LayerSpec> layers_;
};

// [SECTION] GPT ----------------------------------------------------------------------------------

struct GptConfig {
  int layers = 12;              // transformer blocks
  std::int64_t hidden = 768;    // h
  int heads = 12;               // a
  std::int64_t seq_len = 1024;  // s
  std::int64_t vocab = 50257;   // V
  std::int64_t ffn_hidden = 0;  // 0 = 4h
  bool tied_embeddings = true;  // LM head shares the token embedding (GPT-2)
};

// GPT-2-style decoder: embeddings, `layers` blocks each split into 10 layers (ln_1, attn.qkv,
// attn.core, attn.proj, attn.residual, ln_2, mlp.fc, mlp.gelu, mlp.proj, mlp.residual), ln_f +
// lm_head. Per block per sample (ffn = 4h): params 12h^2 + 13h; forward FLOPs 24sh^2 + 4s^2h;
// activations s*h*(34 + 5as/h) * act_bytes/2 (Korthikanti et al. 2022, eq. 1 / section 4.1).
ModelSpec build_gpt(const GptConfig& cfg, int act_bytes);

// [SECTION] ResNet-50 ----------------------------------------------------------------------------

struct ResNet50Config {
  std::int64_t image_size = 224;  // square input, pixels
  std::int64_t num_classes = 1000;
};

// torchvision resnet50 (v1.5: stride on the 3x3 conv), one LayerSpec per module. At 224x224 and
// 1000 classes: 25,557,032 params, 53 BatchNorms (buffers 2C + 1 each), ~4.1 GMACs = ~8.2 GFLOP.
ModelSpec build_resnet50(const ResNet50Config& cfg, int act_bytes);

// [SECTION] Explicit -----------------------------------------------------------------------------

// Explicit per-layer figures, taken as given. Throws std::invalid_argument on negative figures.
ModelSpec build_explicit(std::vector<LayerSpec> layers, double input_bytes_per_sample);

}  // namespace csim::core
