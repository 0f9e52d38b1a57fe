// The general decoder block (core/model/model_transformer.hpp, core/model/transformer_flops.hpp,
// model.transformer): published parameter counts, the GPT-2 equivalence with build_gpt, the
// per-token FLOPs counts and the parser's checks. Formulas: docs/transformer.md; every expected
// value is derived in the comment above it.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/model/flops.hpp"
#include "core/model/model_builders.hpp"
#include "core/model/model_transformer.hpp"
#include "core/model/transformer_flops.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim::core;

namespace {

// Llama 3.1 (Meta, config.json of meta-llama/Llama-3.1-{8B,70B,405B}): GQA with 8 kv heads,
// head_dim 128, SwiGLU, RMSNorm, RoPE, untied embeddings, vocab 128256, no biases.
TransformerConfig llama(int layers, std::int64_t h, int heads, std::int64_t f) {
  TransformerConfig c;
  c.layers = layers;
  c.hidden = h;
  c.heads = heads;
  c.kv_heads = 8;
  c.ffn_hidden = f;
  c.seq_len = 8192;
  c.vocab = 128256;
  c.mlp = MlpKind::kSwiglu;
  c.norm = NormKind::kRmsNorm;
  c.position = PositionKind::kRope;
  c.attention_kernel = AttentionKernel::kEager;
  return c;
}

TransformerConfig gpt2_small() {
  // GPT-2 small (openai-community/gpt2 config.json): 12 x 768, 12 heads, n_positions 1024,
  // vocab 50257, LayerNorm with bias, learned positions, GELU, biases everywhere, tied, dropout.
  TransformerConfig c;
  c.layers = 12;
  c.hidden = 768;
  c.heads = 12;
  c.seq_len = 1024;
  c.vocab = 50257;
  c.tied_embeddings = true;
  c.qkv_bias = c.attn_out_bias = c.mlp_bias = true;
  c.attention_dropout = c.hidden_dropout = true;
  c.attention_kernel = AttentionKernel::kEager;
  return c;
}

double sum_fwd_flops(const ModelSpec& m) {
  double f = 0;
  for (const LayerSpec& l : m.layers) f += l.fwd_flops_per_sample;
  return f;
}

const LayerSpec* find_layer(const ModelSpec& m, const std::string& name) {
  for (const LayerSpec& l : m.layers)
    if (l.name == name) return &l;
  return nullptr;
}

std::string transformer_scenario(const std::string& gpu, const std::string& transformer) {
  return R"({"cluster": {"gpus_per_node": 1, "gpu": ")" + gpu + R"("}, "model": {"transformer": )" +
         transformer + R"(}, "training": {"global_batch": 2, "precision": "bf16", "steps": 1}})";
}

}  // namespace

TEST_CASE("transformer: Llama 3.1 parameter counts are the published ones", "[transformer]") {
  // Per block: q h*h + k, v 2 * h * 8*128 + o h*h + MLP 3 h f + two RMSNorms 2h;
  // embeddings V h twice (untied) + the final RMSNorm h.
  // 8B: h 4096, f 14336, 32 blocks:
  //   16,777,216 + 8,388,608 + 16,777,216 + 176,160,768 + 8,192 = 218,112,000 per block
  //   32 x 218,112,000 = 6,979,584,000; 2 x 128256 x 4096 = 1,050,673,152; + 4,096
  //   = 8,030,261,248
  CHECK(build_transformer(llama(32, 4096, 32, 14336), 2).total_params() == 8030261248LL);
  // 70B: h 8192, f 28672, 80 blocks, 64 heads:
  //   67,108,864 + 16,777,216 + 67,108,864 + 704,643,072 + 16,384 = 855,654,400 per block
  //   80 x 855,654,400 = 68,452,352,000; 2 x 128256 x 8192 = 2,101,346,304; + 8,192
  //   = 70,553,706,496
  CHECK(build_transformer(llama(80, 8192, 64, 28672), 2).total_params() == 70553706496LL);
  // 405B: h 16384, f 53248, 126 blocks, 128 heads:
  //   268,435,456 + 33,554,432 + 268,435,456 + 2,617,245,696 + 32,768 = 3,187,703,808 per block
  //   126 x 3,187,703,808 = 401,650,679,808; 2 x 128256 x 16384 = 4,202,692,608; + 16,384
  //   = 405,853,388,800
  CHECK(build_transformer(llama(126, 16384, 128, 53248), 2).total_params() == 405853388800LL);
}

TEST_CASE("transformer: Mistral 7B, Qwen2.5 7B and GPT-2 small parameter counts", "[transformer]") {
  // Mistral 7B v0.1 (mistralai/Mistral-7B-v0.1): the Llama 3.1 8B block (h 4096, 32 heads, 8 kv,
  // f 14336, 32 blocks: 6,979,584,000) with vocab 32000, sliding window 4096:
  //   2 x 32000 x 4096 = 262,144,000; + 4,096 -> 7,241,732,096
  TransformerConfig mistral = llama(32, 4096, 32, 14336);
  mistral.vocab = 32000;
  mistral.seq_len = 4096;
  mistral.window = 4096;
  CHECK(build_transformer(mistral, 2).total_params() == 7241732096LL);
  // Qwen2.5 7B (Qwen/Qwen2.5-7B): h 3584, 28 heads, 4 kv heads (d 128), f 18944, 28 blocks,
  // vocab 152064, untied, biases on q, k, v:
  //   q 3584^2 + 3584 = 12,848,640; k, v 2 x (3584 x 512 + 512) = 3,671,040; o 12,845,056;
  //   MLP 3 x 3584 x 18944 = 203,685,888; norms 7,168 -> 233,057,792 per block
  //   28 x 233,057,792 = 6,525,618,176; 2 x 152064 x 3584 = 1,089,994,752; + 3,584
  //   = 7,615,616,512
  TransformerConfig qwen = llama(28, 3584, 28, 18944);
  qwen.kv_heads = 4;
  qwen.vocab = 152064;
  qwen.qkv_bias = true;
  CHECK(build_transformer(qwen, 2).total_params() == 7615616512LL);
  // GPT-2 small: per block 12h^2 + 13h = 7,077,888 + 9,984 = 7,087,872; 12 blocks 85,054,464;
  // token table 50257 x 768 = 38,597,376; positions 1024 x 768 = 786,432; ln_f 1,536; tied
  //   = 124,439,808
  CHECK(build_transformer(gpt2_small(), 4).total_params() == 124439808LL);
}

TEST_CASE("transformer: configured like GPT-2 with the eager kernel it is build_gpt",
          "[transformer]") {
  GptConfig g;  // the defaults are GPT-2 small
  const ModelSpec gpt = build_gpt(g, 2);
  const ModelSpec tr = build_transformer(gpt2_small(), 2);
  CHECK(tr.total_params() == gpt.total_params());
  // Forward FLOPs summed over every layer (GEMMs and pointwise): the same formulas layer by
  // layer (embed 2sh, norms 5/elem, qkv 6sh^2, scores and av 2s^2h each, softmax 5as^2, dropout
  // as^2, proj 2sh^2, residual 3sh, fc / proj 2shf, gelu 8sf, logits 2shV).
  CHECK(sum_fwd_flops(tr) == Approx(sum_fwd_flops(gpt)).epsilon(1e-12));
  // One layer each, in the same order and with the same tensor-parallel roles and blocks.
  REQUIRE(tr.layers.size() == gpt.layers.size());
  for (std::size_t i = 0; i < tr.layers.size(); ++i) {
    INFO(tr.layers[i].name << " vs " << gpt.layers[i].name);
    CHECK(tr.layers[i].tp_role == gpt.layers[i].tp_role);
    CHECK(tr.layers[i].block == gpt.layers[i].block);
    CHECK(tr.layers[i].params == gpt.layers[i].params);
    CHECK(tr.layers[i].fwd_flops_per_sample == Approx(gpt.layers[i].fwd_flops_per_sample));
  }
  CHECK(tr.transformer.layers == 12);
  CHECK(tr.transformer.heads == 12);
  CHECK(tr.transformer.kv_heads == 12);
  CHECK(tr.transformer.head_dim == 64);
}

TEST_CASE("transformer: a Llama block's layers, roles and saved activations", "[transformer]") {
  // A small Llama-shaped block: h 64, 4 heads of 16, 2 kv heads, f 160, s 32, e 2 bytes.
  TransformerConfig c = llama(2, 64, 4, 160);
  c.kv_heads = 2;
  c.seq_len = 32;
  c.vocab = 1000;
  const ModelSpec m = build_transformer(c, 2);
  const LayerSpec* qkv = find_layer(m, "h.0.attn.qkv");
  REQUIRE(qkv != nullptr);
  // q 64 wide, k and v 2 x 16 = 32 each: h -> 128; params 64 x 128; FLOPs 2 x 32 x 64 x 128
  CHECK(qkv->params == 64 * 128);
  CHECK(qkv->fwd_flops_per_sample == 2.0 * 32 * 64 * 128);
  CHECK(qkv->tp_role == TpRole::kColumn);
  const LayerSpec* fc = find_layer(m, "h.0.mlp.fc");
  REQUIRE(fc != nullptr);
  CHECK(fc->params == 64 * 2 * 160);  // gate and up fused: h -> 2f
  CHECK(find_layer(m, "h.0.mlp.proj")->tp_role == TpRole::kRow);
  CHECK(find_layer(m, "h.0.attn.proj")->tp_role == TpRole::kRow);
  CHECK(find_layer(m, "h.1.ln_1")->params == 64);  // RMSNorm: weight only
  CHECK(find_layer(m, "h.0.attn.rope") != nullptr);
  CHECK(find_layer(m, "h.0.attn.rope")->params == 0);
  CHECK(m.layers.front().tp_role == TpRole::kVocabInput);
  CHECK(m.layers.back().tp_role == TpRole::kVocabOutput);
  CHECK(static_cast<std::int64_t>(m.layers.size()) == transformer_layer_count(c));
  // Saved activations of one block outside the attention core (docs/transformer.md, "Saved
  // activations"), e = 2: ln_1 e sh + 4s, qkv e sh, proj e s a d, ln_2 e sh + 4s, fc e sh,
  // swiglu 3 e sf, proj e sf = e (4 sh + s a d + 4 sf) + 8 s
  //   = 2 (4 x 2048 + 32 x 64 + 4 x 5120) + 256 = 2 x 30720 + 256 = 61,696
  double saved = 0;
  for (const LayerSpec& l : m.layers)
    if (l.block == 0 && l.name.find("attn.") == std::string::npos)
      saved += l.activation_bytes_per_sample;
  saved += find_layer(m, "h.0.attn.qkv")->activation_bytes_per_sample +
           find_layer(m, "h.0.attn.proj")->activation_bytes_per_sample;
  CHECK(saved == 61696.0);
}

TEST_CASE("transformer: qk_norm, parallel residual, vocabulary padding, windows", "[transformer]") {
  TransformerConfig c = llama(4, 64, 4, 160);
  c.kv_heads = 2;
  c.seq_len = 32;
  c.vocab = 1000;
  c.qk_norm = true;
  c.vocab_pad_multiple = 128;  // 1000 -> 1024 rows
  c.window = 8;
  c.global_every = 2;  // blocks 1 and 3 attend fully
  const ModelSpec m = build_transformer(c, 2);
  // Qwen3's QK-norm: two RMSNorm weights of head_dim (16) each per block
  REQUIRE(find_layer(m, "h.0.attn.qk_norm") != nullptr);
  CHECK(find_layer(m, "h.0.attn.qk_norm")->params == 32);
  CHECK(m.transformer.vocab == 1024);
  CHECK(m.layers.front().params == 1024 * 64);
  CHECK(m.layers.back().params == 1024 * 64);
  CHECK(block_is_windowed(c, 0));
  CHECK_FALSE(block_is_windowed(c, 1));
  CHECK(block_is_windowed(c, 2));
  CHECK_FALSE(block_is_windowed(c, 3));
  // GPT-NeoX's parallel residual: no attn.residual; ln_2 saves only its fp32 statistics (4 B per
  // position, RMSNorm: 4 x 32 = 128 B), the block input being ln_1's
  c.parallel_residual = true;
  const ModelSpec p = build_transformer(c, 2);
  CHECK(find_layer(p, "h.0.attn.residual") == nullptr);
  CHECK(find_layer(p, "h.0.ln_2")->activation_bytes_per_sample == 128.0);
  CHECK(find_layer(p, "h.0.mlp.residual")->kernels == 2);
  CHECK(p.total_params() == m.total_params());
}

TEST_CASE("transformer: FLOPs per token, the three published counts and ours",
          "[transformer][flops]") {
  // Llama 3.1 8B at s = 8192 (N = 8,030,261,248; the token table V h = 525,336,576).
  const ModelSpec m = build_transformer(llama(32, 4096, 32, 14336), 2);
  const FlopsPerToken t = transformer_flops_per_token(m);
  // Megatron-LM: 6 l [h (a d + 2 g d) + a d s + a d h] + 6 l h f 3 + 6 h Vp
  //   = 192 x (25,165,824 + 33,554,432 + 16,777,216) + 33,822,867,456 + 3,152,019,456
  //   = 14,495,514,624 + 33,822,867,456 + 3,152,019,456 = 51,470,401,536
  // (Megatron-Bridge 25.09 reports 725 TFLOP/s at 14,079 tokens/s/GPU: 51.5 G per token.)
  CHECK(t.megatron == Approx(51470401536.0).epsilon(1e-12));
  // Ours equals Megatron's without windows (the same GEMMs, causal half of the scores).
  CHECK(t.model == Approx(t.megatron).epsilon(1e-12));
  // 6N + attention: 6 x 8,030,261,248 + 12 x 32 x 32 x 128 x 8192 = 48,181,567,488 +
  //   12,884,901,888 = 61,066,469,376
  CHECK(t.six_n_attention == Approx(61066469376.0).epsilon(1e-12));
  // torchtitan: 6 (N - V h) + 12 l a d s = 6 x 7,504,924,672 + 12,884,901,888 = 57,914,449,920
  CHECK(t.torchtitan == Approx(57914449920.0).epsilon(1e-12));
  // model.gpt has none of these
  CHECK(transformer_flops_per_token(build_gpt(GptConfig{}, 2)).model == 0);
}

TEST_CASE("transformer: windowed blocks count the pairs they attend", "[transformer][flops]") {
  // A windowed model's attention FLOPs: Mistral-shaped at s 8192, w 4096, 32 blocks; pairs per
  // head P = s w - w^2 / 2 = 33,554,432 - 8,388,608 = 25,165,824; 4 a d P per block = 4 x 32 x 128
  // x 25,165,824 = 412,316,860,416; x 32 = 13,194,139,533,312
  TransformerConfig c = llama(32, 4096, 32, 14336);
  c.window = 4096;
  CHECK(transformer_forward_flops(c).attention == Approx(13194139533312.0).epsilon(1e-12));
  // with every other block global (global_every 2): 16 blocks at P and 16 at s^2 / 2 =
  // 33,554,432: 4 x 32 x 128 x 16 x (25,165,824 + 33,554,432) = 15,393,162,788,864
  c.global_every = 2;
  CHECK(transformer_forward_flops(c).attention == Approx(15393162788864.0).epsilon(1e-12));
}

TEST_CASE("transformer: model FLOPs per step for MFU use the general block",
          "[transformer][flops]") {
  const Scenario s = parse_scenario_string(
      transformer_scenario("H200",
                           R"({"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
          "ffn_hidden": 160, "seq_len": 32, "vocab": 1000, "mlp": "swiglu", "norm": "rmsnorm",
          "position": "rope", "attention": {"kernel": "eager"}})"),
      "t.json");
  // Per sample forward: per block 2 s h (a + 2g) d + 2 s a d h + 3 x 2 s h f + 4 a d s^2 / 2
  //   = 2*32*64*128 + 2*32*64*64 + 6*32*64*160 + 4*64*512 = 524,288 + 262,144 + 1,966,080
  //     + 131,072 = 2,883,584; two blocks 5,767,168; logits 2*32*64*1000 = 4,096,000
  // model = 3 B (blocks + logits) = 3 x 2 x 9,863,168 = 59,179,008
  CHECK(model_flops_per_step(s) == Approx(59179008.0).epsilon(1e-12));
  CHECK(s.model.source == "transformer");
}

TEST_CASE("transformer: model.transformer's defaults and bad input", "[transformer][parser]") {
  // kv_heads defaults to heads, head_dim to hidden / heads, the kernel to the GPU's default.
  const Scenario s = parse_scenario_string(
      transformer_scenario("A100-SXM4-80GB", R"({"layers": 2, "hidden": 64, "heads": 4,
          "seq_len": 32, "vocab": 1000, "attention": {"kernel": "eager"}})"),
      "t.json");
  CHECK(s.model.transformer.kv_heads == 4);
  CHECK(s.model.transformer.head_dim == 16);
  CHECK(s.model.transformer_config.attention_kernel == AttentionKernel::kEager);
  auto fails = [](const std::string& gpu, const std::string& t, const std::string& path,
                  const std::string& what) {
    INFO(t);
    try {
      parse_scenario_string(transformer_scenario(gpu, t), "t.json");
      FAIL("accepted");
    } catch (const csim::InputError& e) {
      CHECK(std::string(e.what()).find(path) != std::string::npos);
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  const std::string base = R"("layers": 2, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000)";
  fails("H200", "{" + base + R"(, "kv_heads": 3})", "model.transformer.kv_heads", "do not divide");
  fails("H200", "{" + base + R"(, "mlp": "swiglu"})", "model.transformer.ffn_hidden", "swiglu");
  fails("H200", R"({"layers": 2, "hidden": 64, "heads": 5, "seq_len": 32, "vocab": 1000})",
        "model.transformer.heads", "do not divide hidden");
  fails("A100-SXM4-80GB", "{" + base + R"(, "attention": {"kernel": "flash3"}})",
        "model.transformer.attention.kernel", "A100");
  fails("H200", "{" + base + R"(, "norm": "batchnorm"})", "model.transformer.norm", "not one of");
  fails("H200", "{" + base + R"(, "attention": {"kernel": "flash3", "dropout": true}})",
        "model.transformer.attention.dropout", "flash3");
  fails("H200", "{" + base + R"(, "attention": {"global_every": 2}})",
        "model.transformer.attention.global_every", "window");
}

TEST_CASE("transformer: a fused Llama 3.1 8B block saves 168,072 s bytes per sample",
          "[transformer]") {
  // docs/transformer.md, "Saved activations", fused core and SwiGLU, e = 2, s = 8192:
  // e (4sh + 2sad + 2sgd + 4sf) + 4sa + 8s = 2 s (16,384 + 8,192 + 2,048 + 57,344) + 128 s + 8 s
  //   = 168,072 s = 1,376,845,824 bytes
  TransformerConfig c = llama(32, 4096, 32, 14336);
  c.attention_kernel = AttentionKernel::kFlash2;
  const ModelSpec m = build_transformer(c, 2);
  double saved = 0;
  for (const LayerSpec& l : m.layers)
    if (l.block == 0) saved += l.activation_bytes_per_sample;
  CHECK(saved == 168072.0 * 8192);
  REQUIRE(find_layer(m, "h.0.attn.core") != nullptr);
}

TEST_CASE("transformer: tensor parallelism pads the rows, recompute adds hardware FLOPs",
          "[transformer][parser]") {
  const std::string model = R"({"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
      "ffn_hidden": 160, "seq_len": 32, "vocab": 1001, "mlp": "swiglu", "norm": "rmsnorm",
      "position": "rope", "attention": {"kernel": "eager"}})";
  const std::string doc = R"({"cluster": {"gpus_per_node": 2, "gpu": "H200"},
      "model": {"transformer": )" +
                          model +
                          R"(}, "training": {"global_batch": 2, "precision": "bf16", "steps": 1},
      "strategy": {"kind": "tensor_parallel", "tp": 2, "recompute": "full"}})";
  const Scenario s = parse_scenario_string(doc, "t.json");
  // 1001 rows do not split over tp 2: padded to a multiple of 128 x 2 = 256 -> 1024 (Megatron)
  CHECK(s.model.transformer.vocab == 1024);
  CHECK(s.model.layers.front().params == 1024 * 64);
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].find("padded to 1024") != std::string::npos);
  // full recompute re-runs every block's forward: hardware = model + B x blocks, B = 2
  const TransformerForwardFlops f = transformer_forward_flops(s.model.transformer_config);
  CHECK(hardware_flops_per_step(s) ==
        Approx(model_flops_per_step(s) + 2.0 * f.blocks).epsilon(1e-12));
}

TEST_CASE("transformer: selective recompute adds hardware FLOPs for the eager core only",
          "[transformer][flops]") {
  auto scenario = [](const std::string& kernel) {
    return parse_scenario_string(
        R"({"cluster": {"gpus_per_node": 2, "gpu": "H200"}, "model": {"transformer": {
          "layers": 2, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1024,
          "attention": {"kernel": ")" +
            kernel + R"("}}}, "training": {"global_batch": 2, "precision": "bf16", "steps": 1},
          "strategy": {"kind": "tensor_parallel", "tp": 2, "recompute": "selective"}})",
        "t.json");
  };
  // eager: + B x sum of 4 a d s^2/2 = 2 x 2 x (4 x 4 x 16 x 512) = 524,288
  const Scenario eager = scenario("eager");
  CHECK(hardware_flops_per_step(eager) - model_flops_per_step(eager) == Approx(524288.0));
  // flash3: the fused core is not re-run (docs/attention.md, "Selective recompute")
  const Scenario fused = scenario("flash3");
  CHECK(hardware_flops_per_step(fused) == model_flops_per_step(fused));
}
