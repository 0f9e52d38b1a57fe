// Hugging Face config.json -> TransformerConfig (core/model/hf_config.hpp). The mapping table,
// field by field and architecture by architecture, is docs/scenario.md, "model.hf_config"; each
// default below is the one the architecture's code in transformers applies when the field is absent
// (src/transformers/models/<arch>/configuration_<arch>.py and modeling_<arch>.py).
//
// Index: [SECTION] Architectures, [SECTION] Mapping, [SECTION] File
#include "core/model/hf_config.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_diagnostics.hpp"
#include "core/model/hf_config_deepseek.hpp"
#include "core/model/hf_reader.hpp"

namespace csim::core {

namespace {

using json = nlohmann::json;
using i64 = std::int64_t;

// [SECTION] Architectures -------------------------------------------------------------------------

enum class Family {
  kLlama,
  kMistral,
  kQwen2,
  kQwen3,
  kGpt2,
  kNeox,
  kMixtral,
  kQwen3Moe,
  kDeepseekV3,
  kGptOss
};

struct Arch {
  const char* name;        // architectures[0]
  const char* model_type;  // model_type
  Family family;
};

const Arch kArchs[] = {
    {"LlamaForCausalLM", "llama", Family::kLlama},
    {"MistralForCausalLM", "mistral", Family::kMistral},
    {"Qwen2ForCausalLM", "qwen2", Family::kQwen2},
    {"Qwen3ForCausalLM", "qwen3", Family::kQwen3},
    {"GPT2LMHeadModel", "gpt2", Family::kGpt2},
    {"GPTNeoXForCausalLM", "gpt_neox", Family::kNeox},
    {"MixtralForCausalLM", "mixtral", Family::kMixtral},
    {"Qwen3MoeForCausalLM", "qwen3_moe", Family::kQwen3Moe},
    {"DeepseekV3ForCausalLM", "deepseek_v3", Family::kDeepseekV3},
    {"GptOssForCausalLM", "gpt_oss", Family::kGptOss},
};

bool is_moe_family(Family f) {
  return f == Family::kMixtral || f == Family::kQwen3Moe || f == Family::kDeepseekV3 ||
         f == Family::kGptOss;
}

// Mixture-of-experts architectures (architectures[0], model_type) not modelled yet (Mixtral,
// Qwen3-MoE, DeepSeek-V3 and GPT-OSS are, in kArchs).
// The causal-LM classes of transformers whose blocks route tokens to experts
// (src/transformers/models/<model_type>/modeling_<model_type>.py); docs/scenario.md lists them.
const char* const kMoeArchs[][2] = {
    {"Qwen2MoeForCausalLM", "qwen2_moe"},
    {"Qwen3NextForCausalLM", "qwen3_next"},
    {"DeepseekV2ForCausalLM", "deepseek_v2"},
    {"PhimoeForCausalLM", "phimoe"},
    {"OlmoeForCausalLM", "olmoe"},
    {"GraniteMoeForCausalLM", "granitemoe"},
    {"JetMoeForCausalLM", "jetmoe"},
    {"DbrxForCausalLM", "dbrx"},
    {"Glm4MoeForCausalLM", "glm4_moe"},
    {"Ernie4_5_MoeForCausalLM", "ernie4_5_moe"},
    {"MiniMaxForCausalLM", "minimax"},
    {"JambaForCausalLM", "jamba"},
    {"Llama4ForCausalLM", "llama4_text"},
    {"Llama4ForConditionalGeneration", "llama4"},
};
// Any of these above 0 makes a config a mixture of experts, whatever its architecture says (an
// architecture not listed above included): the expert count of Mixtral, GPT-OSS, PhiMoE,
// GraniteMoE, JetMoE, MiniMax (num_local_experts), Qwen2/3-MoE, OLMoE, Jamba (num_experts),
// DeepSeek-V2/V3, GLM-4-MoE (n_routed_experts), ERNIE 4.5 MoE (moe_num_experts); at the top
// level or in the sub-objects where Llama 4 (text_config) and DBRX (ffn_config) keep it.
const char* const kExpertKeys[] = {"num_local_experts", "num_experts", "n_routed_experts",
                                   "moe_num_experts"};
const char* const kExpertParents[] = {"text_config", "ffn_config"};

constexpr const char* kMoeLater =
    "not modelled yet (the mixtures modelled: MixtralForCausalLM, Qwen3MoeForCausalLM, "
    "DeepseekV3ForCausalLM, GptOssForCausalLM)";

// Fields accepted without a warning although nothing here reads them: they have no cost effect
// this model represents (token ids, initialisation, RoPE's base and scaling, the norms' eps,
// dtype, inference-only switches, GPT-2's summary head, dropouts no architecture here applies).
const char* const kNoCostFields[] = {"_name_or_path",
                                     "architectures",
                                     "model_type",
                                     "transformers_version",
                                     "torch_dtype",
                                     "dtype",
                                     "bos_token_id",
                                     "eos_token_id",
                                     "pad_token_id",
                                     "initializer_range",
                                     "use_cache",
                                     "rope_theta",
                                     "rope_scaling",
                                     "rope_parameters",
                                     "rotary_emb_base",
                                     "rms_norm_eps",
                                     "layer_norm_eps",
                                     "layer_norm_epsilon",
                                     "pretraining_tp",
                                     "tokenizer_class",
                                     "n_ctx",
                                     "hidden_dropout_prob",
                                     "classifier_dropout",
                                     "summary_activation",
                                     "summary_first_dropout",
                                     "summary_proj_to_labels",
                                     "summary_type",
                                     "summary_use_proj",
                                     "task_specific_params",
                                     "use_mrope",
                                     "scale_attn_weights",
                                     "attention_probs_dropout_prob",
                                     "output_attentions",
                                     "output_hidden_states",
                                     "return_dict",
                                     "tie_encoder_decoder",
                                     "id2label",
                                     "label2id"};

std::string supported_list() {
  std::string s;
  for (const Arch& a : kArchs) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

// [SECTION] Mapping -------------------------------------------------------------------------------

// A config with experts (kExpertKeys above 0, at the top level or in kExpertParents) is refused
// as a mixture of experts, naming the key: also when its architecture is not one this file knows.
void refuse_experts(HfReader& r, const json& cfg) {
  auto check = [&r](const json& obj, const std::string& prefix) {
    for (const char* k : kExpertKeys) {
      if (prefix.empty()) r.present(k);  // read: a dense config's 0 is not an unread field
      if (!obj.contains(k)) continue;
      const json& v = obj.at(k);
      if (v.is_number() && v.get<double>() > 0)
        r.fail(prefix + k, v.dump() + " experts make a mixture-of-experts model: " + kMoeLater,
               "the architectures modelled are " + supported_list());
    }
  };
  check(cfg, "");
  for (const char* parent : kExpertParents) {
    if (cfg.contains(parent) && cfg.at(parent).is_object())
      check(cfg.at(parent), std::string(parent) + ".");
  }
}

// The architecture: a mixture-of-experts one refused by name (architectures[0] or model_type),
// then any config with experts by its expert count, then one not in kArchs.
const Arch& architecture(HfReader& r, const json& cfg) {
  std::string name, key;
  bool by_type = false;
  if (r.given("architectures")) {
    const json& v = r.at("architectures");
    if (!v.is_array() || v.empty() || !v[0].is_string())
      r.fail("architectures", "expected a non-empty array of strings, got " + describe_value(v),
             "e.g. \"architectures\": [\"LlamaForCausalLM\"]");
    name = v[0].get<std::string>();
    key = "architectures[0]";
    r.present("model_type");
  } else if (r.given("model_type")) {
    name = r.string("model_type", "");
    key = "model_type";
    by_type = true;
  }
  // The mixtures modelled: their experts are read by read_moe.
  for (const Arch& a : kArchs) {
    if (!key.empty() && is_moe_family(a.family) && name == (by_type ? a.model_type : a.name))
      return a;
  }
  for (const auto& moe : kMoeArchs) {
    if (!key.empty() && name == moe[by_type ? 1 : 0])
      r.fail(key, name + " is a mixture-of-experts model: " + kMoeLater,
             "the architectures modelled are " + supported_list());
  }
  refuse_experts(r, cfg);
  if (key.empty())
    r.fail("architectures", "missing: neither architectures nor model_type names the model",
           "add \"architectures\": [\"LlamaForCausalLM\"] (supported: " + supported_list() + ")");
  for (const Arch& a : kArchs) {
    if (name == (by_type ? a.model_type : a.name)) return a;
  }
  std::string list;
  for (const Arch& a : kArchs)
    list += (list.empty() ? "" : ", ") + std::string(by_type ? a.model_type : a.name);
  r.fail(key, "'" + name + "' is not a supported architecture",
         "supported: " + list + "; or describe the block with model.transformer");
}

bool is_gelu(const std::string& act) {
  for (const char* g :
       {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "gelu_accurate"}) {
    if (act == g) return true;
  }
  return false;
}

// The window of the Qwen2 / Qwen3 configs: with use_sliding_window, blocks from max_window_layers
// on attend through sliding_window tokens, the ones below it fully (configuration_qwen2.py,
// layer_types). Only "all blocks" or "none" is one TransformerConfig::window.
i64 qwen_window(HfReader& r, int layers, std::vector<std::string>& notes) {
  const bool use = r.boolean("use_sliding_window", false);
  const i64 window = r.given("sliding_window") ? r.to_int("sliding_window", 1, 1LL << 30) : 0;
  const i64 from = r.opt_int("max_window_layers", 28, 0, 1LL << 30);
  if (!use) return 0;
  if (window == 0) {
    notes.push_back("use_sliding_window: true with no sliding_window: no block is windowed");
    return 0;
  }
  if (from >= layers) {
    notes.push_back("use_sliding_window: true but max_window_layers (" + std::to_string(from) +
                    ") >= num_hidden_layers (" + std::to_string(layers) +
                    "): no block is windowed");
    return 0;
  }
  if (from > 0)
    r.fail("max_window_layers",
           "blocks 0.." + std::to_string(from - 1) + " attend fully and the other " +
               std::to_string(layers - from) + " through a window of " + std::to_string(window) +
               " tokens: this model gives every block the same window",
           "set max_window_layers to 0 (every block windowed) or to num_hidden_layers (none), or "
           "use_sliding_window to false");
  return window;
}

// layer_types (newer transformers write it): all full, or all sliding, is representable.
void apply_layer_types(HfReader& r, TransformerConfig& c, i64 sliding_window) {
  if (!r.given("layer_types")) return;
  const json& v = r.at("layer_types");
  if (!v.is_array()) r.fail("layer_types", "expected an array, got " + describe_value(v));
  if (static_cast<i64>(v.size()) != c.layers)
    r.fail("layer_types",
           std::to_string(v.size()) + " entries for " + std::to_string(c.layers) + " blocks",
           "one entry per block (num_hidden_layers)");
  std::set<std::string> kinds;
  std::vector<int> full;  // the blocks with full attention
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    if (!e.is_string() || (e != "full_attention" && e != "sliding_attention"))
      r.fail("layer_types",
             "expected \"full_attention\" or \"sliding_attention\", got " + describe_value(e));
    kinds.insert(e.get<std::string>());
    if (e == "full_attention") full.push_back(static_cast<int>(i));
  }
  if (kinds.size() > 1) {
    // A mix is the pattern model.transformer describes (attention.global_every k): block i full
    // when (i + 1) % k == 0, the others windowed (GPT-OSS: sliding, full, sliding, ... : k = 2).
    const int k = full.front() + 1;
    bool every_k = true;
    for (int i = 0; i < c.layers; ++i)
      every_k =
          every_k && ((i + 1) % k == 0) == (v[static_cast<std::size_t>(i)] == "full_attention");
    if (!every_k)
      r.fail("layer_types", "a mix of full and sliding-window blocks other than every k-th full",
             "this model describes windows with every k-th block full (block i full when "
             "(i + 1) % k == 0); model.transformer takes attention.window and global_every");
    if (sliding_window <= 0)
      r.fail("sliding_window", "layer_types has sliding_attention blocks but no window is given",
             "give sliding_window in tokens");
    c.window = sliding_window;
    c.global_every = k;
    return;
  }
  if (kinds.count("full_attention")) {
    c.window = 0;
  } else {
    if (sliding_window <= 0)
      r.fail("sliding_window",
             "layer_types makes every block sliding_attention but no window is "
             "given",
             "give sliding_window in tokens");
    c.window = sliding_window;
  }
}

// The experts of Mixtral (modeling_mixtral.py: num_local_experts experts of intermediate_size,
// num_experts_per_tok per token, every block sparse), GPT-OSS (modeling_gpt_oss.py: the same
// keys, with router and expert biases) and Qwen3-MoE (modeling_qwen3_moe.py:
// num_experts of moe_intermediate_size, num_experts_per_tok; block i sparse when not in
// mlp_only_layers and (i + 1) % decoder_sparse_step == 0, the others a dense MLP of
// intermediate_size). Router settings with no cost effect here are read quietly.
void read_moe(HfReader& r, Family f, TransformerConfig& c, const std::string& arch) {
  MoeConfig& m = c.moe;
  for (const char* quiet : {"router_aux_loss_coef", "output_router_logits", "router_jitter_noise",
                            "norm_topk_prob", "num_local_experts", "num_experts"})
    r.present(quiet);
  if (f == Family::kMixtral || f == Family::kGptOss) {
    m.experts = static_cast<int>(r.req_int({"num_local_experts"}, 2, 1 << 16, arch));
    m.expert_ffn_hidden = c.ffn_hidden;
    if (f == Family::kGptOss) {
      // GptOssTopKRouter: a linear with bias over the experts; GptOssExperts: gate_up_proj and
      // down_proj with their biases; every block sparse. swiglu_limit clamps the gated
      // activation (no cost effect modelled).
      m.router.bias = true;
      m.expert_bias = true;
      for (const char* quiet : {"swiglu_limit", "experts_per_token", "initial_context_length"})
        r.present(quiet);
    }
  } else {
    m.experts = static_cast<int>(r.req_int({"num_experts"}, 2, 1 << 16, arch));
    m.expert_ffn_hidden = r.req_int({"moe_intermediate_size"}, 1, 1 << 22, arch);
    m.every_k_layers = static_cast<int>(r.opt_int("decoder_sparse_step", 1, 1, 100000));
    if (r.given("mlp_only_layers")) {
      const json& v = r.at("mlp_only_layers");
      if (!v.is_array()) r.fail("mlp_only_layers", "expected an array, got " + describe_value(v));
      // Dense blocks 0..n-1 are a prefix this model represents (moe.first_dense_layers).
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_number_integer() || v[i].get<i64>() != static_cast<i64>(i))
          r.fail("mlp_only_layers", "dense blocks other than a prefix 0..n-1",
                 "this model keeps the first n blocks dense (moe.first_dense_layers)");
      }
      m.first_dense_layers = static_cast<int>(v.size());
    }
  }
  m.top_k = static_cast<int>(r.opt_int("num_experts_per_tok", 2, 1, m.experts));
}

}  // namespace

const std::vector<std::string>& hf_supported_architectures() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (const Arch& a : kArchs) v.emplace_back(a.name);
    return v;
  }();
  return kNames;
}

HfModel hf_model_from_json(const json& cfg, const std::string& file) {
  if (!cfg.is_object())
    throw InputError(file, "", "a config.json is a JSON object, got " + describe_value(cfg),
                     "give the model's config.json from its Hugging Face repository");
  HfReader r(cfg, file);
  const Arch& a = architecture(r, cfg);
  if (r.given("quantization_config")) {
    // DeepSeek-V3's published checkpoint is stored in FP8 with 128 x 128 block scales, the
    // format it trained in: read as the model, training in training.precision. Any other
    // quantization but GPT-OSS's MXFP4 is an inference checkpoint.
    // GPT-OSS's is MXFP4 for its experts' weights, an inference format over a model trained in
    // higher precision: read as the model as well.
    const json& q = r.at("quantization_config");
    const bool known = q.is_object() && q.contains("quant_method") &&
                       (q.at("quant_method") == "fp8" || q.at("quant_method") == "mxfp4");
    if (!known)
      r.fail("quantization_config",
             "a quantized checkpoint: the weights here train in training.precision",
             "use the unquantized model's config.json");
  }
  if (r.boolean("is_encoder_decoder", false))
    r.fail("is_encoder_decoder", "an encoder-decoder model: only decoder-only models are modelled");
  if (r.boolean("add_cross_attention", false))
    r.fail("add_cross_attention", "cross-attention blocks are not modelled",
           "remove it (or set it to false): a causal LM has none");

  const Family f = a.family;
  const bool gpt2 = f == Family::kGpt2;
  const bool neox = f == Family::kNeox;
  const bool gated = !gpt2 && !neox;  // Llama, Mistral, Qwen2, Qwen3: SwiGLU, RMSNorm, RoPE, GQA
  const std::string arch = a.name;
  HfModel out;
  out.architecture = arch;
  std::vector<std::string>& notes = out.warnings;
  TransformerConfig& c = out.config;
  if (r.given("_name_or_path")) c.name = r.string("_name_or_path", "");
  // Shape. GPT-2's config.json spells them n_embd, n_layer, n_head (GPT2Config's attribute_map
  // accepts the long names too).
  const char* hidden_key = gpt2 ? "n_embd" : "hidden_size";
  const char* heads_key = gpt2 ? "n_head" : "num_attention_heads";
  c.hidden = gpt2 ? r.req_int({"n_embd", "hidden_size"}, 1, 1 << 17, arch)
                  : r.req_int({"hidden_size"}, 1, 1 << 17, arch);
  c.layers = static_cast<int>(gpt2 ? r.req_int({"n_layer", "num_hidden_layers"}, 1, 100000, arch)
                                   : r.req_int({"num_hidden_layers"}, 1, 100000, arch));
  c.heads = static_cast<int>(gpt2 ? r.req_int({"n_head", "num_attention_heads"}, 1, 65536, arch)
                                  : r.req_int({"num_attention_heads"}, 1, 65536, arch));
  c.vocab = r.req_int({"vocab_size"}, 1, 1 << 24, arch);

  // Heads: grouped-query attention for the gated families (num_key_value_heads absent = MHA);
  // GPT-2 and NeoX are multi-head.
  c.kv_heads = c.heads;
  if (gated && r.given("num_key_value_heads")) {
    c.kv_heads = static_cast<int>(r.to_int("num_key_value_heads", 1, 65536));
    if (c.kv_heads > c.heads || c.heads % c.kv_heads != 0)
      r.fail("num_key_value_heads",
             std::to_string(c.heads) + " query heads (num_attention_heads) are not a multiple of " +
                 std::to_string(c.kv_heads) + " key/value heads",
             "grouped-query attention shares each key/value head among heads / kv_heads query "
             "heads: num_key_value_heads must divide num_attention_heads");
  }
  if (gated && r.given("head_dim")) {
    c.head_dim = r.to_int("head_dim", 1, 1 << 16);
  } else if (f == Family::kQwen3) {
    c.head_dim = 128;  // Qwen3Config's default head_dim
  } else if (f == Family::kDeepseekV3) {
    c.head_dim = 0;  // MLA's head widths are read_deepseek_v3's
  } else {
    if (c.hidden % c.heads != 0)
      r.fail(heads_key,
             std::to_string(c.heads) + " heads do not divide " + hidden_key + " " +
                 std::to_string(c.hidden) + (gated ? " and no head_dim is given" : ""),
             gated ? "give head_dim, or a head count that divides hidden_size"
                   : std::string("head_dim is ") + hidden_key + " / " + heads_key +
                         ": a head count that divides it");
    c.head_dim = c.hidden / c.heads;
  }

  // MLP.
  if (gated) {
    // Mixtral: the experts' width; Qwen3-MoE: the dense blocks' (read_moe reads the experts').
    c.ffn_hidden = r.req_int({"intermediate_size"}, 1, 1 << 22, arch);
    const std::string act = r.string("hidden_act", "silu");
    if (act != "silu" && act != "swish")
      r.fail("hidden_act", "'" + act + "' is not an activation modelled for " + arch,
             "the gated MLP is modelled as SwiGLU (hidden_act silu)");
    c.mlp = MlpKind::kSwiglu;
  } else {
    c.mlp = MlpKind::kGelu;
    if (gpt2) {
      c.ffn_hidden = r.opt_int("n_inner", 4 * c.hidden, 1, 1 << 22);  // null: 4h (GPT2MLP)
    } else {
      c.ffn_hidden = r.req_int({"intermediate_size"}, 1, 1 << 22, arch);
    }
    const char* act_key = gpt2 ? "activation_function" : "hidden_act";
    const std::string act = r.string(act_key, gpt2 ? "gelu_new" : "gelu");
    if (!is_gelu(act))
      r.fail(act_key, "'" + act + "' is not an activation modelled for " + arch,
             "the MLP is modelled with a GELU (gelu, gelu_new, gelu_fast, gelu_pytorch_tanh)");
    // transformers' activations.py: gelu_new and gelu_fast are Python formulas (NewGELUActivation,
    // FastGELUActivation); gelu and gelu_pytorch_tanh call F.gelu, one kernel.
    c.gelu_composite = act == "gelu_new" || act == "gelu_fast";
  }

  // Norms and positions.
  c.norm = gated ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  c.causal_where_mask = gpt2;  // modeling_gpt2.py: torch.where(causal_mask, w, mask_value)
  if (gpt2) {
    c.position = PositionKind::kLearned;
    c.max_positions = r.req_int({"n_positions", "max_position_embeddings"}, 1, 1 << 24, arch);
  } else {
    c.position = PositionKind::kRope;  // no table: max_positions stays 0
    out.max_position_embeddings = r.opt_int("max_position_embeddings", 0, 1, 1 << 24);
    if (neox) {
      const std::string k =
          r.given("partial_rotary_factor") ? "partial_rotary_factor" : "rotary_pct";
      r.present("rotary_pct");
      c.rotary_fraction = r.number(k, 0.25, 0.0, 1.0);  // GPTNeoXConfig: rotary_pct = 0.25
    } else {
      c.rotary_fraction = r.number("partial_rotary_factor", 1.0, 0.0, 1.0);
    }
    if (c.rotary_fraction <= 0)
      r.fail(neox && !r.given("partial_rotary_factor") ? "rotary_pct" : "partial_rotary_factor",
             "0: no dimension rotated", "a share of head_dim in (0, 1]");
  }

  // Embeddings: PretrainedConfig ties by default (GPT-2 relies on it); the others set false.
  c.tied_embeddings = r.boolean("tie_word_embeddings", gpt2);

  // Biases, per architecture's modeling code.
  switch (f) {
    case Family::kLlama: {
      const bool ab = r.boolean("attention_bias", false);  // q, k, v and o_proj
      c.qkv_bias = c.attn_out_bias = ab;
      c.mlp_bias = r.boolean("mlp_bias", false);
      break;
    }
    case Family::kMistral:
    case Family::kMixtral:
      break;  // no bias anywhere (modeling_mistral.py, modeling_mixtral.py)
    case Family::kDeepseekV3:
      break;  // attention_bias is read by read_deepseek_v3 (MLA's projections)
    case Family::kGptOss: {
      // GptOssAttention: q, k, v and o_proj with bias=config.attention_bias (GptOssConfig: true);
      // a learned sink logit per head (self.sinks).
      const bool ab = r.boolean("attention_bias", true);
      c.qkv_bias = c.attn_out_bias = ab;
      c.attention_sinks = true;
      break;
    }
    case Family::kQwen2:
      c.qkv_bias = true;  // q_proj, k_proj, v_proj have biases; o_proj and the MLP none
      break;
    case Family::kQwen3:
    case Family::kQwen3Moe: {
      const bool ab = r.boolean("attention_bias", false);
      c.qkv_bias = c.attn_out_bias = ab;
      c.qk_norm = true;  // q_norm, k_norm: RMSNorm over head_dim (modeling_qwen3.py)
      break;
    }
    case Family::kGpt2:
      c.qkv_bias = c.attn_out_bias = c.mlp_bias = true;  // Conv1D layers all carry biases
      break;
    case Family::kNeox: {
      const bool ab = r.boolean("attention_bias", true);  // query_key_value and dense
      c.qkv_bias = c.attn_out_bias = ab;
      c.mlp_bias = true;  // dense_h_to_4h, dense_4h_to_h
      break;
    }
  }
  c.parallel_residual = neox && r.boolean("use_parallel_residual", true);

  // Sliding-window attention.
  i64 sliding = 0;
  if (f == Family::kMistral) {
    // MistralConfig's default is 4096 (v0.1 gives it; later versions write null: full causal).
    sliding = r.present("sliding_window")
                  ? (r.given("sliding_window") ? r.to_int("sliding_window", 1, 1LL << 30) : 0)
                  : 4096;
    c.window = sliding;
  } else if (f == Family::kMixtral) {
    // MixtralConfig's sliding_window defaults to None (full causal).
    sliding = r.given("sliding_window") ? r.to_int("sliding_window", 1, 1LL << 30) : 0;
    c.window = sliding;
  } else if (f == Family::kGptOss) {
    // GptOssConfig: sliding_window 128 on the blocks layer_types names sliding_attention
    // (alternating with full attention, from block 0), below.
    sliding = r.given("sliding_window") ? r.to_int("sliding_window", 1, 1LL << 30) : 128;
  } else if (f == Family::kQwen2 || f == Family::kQwen3 || f == Family::kQwen3Moe) {
    c.window = qwen_window(r, c.layers, notes);
    sliding = r.given("sliding_window") ? r.to_int("sliding_window", 1, 1LL << 30) : 0;
  }
  if (gated) apply_layer_types(r, c, sliding);

  // Dropout on the attention probabilities (training): GPT2Config's attn_pdrop defaults to 0.1.
  const double p =
      gpt2 ? r.number("attn_pdrop", 0.1, 0.0, 1.0) : r.number("attention_dropout", 0.0, 0.0, 1.0);
  c.attention_dropout = p > 0;
  // Dropout after the embeddings and on the residual branches: GPT-2's embd_pdrop and resid_pdrop
  // (0.1 each by default), GPT-NeoX's hidden_dropout (0.0); the gated families have none.
  if (gpt2) {
    const double e = r.number("embd_pdrop", 0.1, 0.0, 1.0);
    const double d = r.number("resid_pdrop", 0.1, 0.0, 1.0);
    c.hidden_dropout = e > 0 || d > 0;
  } else if (neox) {
    c.hidden_dropout = r.number("hidden_dropout", 0.0, 0.0, 1.0) > 0;
  }

  if (f == Family::kDeepseekV3) {
    out.mtp_layers = read_deepseek_v3(r, c, arch);
  } else if (is_moe_family(f)) {
    read_moe(r, f, c, arch);
  }

  const std::vector<std::string> unread =
      r.unread(std::set<std::string>(std::begin(kNoCostFields), std::end(kNoCostFields)));
  if (!unread.empty()) {
    std::string list;
    for (const std::string& k : unread) list += (list.empty() ? "" : ", ") + k;
    notes.push_back("not read for " + arch + " (no cost effect modelled): " + list);
  }
  return out;
}

TransformerConfig transformer_config_from_hf(const json& cfg, const std::string& file,
                                             std::vector<std::string>* warnings) {
  HfModel m = hf_model_from_json(cfg, file);
  if (warnings) warnings->insert(warnings->end(), m.warnings.begin(), m.warnings.end());
  return m.config;
}

// [SECTION] File ----------------------------------------------------------------------------------

HfModel read_hf_model(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path, "", "is a directory, not a Hugging Face config.json",
                     "give the config.json inside it (e.g. " +
                         (std::filesystem::path(path) / "config.json").string() + ")");
  const std::string text =
      read_text_file(path, "Hugging Face config",
                     "check the path (in a scenario it is relative to the scenario's folder)");
  return hf_model_from_json(parse_json_strict(text, path), path);
}

void check_hf_config_option(const std::string& path) {
  // The file itself (missing, a directory, binary) is named as the option that gave it, with the
  // option's hint; what is wrong inside it (syntax, nesting, an MoE config) as the file.
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    try {
      (void)read_text_file(path, "Hugging Face config",
                           "the path is relative to the working directory; bundled configs: "
                           "scenarios/models/*.json");
    } catch (const InputError& e) {
      throw InputError("--hf-config " + path, "", e.message(), e.hint());
    }
  }
  try {
    (void)read_hf_model(path);
  } catch (const InputError& e) {
    if (e.file() == path && e.json_path().empty() && std::filesystem::is_directory(path, ec))
      throw InputError("--hf-config " + path, "", e.message(), e.hint());
    throw;
  }
}

std::string hf_config_model_override(const json& scenario, const std::string& path) {
  json model = json::object();
  model["hf_config"] = path;
  const json* old =
      scenario.is_object() && scenario.contains("model") ? &scenario["model"] : nullptr;
  if (old && old->is_object()) {
    for (const char* where : {"", "transformer", "gpt"}) {
      const json* o = *where ? (old->contains(where) ? &(*old)[where] : nullptr) : old;
      if (o && o->is_object() && o->contains("seq_len")) {
        model["seq_len"] = (*o)["seq_len"];
        break;
      }
    }
    if (old->contains("python_hooks")) model["python_hooks"] = (*old)["python_hooks"];
  }
  return "model=" + model.dump();
}

}  // namespace csim::core
