// The attention core per kernel (core/attention_kernels.hpp; formulas: docs/attention.md).
// Expected values are derived in the comments.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/attention_kernels.hpp"
#include "core/gpu_catalog.hpp"
#include "core/model_builders.hpp"

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
