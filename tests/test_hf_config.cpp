// Hugging Face config.json import (core/model/hf_config.hpp, core/scenario/parse_hf_model.cpp;
// docs/scenario.md, "model.hf_config"): every bundled config (scenarios/models/) maps to the fields
// its file gives, the parameter counts of the built models are the published ones, and what cannot
// be modelled is refused naming the file and the field.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/model/attention_kernels.hpp"
#include "core/model/hf_config.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/input_error_support.hpp"
#include "tests/test_support.hpp"

namespace {

using csim::InputError;
using nlohmann::json;
namespace fs = std::filesystem;
using namespace csim::core;

std::string model_file(const std::string& name) {
  return csim::test::repo_path("scenarios/models/" + name);
}

json load(const std::string& name) {
  return json::parse(csim::test::read_file(model_file(name)));
}

HfModel read(const std::string& name) {
  return read_hf_model(model_file(name));
}

using csim::test::error_of;

InputError map_error(const json& cfg) {
  return error_of([&] { hf_model_from_json(cfg, "cfg.json"); });
}

// One H100 running the model from `hf_config` (an absolute path) with `extra` model keys. The
// tests name the eager kernel (kEager) wherever the kernel is not what they test: the parameter
// counts do not depend on it.
std::string scenario_text(const std::string& hf_config, const std::string& extra = "",
                          const std::string& gpu = "H100-SXM5-80GB") {
  return R"({"cluster": {"gpus_per_node": 1, "gpu": ")" + gpu + R"("}, "model": {"hf_config": ")" +
         hf_config + "\"" + extra +
         R"(}, "training": {"global_batch": 1, "precision": "bf16", "steps": 2}})";
}

constexpr const char* kEager = R"(, "attention": {"kernel": "eager"})";

Scenario parse_hf(const std::string& name, const std::string& extra = R"(, "seq_len": 4096)") {
  return parse_scenario_string(scenario_text(model_file(name), extra), "scenario.json");
}

}  // namespace

// [SECTION] The bundled configs, field by field ---------------------------------------------------

TEST_CASE("hf_config: Llama 3.1 8B / 70B / 405B map to GQA, SwiGLU, RMSNorm, RoPE, untied",
          "[hf_config]") {
  struct Row {
    const char* file;
    int layers;
    std::int64_t hidden, ffn;
    int heads;
  };
  // hidden_size, num_hidden_layers, intermediate_size, num_attention_heads of each file;
  // num_key_value_heads 8 and vocab_size 128256 in all three.
  for (const Row& r :
       {Row{"llama3_1_8b.json", 32, 4096, 14336, 32}, Row{"llama3_1_70b.json", 80, 8192, 28672, 64},
        Row{"llama3_1_405b.json", 126, 16384, 53248, 128}}) {
    INFO(r.file);
    const HfModel m = read(r.file);
    const TransformerConfig& c = m.config;
    CHECK(m.architecture == "LlamaForCausalLM");
    CHECK(m.warnings.empty());  // every field read or known to have no cost effect
    CHECK(c.layers == r.layers);
    CHECK(c.hidden == r.hidden);
    CHECK(c.heads == r.heads);
    CHECK(c.kv_heads == 8);
    CHECK(c.head_dim == 128);  // no head_dim in the file: hidden / heads = 4096 / 32 (and so on)
    CHECK(c.ffn_hidden == r.ffn);
    CHECK(c.vocab == 128256);
    CHECK(c.seq_len == 0);  // the scenario gives it
    CHECK(m.max_position_embeddings == 131072);
    CHECK(c.max_positions == 0);       // RoPE: no position table
    CHECK(c.mlp == MlpKind::kSwiglu);  // hidden_act silu, gated
    CHECK(c.norm == NormKind::kRmsNorm);
    CHECK(c.position == PositionKind::kRope);
    CHECK(c.rotary_fraction == 1.0);
    CHECK_FALSE(c.tied_embeddings);  // tie_word_embeddings false
    CHECK_FALSE(c.qkv_bias);         // attention_bias false
    CHECK_FALSE(c.attn_out_bias);
    CHECK_FALSE(c.mlp_bias);  // mlp_bias false
    CHECK_FALSE(c.qk_norm);
    CHECK_FALSE(c.parallel_residual);
    CHECK(c.window == 0);
    CHECK_FALSE(c.attention_dropout);  // attention_dropout 0.0
    CHECK_FALSE(c.hidden_dropout);
  }
}

TEST_CASE("hf_config: Mistral 7B v0.1 has a 4096-token sliding window on every block",
          "[hf_config]") {
  const TransformerConfig c = read("mistral_7b_v0_1.json").config;
  CHECK(c.layers == 32);
  CHECK(c.hidden == 4096);
  CHECK(c.heads == 32);
  CHECK(c.kv_heads == 8);
  CHECK(c.head_dim == 128);  // 4096 / 32
  CHECK(c.ffn_hidden == 14336);
  CHECK(c.vocab == 32000);
  CHECK(c.mlp == MlpKind::kSwiglu);
  CHECK(c.norm == NormKind::kRmsNorm);
  CHECK(c.window == 4096);  // "sliding_window": 4096
  CHECK(c.global_every == 0);
  CHECK_FALSE(c.tied_embeddings);
  CHECK_FALSE(c.qkv_bias);  // MistralAttention has no biases
  // Later Mistral configs write null (full causal); an absent key is MistralConfig's 4096.
  json j = load("mistral_7b_v0_1.json");
  j["sliding_window"] = nullptr;
  CHECK(hf_model_from_json(j, "m.json").config.window == 0);
  j.erase("sliding_window");
  CHECK(hf_model_from_json(j, "m.json").config.window == 4096);
}

TEST_CASE("hf_config: Qwen2.5 7B has q/k/v biases from the architecture and no window",
          "[hf_config]") {
  const HfModel m = read("qwen2_5_7b.json");
  const TransformerConfig& c = m.config;
  CHECK(m.warnings.empty());
  CHECK(c.layers == 28);
  CHECK(c.hidden == 3584);
  CHECK(c.heads == 28);
  CHECK(c.kv_heads == 4);
  CHECK(c.head_dim == 128);  // 3584 / 28
  CHECK(c.ffn_hidden == 18944);
  CHECK(c.vocab == 152064);
  CHECK(c.qkv_bias);  // Qwen2Attention: q_proj, k_proj, v_proj with bias, no key for it
  CHECK_FALSE(c.attn_out_bias);
  CHECK_FALSE(c.mlp_bias);
  CHECK_FALSE(c.tied_embeddings);
  CHECK(c.window == 0);  // use_sliding_window false: sliding_window 131072 unused
}

TEST_CASE("hf_config: Qwen2's max_window_layers: all blocks, none, or refused", "[hf_config]") {
  json j = load("qwen2_5_7b.json");
  j["use_sliding_window"] = true;
  j["sliding_window"] = 4096;
  j["max_window_layers"] = 0;  // blocks 0.. windowed: all of them
  CHECK(hf_model_from_json(j, "q.json").config.window == 4096);
  j["max_window_layers"] = 28;  // blocks 28.. of 28: none
  const HfModel none = hf_model_from_json(j, "q.json");
  CHECK(none.config.window == 0);
  REQUIRE(none.warnings.size() == 1);
  CHECK(none.warnings[0].find("no block is windowed") != std::string::npos);
  j["max_window_layers"] = 14;  // 14 full, 14 windowed: not one window for every block
  const InputError e = map_error(j);
  CHECK(e.file() == "cfg.json");
  CHECK(e.json_path() == "max_window_layers");
  CHECK(e.message().find("blocks 0..13 attend fully and the other 14") != std::string::npos);
}

TEST_CASE("hf_config: Qwen3 8B gives head_dim and has QK-norm", "[hf_config]") {
  const TransformerConfig c = read("qwen3_8b.json").config;
  CHECK(c.layers == 36);
  CHECK(c.hidden == 4096);
  CHECK(c.heads == 32);
  CHECK(c.kv_heads == 8);
  CHECK(c.head_dim == 128);  // "head_dim": 128 (here also 4096 / 32)
  CHECK(c.ffn_hidden == 12288);
  CHECK(c.vocab == 151936);
  CHECK(c.qk_norm);         // Qwen3Attention's q_norm, k_norm
  CHECK_FALSE(c.qkv_bias);  // attention_bias false
  CHECK(c.window == 0);     // sliding_window null, use_sliding_window false
  CHECK_FALSE(c.tied_embeddings);
}

TEST_CASE("hf_config: GPT-2 small: learned positions, GELU, LayerNorm, biases, tied, dropout",
          "[hf_config]") {
  const HfModel m = read("gpt2.json");
  const TransformerConfig& c = m.config;
  CHECK(m.architecture == "GPT2LMHeadModel");
  CHECK(m.warnings.empty());
  CHECK(c.layers == 12);        // n_layer
  CHECK(c.hidden == 768);       // n_embd
  CHECK(c.heads == 12);         // n_head
  CHECK(c.kv_heads == 12);      // multi-head
  CHECK(c.head_dim == 64);      // 768 / 12
  CHECK(c.ffn_hidden == 3072);  // no n_inner: 4 x 768
  CHECK(c.vocab == 50257);
  CHECK(c.position == PositionKind::kLearned);
  CHECK(c.max_positions == 1024);  // n_positions
  CHECK(c.mlp == MlpKind::kGelu);  // activation_function gelu_new
  CHECK(c.norm == NormKind::kLayerNorm);
  CHECK(c.tied_embeddings);  // no tie_word_embeddings: GPT-2 ties
  CHECK(c.qkv_bias);
  CHECK(c.attn_out_bias);
  CHECK(c.mlp_bias);
  CHECK(c.attention_dropout);  // attn_pdrop 0.1
  CHECK(c.hidden_dropout);     // resid_pdrop, embd_pdrop 0.1
  json j = load("gpt2.json");
  j["n_inner"] = 1000;
  CHECK(hf_model_from_json(j, "g.json").config.ffn_hidden == 1000);
  j["attn_pdrop"] = 0.0;
  CHECK_FALSE(hf_model_from_json(j, "g.json").config.attention_dropout);
}

TEST_CASE("hf_config: Pythia 1.4B (GPT-NeoX): partial rotary, parallel residual, biases",
          "[hf_config]") {
  const TransformerConfig c = read("pythia_1_4b.json").config;
  CHECK(c.layers == 24);
  CHECK(c.hidden == 2048);
  CHECK(c.heads == 16);
  CHECK(c.kv_heads == 16);
  CHECK(c.head_dim == 128);  // 2048 / 16
  CHECK(c.ffn_hidden == 8192);
  CHECK(c.vocab == 50304);
  CHECK(c.position == PositionKind::kRope);
  CHECK(c.rotary_fraction == 0.25);  // rotary_pct
  CHECK(c.parallel_residual);        // use_parallel_residual true
  CHECK(c.mlp == MlpKind::kGelu);    // hidden_act gelu
  CHECK(c.norm == NormKind::kLayerNorm);
  CHECK(c.qkv_bias);  // attention_bias absent: GPTNeoXConfig's true
  CHECK(c.attn_out_bias);
  CHECK(c.mlp_bias);
  CHECK_FALSE(c.tied_embeddings);  // tie_word_embeddings false
  CHECK_FALSE(c.attention_dropout);
}

TEST_CASE("hf_config: model_type alone names the architecture", "[hf_config]") {
  json j = load("llama3_1_8b.json");
  j.erase("architectures");
  CHECK(hf_model_from_json(j, "l.json").architecture == "LlamaForCausalLM");
  CHECK(hf_supported_architectures().size() ==
        10);  // 6 dense + Mixtral, Qwen3-MoE, DeepSeek-V3, GPT-OSS
}

// [SECTION] Parameter counts through model.hf_config ---------------------------------------------

TEST_CASE("hf_config: the built models have the published parameter counts", "[hf_config]") {
  struct Row {
    const char* file;
    std::int64_t params;
  };
  // The issue's figures (Llama 3.1, Mistral, Qwen2.5, GPT-2), and for Qwen3 8B and Pythia 1.4B
  // the sums scenarios/models/README.md derives: Qwen3 8B = 2 V h + 36 (2 h^2 + 2 h 1024 + 256 +
  // 3 h 12288 + 2 h) + h with h = 4096, V = 151936; Pythia 1.4B = 2 V h + 24 (4 h + 4 h^2 + 3 h +
  // h^2 + h + 2 h 8192 + 8192 + h) + 2 h with h = 2048, V = 50304.
  for (const Row& r :
       {Row{"llama3_1_8b.json", 8030261248}, Row{"llama3_1_70b.json", 70553706496},
        Row{"llama3_1_405b.json", 405853388800}, Row{"mistral_7b_v0_1.json", 7241732096},
        Row{"qwen2_5_7b.json", 7615616512}, Row{"qwen3_8b.json", 8190735360},
        Row{"gpt2.json", 124439808}, Row{"pythia_1_4b.json", 1414647808}}) {
    INFO(r.file);
    // Within each config's context: GPT-2's 1024 learned positions, Pythia's 2048, 4096 elsewhere.
    const std::string f = r.file;
    const std::string seq = f == "gpt2.json" ? "1024" : f == "pythia_1_4b.json" ? "2048" : "4096";
    const Scenario s = parse_hf(r.file, ", \"seq_len\": " + seq + kEager);
    CHECK(s.model.total_params() == r.params);
    CHECK(s.model.transformer_config.seq_len == std::stoll(seq));
    CHECK(s.warnings.empty());
  }
}

TEST_CASE("hf_config: the keys next to hf_config", "[hf_config]") {
  // name: the file's stem unless given.
  const Scenario s = parse_hf("llama3_1_8b.json", std::string(R"(, "seq_len": 8192)") + kEager);
  CHECK(s.model.name == "llama3_1_8b");
  CHECK(s.model.transformer_config.seq_len == 8192);
  const Scenario k = parse_hf("llama3_1_8b.json",
                              R"(, "seq_len": 8192, "name": "L8", "attention": {"kernel": "eager"},
                                 "vocab_pad_multiple": 1000)");
  CHECK(k.model.name == "L8");
  CHECK(k.model.transformer_config.attention_kernel == AttentionKernel::kEager);
  // 128256 padded up to a multiple of 1000: 129000 rows in the embedding and in the LM head, so
  // 2 x 744 x 4096 more parameters than 8,030,261,248.
  CHECK(k.model.total_params() == 8030261248 + 2LL * 744 * 4096);
  // RoPE past max_position_embeddings: accepted, with a warning.
  const Scenario w = parse_hf("pythia_1_4b.json", std::string(R"(, "seq_len": 4096)") + kEager);
  REQUIRE(w.warnings.size() == 1);
  CHECK(w.warnings[0].find("exceed max_position_embeddings 2048") != std::string::npos);
}

TEST_CASE("hf_config: the path is relative to the scenario's folder", "[hf_config]") {
  const fs::path dir = csim::test::fresh_dir("csim_hf_config_", "relative");
  fs::create_directories(dir / "models");
  fs::copy_file(model_file("gpt2.json"), dir / "models" / "gpt2.json");
  {
    std::ofstream out(dir / "s.json");
    out << scenario_text("models/gpt2.json", std::string(R"(, "seq_len": 512)") + kEager);
  }
  const Scenario s = parse_scenario_file((dir / "s.json").string());
  CHECK(s.model.transformer_config.hidden == 768);
  CHECK(s.model.name == "gpt2");
  // The same file name given by --set is relative to the working directory instead.
  const InputError e = error_of([&] {
    parse_scenario_file((dir / "s.json").string(), {"model.hf_config=no/such/dir/gpt2.json"});
  });
  CHECK(e.file() == "no/such/dir/gpt2.json");
  CHECK(e.message().find("cannot read the Hugging Face config") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("hf_config: --hf-config's override keeps the scenario's seq_len", "[hf_config]") {
  const json gpt = json::parse(R"({"model": {"gpt": {"seq_len": 1024, "layers": 2}}})");
  CHECK(hf_config_model_override(gpt, "m.json") ==
        R"(model={"hf_config":"m.json","seq_len":1024})");
  const json hf = json::parse(R"({"model": {"hf_config": "a.json", "seq_len": 8192,
                                            "python_hooks": true}})");
  CHECK(hf_config_model_override(hf, "b.json") ==
        R"(model={"hf_config":"b.json","python_hooks":true,"seq_len":8192})");
  CHECK(hf_config_model_override(json::parse(R"({"model": {"resnet50": {}}})"), "c.json") ==
        R"(model={"hf_config":"c.json"})");
}

// [SECTION] Refusals
// --------------------------------------------------------------------------------

TEST_CASE("hf_config: mixtures of experts not modelled yet are refused", "[hf_config]") {
  json j = load("mistral_7b_v0_1.json");
  j["architectures"] = {"PhimoeForCausalLM"};
  InputError e = map_error(j);
  CHECK(e.json_path() == "architectures[0]");
  CHECK(e.message() ==
        "PhimoeForCausalLM is a mixture-of-experts model: not modelled yet (the mixtures "
        "modelled: MixtralForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, "
        "GptOssForCausalLM)");
  j.erase("architectures");
  j["model_type"] = "qwen2_moe";
  CHECK(map_error(j).json_path() == "model_type");
  // A dense architecture's name with experts in it.
  json k = load("llama3_1_8b.json");
  k["num_local_experts"] = 8;
  e = map_error(k);
  CHECK(e.json_path() == "num_local_experts");
  CHECK(e.message().find(
            "not modelled yet (the mixtures modelled: MixtralForCausalLM, Qwen3MoeForCausalLM, "
            "DeepseekV3ForCausalLM, GptOssForCausalLM)") != std::string::npos);
  k["num_local_experts"] = 0;  // zero experts: dense
  CHECK_NOTHROW(hf_model_from_json(k, "cfg.json"));
  // Zero experts is read, not "not read": no warning names it.
  for (const std::string& w : hf_model_from_json(k, "cfg.json").warnings)
    CHECK(w.find("num_local_experts") == std::string::npos);
}

TEST_CASE("hf_config: every mixture of experts is refused as MoE, by name or by experts",
          "[hf_config]") {
  json base = load("llama3_1_8b.json");
  // By architecture name (architectures[0]), then by model_type alone: PhiMoE, DeepSeek-V2,
  // Qwen2-MoE, OLMoE, DBRX, Llama 4; each would otherwise be "not a supported architecture".
  for (const auto& [arch, type] : std::vector<std::pair<std::string, std::string>>{
           {"PhimoeForCausalLM", "phimoe"},
           {"DeepseekV2ForCausalLM", "deepseek_v2"},
           {"Qwen2MoeForCausalLM", "qwen2_moe"},
           {"OlmoeForCausalLM", "olmoe"},
           {"DbrxForCausalLM", "dbrx"},
           {"Llama4ForConditionalGeneration", "llama4"}}) {
    json j = base;
    j["architectures"] = {arch};
    InputError e = map_error(j);
    CHECK(e.json_path() == "architectures[0]");
    CHECK(e.message() == arch +
                             " is a mixture-of-experts model: not modelled yet (the mixtures "
                             "modelled: MixtralForCausalLM, Qwen3MoeForCausalLM, "
                             "DeepseekV3ForCausalLM, GptOssForCausalLM)");
    j.erase("architectures");
    j["model_type"] = type;
    e = map_error(j);
    CHECK(e.json_path() == "model_type");
    CHECK(e.message() == type +
                             " is a mixture-of-experts model: not modelled yet (the mixtures "
                             "modelled: MixtralForCausalLM, Qwen3MoeForCausalLM, "
                             "DeepseekV3ForCausalLM, GptOssForCausalLM)");
  }
  // By expert count, whatever the architecture (known, unknown or none named), at the top level
  // or in text_config / ffn_config.
  struct ByKey {
    std::string arch, parent, key;
  };
  for (const ByKey& c : std::vector<ByKey>{{"LlamaForCausalLM", "", "n_routed_experts"},
                                           {"FooForCausalLM", "", "num_experts"},
                                           {"", "", "moe_num_experts"},
                                           {"FooForCausalLM", "text_config", "num_local_experts"},
                                           {"FooForCausalLM", "ffn_config", "moe_num_experts"}}) {
    json j = base;
    if (c.arch.empty()) {
      j.erase("architectures");
      j.erase("model_type");
    } else {
      j["architectures"] = {c.arch};
    }
    if (c.parent.empty())
      j[c.key] = 8;
    else
      j[c.parent] = {{c.key, 8}};
    const InputError e = map_error(j);
    CHECK(e.json_path() == (c.parent.empty() ? c.key : c.parent + "." + c.key));
    CHECK(e.message() ==
          "8 experts make a mixture-of-experts model: not modelled yet (the mixtures modelled: "
          "MixtralForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM)");
  }
}

TEST_CASE("hf_config: an unknown architecture is refused with the supported list", "[hf_config]") {
  json j = load("llama3_1_8b.json");
  j["architectures"] = {"FalconForCausalLM"};
  const InputError e = map_error(j);
  CHECK(e.json_path() == "architectures[0]");
  CHECK(e.message() == "'FalconForCausalLM' is not a supported architecture");
  CHECK(e.hint().find("LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                      "Qwen3ForCausalLM, GPT2LMHeadModel, GPTNeoXForCausalLM") !=
        std::string::npos);
  j.erase("architectures");
  j.erase("model_type");
  CHECK(map_error(j).message().find("neither architectures nor model_type") != std::string::npos);
}

TEST_CASE("hf_config: a missing required field is named", "[hf_config]") {
  for (const char* key : {"hidden_size", "num_hidden_layers", "num_attention_heads",
                          "intermediate_size", "vocab_size"}) {
    json j = load("llama3_1_8b.json");
    j.erase(key);
    const InputError e = map_error(j);
    CHECK(e.json_path() == key);
    CHECK(e.message() == std::string("missing required field '") + key + "'");
  }
  json g = load("gpt2.json");
  g.erase("n_embd");
  CHECK(map_error(g).json_path() == "n_embd");
}

TEST_CASE("hf_config: values the block cannot represent are refused, the field named",
          "[hf_config]") {
  json j = load("llama3_1_8b.json");
  j["hidden_act"] = "gelu";  // a GeGLU: not the SwiGLU modelled
  CHECK(map_error(j).json_path() == "hidden_act");
  j = load("llama3_1_8b.json");
  j["num_key_value_heads"] = 5;  // 32 % 5 != 0
  InputError e = map_error(j);
  CHECK(e.json_path() == "num_key_value_heads");
  CHECK(e.message() ==
        "32 query heads (num_attention_heads) are not a multiple of 5 key/value "
        "heads");
  j = load("llama3_1_8b.json");
  j["num_attention_heads"] = 24;  // 4096 / 24 is not whole and no head_dim (8 kv heads divide 24)
  CHECK(map_error(j).json_path() == "num_attention_heads");
  j["head_dim"] = 128;  // given: fine (q is 24 x 128 wide)
  CHECK(hf_model_from_json(j, "cfg.json").config.head_dim == 128);
  json g = load("gpt2.json");
  g["activation_function"] = "relu";
  CHECK(map_error(g).json_path() == "activation_function");
  g = load("gpt2.json");
  g["n_head"] = 7;
  CHECK(map_error(g).json_path() == "n_head");
  json q = load("qwen2_5_7b.json");
  q["quantization_config"] = {{"quant_method", "awq"}};
  CHECK(map_error(q).json_path() == "quantization_config");
  q = load("qwen2_5_7b.json");
  q["vocab_size"] = "many";
  CHECK(map_error(q).message() == "expected an integer, got string \"many\"");
}

TEST_CASE("hf_config: a file that is not JSON names the file and the position", "[hf_config]") {
  const fs::path dir = csim::test::fresh_dir("csim_hf_config_", "not_json");
  const std::string path = (dir / "config.json").string();
  {
    std::ofstream out(path);
    out << "{\n  \"hidden_size\": 4096,\n  oops\n}\n";
  }
  const InputError e = error_of([&] { read_hf_model(path); });
  CHECK(e.file() == path);
  CHECK(std::string(e.what()).find("malformed JSON at line 3") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("hf_config: scenario-side errors name the scenario key", "[hf_config]") {
  const std::string gpt2 = model_file("gpt2.json");
  auto err = [&](const std::string& extra) {
    return error_of([&] { parse_scenario_string(scenario_text(gpt2, extra), "s.json"); });
  };
  InputError e = err("");
  CHECK(e.json_path() == "model.seq_len");
  CHECK(e.message().find("a Hugging Face config has no training sequence length") !=
        std::string::npos);
  e = err(R"(, "seq_len": 2048)");  // past GPT-2's 1024 learned positions
  CHECK(e.json_path() == "model.seq_len");
  CHECK(e.message().find("1024 learned positions") != std::string::npos);
  CHECK(err(R"(, "seq_len": 512, "gpt": {})").json_path() == "model.gpt");
  CHECK(err(R"(, "seq_len": 512, "attention": {"kernel": "flash9"})").json_path() ==
        "model.attention.kernel");
  CHECK(err(R"(, "seq_len": 512, "window": 4)").json_path() == "model.window");
  // Context parallelism's sequence check names the key the sequence came from: model.seq_len
  // beside hf_config (cp 4 splits 36 tokens into 8 chunks: 36 / 8 is not whole).
  std::string cp = scenario_text(gpt2, R"(, "seq_len": 36, "attention": {"kernel": "flash2"})");
  const std::string one_gpu = "\"gpus_per_node\": 1";
  cp.replace(cp.find(one_gpu), one_gpu.size(), "\"gpus_per_node\": 4");
  cp = cp.substr(0, cp.rfind('}')) + R"(, "strategy": {"kind": "3d", "cp": 4}})";
  e = error_of([&] { parse_scenario_string(cp, "s.json"); });
  CHECK(e.json_path().find("model.seq_len") != std::string::npos);
  CHECK(e.json_path().find("strategy.cp") != std::string::npos);
  CHECK(e.message().find("do not divide seq_len 36") != std::string::npos);
  // flash3 needs Hopper: named at the scenario's key.
  e = error_of([&] {
    parse_scenario_string(
        scenario_text(model_file("llama3_1_8b.json"),
                      R"(, "seq_len": 512, "attention": {"kernel": "flash3"})", "A100-SXM4-80GB"),
        "s.json");
  });
  CHECK(e.json_path() == "model.attention.kernel");
  // flash3 has no dropout: asked for on GPT-2 (attn_pdrop 0.1), the config's field is named...
  e = err(R"(, "seq_len": 512, "attention": {"kernel": "flash3"})");
  CHECK(e.file() == gpt2);
  CHECK(e.json_path() == "attn_pdrop");
  // ... and by default GPT-2 on an H100 gets flash2; so does Llama here, a Hugging Face model on
  // one GPU (framework hf: SDPA's flash backend, core/model/eager_kernels.hpp), where framework
  // plain gets the GPU's default.
  const Scenario d = parse_scenario_string(scenario_text(gpt2, R"(, "seq_len": 512)"), "s.json");
  CHECK(d.model.transformer_config.attention_kernel == AttentionKernel::kFlash2);
  const Scenario l = parse_scenario_string(
      scenario_text(model_file("llama3_1_8b.json"), R"(, "seq_len": 512)"), "s.json");
  CHECK(l.training.framework == Framework::kHf);
  CHECK(l.model.transformer_config.attention_kernel == AttentionKernel::kFlash2);
  const std::string plain = scenario_text(model_file("llama3_1_8b.json"), R"(, "seq_len": 512)");
  const Scenario p = parse_scenario_string(
      plain.substr(0, plain.rfind("}}")) + R"(, "framework": "plain"}})", "s.json");
  CHECK(p.model.transformer_config.attention_kernel == default_attention_kernel(p.cluster.gpu));
  // A problem of the config itself names the config's file and field.
  e = error_of([&] {
    parse_scenario_string(scenario_text("/no/such.json", R"(, "seq_len": 8)"), "s.json");
  });
  CHECK(e.file() == "/no/such.json");
}

TEST_CASE("hf_config: training.compile and FP8's saved activations apply as to model.transformer",
          "[hf_config]") {
  // The same Llama 3.1 8B written as model.transformer (its config's fields, docs/scenario.md
  // "model.hf_config") must come out of the compile pass and the FP8 saved-activation pass
  // layer for layer identical: hf_config is only another way to fill the same block (both as
  // framework plain: a Hugging Face model defaults to hf's eager kernels,
  // core/model/eager_kernels.hpp).
  const std::string tr =
      R"({"name": "t", "cluster": {"gpus_per_node": 1, "gpu": "H100-SXM5-80GB"},
          "model": {"transformer": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
            "ffn_hidden": 14336, "vocab": 128256, "seq_len": 8192, "mlp": "swiglu",
            "norm": "rmsnorm", "position": "rope", "tied_embeddings": false}},
          "training": {"global_batch": 1, )";
  for (const std::string training :
       {R"("precision": "bf16", "compile": true, "framework": "plain"})",
        R"("precision": "fp8", "compile": false, "framework": "plain"})"}) {
    INFO(training);
    const Scenario t = parse_scenario_string(tr + training + "}", "t.json");
    const std::string hf =
        std::string(R"({"name": "h", "cluster": {"gpus_per_node": 1, )") +
        R"("gpu": "H100-SXM5-80GB"}, "model": {"hf_config": ")" + model_file("llama3_1_8b.json") +
        R"(", "seq_len": 8192}, "training": {"global_batch": 1, )" + training + "}";
    const Scenario h = parse_scenario_string(hf, "h.json");
    const Scenario eager = parse_scenario_string(
        hf.substr(0, hf.find("\"precision\"")) + R"("precision": "bf16", "framework": "plain"}})",
        "e.json");
    REQUIRE(h.model.layers.size() == t.model.layers.size());
    double act_h = 0, act_t = 0, act_e = 0;
    for (std::size_t i = 0; i < h.model.layers.size(); ++i) {
      CHECK(h.model.layers[i].name == t.model.layers[i].name);
      CHECK(h.model.layers[i].kernels == t.model.layers[i].kernels);
      act_h += h.model.layers[i].activation_bytes_per_sample;
      act_t += t.model.layers[i].activation_bytes_per_sample;
    }
    for (const LayerSpec& l : eager.model.layers) act_e += l.activation_bytes_per_sample;
    CHECK(act_h == act_t);
    // Either pass changes the eager bf16 model: compile fuses layers (fewer of them), FP8 saves
    // the FP8 GEMMs' inputs at 1 byte instead of 2 (fewer saved bytes).
    CHECK((h.model.layers.size() < eager.model.layers.size() || act_h < act_e));
  }
}
