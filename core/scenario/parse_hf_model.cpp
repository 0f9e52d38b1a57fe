// model.hf_config (core/scenario/parse_hf_model.hpp). Every key next to hf_config and the field
// mapping: docs/scenario.md, "model.hf_config".
#include "core/scenario/parse_hf_model.hpp"

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/model/attention_kernels.hpp"
#include "core/model/eager_kernels.hpp"
#include "core/model/hf_config.hpp"
#include "core/model/model_transformer.hpp"
#include "core/scenario/parse_transformer.hpp"

namespace csim::core::parse {

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kKernelNames{"eager", "flash2", "flash3", "cudnn"};
// The model kinds hf_config replaces (parse_model in core/scenario/scenario_parser.cpp).
const char* const kOtherModels[] = {"layers", "gpt", "transformer", "resnet50", "explicit"};

std::string n(std::int64_t v) {
  return std::to_string(v);
}

// The config.json's own name for a model.transformer key of transformer_problem
// (core/scenario/parse_transformer.hpp).
std::string hf_field(const std::string& key, bool gpt2, bool neox) {
  if (key == "layers") return gpt2 ? "n_layer" : "num_hidden_layers";
  if (key == "hidden") return gpt2 ? "n_embd" : "hidden_size";
  if (key == "heads") return gpt2 ? "n_head" : "num_attention_heads";
  if (key == "kv_heads") return "num_key_value_heads";
  if (key == "ffn_hidden") return gpt2 ? "n_inner" : "intermediate_size";
  if (key == "vocab") return "vocab_size";
  if (key == "rotary_fraction") return neox ? "rotary_pct" : "partial_rotary_factor";
  if (key == "attention.window") return "sliding_window";
  if (key == "attention.dropout") return gpt2 ? "attn_pdrop" : "attention_dropout";
  return key;  // head_dim
}

// The config's path: relative to the scenario's folder when the file gave it, to the working
// directory when an override did (its origin is not the file).
std::string resolve(const Ctx& ctx, const std::string& value) {
  const fs::path p(value);
  if (p.is_absolute() || ctx.origin("model.hf_config") != ctx.file) return value;
  const fs::path dir = fs::path(ctx.file).parent_path();
  return dir.empty() ? value : (dir / p).string();
}

}  // namespace

bool is_hf_model(const nlohmann::json& model) {
  return model.is_object() && model.contains("hf_config");
}

ModelSpec parse_hf_model(Ctx& ctx, const nlohmann::json& v, const TrainingSpec& t,
                         const GpuSpec& gpu) {
  for (const char* k : kOtherModels) {
    if (v.contains(k))
      ctx.fail(child_path("model", k),
               std::string("the model is given twice (hf_config and ") + k + ")",
               "keep exactly one of hf_config, layers, gpt, transformer, resnet50, explicit");
  }
  Obj o(
      ctx, v, "model",
      {"hf_config", "seq_len", "attention", "vocab_pad_multiple", "name", "input_bytes_per_sample",
       "python_hooks", "moe_routing", "moe_capacity_factor", "moe_pad_to_capacity", "mtp_layers"});
  // The scenario's keys first, so that their errors do not depend on the config file.
  const std::string given = o.string("hf_config", "");
  if (given.empty())
    ctx.fail(o.at("hf_config"), "expected the path of a config.json, got an empty string",
             "e.g. \"hf_config\": \"models/llama3_1_8b.json\" (scenarios/models/)");
  if (!o.has("seq_len"))
    ctx.fail(o.at("seq_len"),
             "missing required key 'seq_len': a Hugging Face config has no training sequence "
             "length",
             "add \"seq_len\": N next to hf_config (e.g. 8192 for Llama 3.1), or --set "
             "model.seq_len=N");
  const std::int64_t seq_len = o.req_integer("seq_len", 1, 1 << 22);
  const std::int64_t pad = o.integer("vocab_pad_multiple", 1, 1, 1 << 16);
  AttentionKernel kernel = default_attention_kernel(gpu);
  bool kernel_given = false;
  if (o.has("attention")) {
    kernel_given = Obj(ctx, o.raw("attention"), o.at("attention"), {"kernel"}).has("kernel");
    Obj a(ctx, o.raw("attention"), o.at("attention"), {"kernel"});
    kernel =
        static_cast<AttentionKernel>(a.choice("kernel", kKernelNames, static_cast<int>(kernel)));
  }
  const bool name_given = o.has("name");
  const std::string name = o.string("name", "");
  const double input_bytes = o.number("input_bytes_per_sample", -1, 0, 1e12);
  const bool hooks = o.boolean("python_hooks", false);

  // The config (its errors name its file and field).
  const std::string path = resolve(ctx, given);
  HfModel hf = read_hf_model(path);
  TransformerConfig& c = hf.config;
  c.seq_len = seq_len;
  c.vocab_pad_multiple = pad;
  // FlashAttention-3 has no dropout: a config that trains with attention dropout (GPT-2's
  // attn_pdrop) gets FlashAttention-2, SDPA's flash backend, where flash3 is the GPU's default.
  if (!kernel_given && c.attention_dropout && kernel == AttentionKernel::kFlash3)
    kernel = AttentionKernel::kFlash2;
  // torchtitan and Hugging Face call F.scaled_dot_product_attention: its backend, not the GPU's
  // fastest kernel (core/model/eager_kernels.hpp, framework_attention_kernel).
  if (!kernel_given)
    if (const auto sdpa = framework_attention_kernel(t.framework, gpu)) kernel = *sdpa;
  if (!kernel_given) kernel = mla_default_kernel(c, kernel);
  c.attention_kernel = kernel;
  if (name_given)
    c.name = name;
  else if (c.name.empty())
    c.name = fs::path(path).stem().string();
  // Named as the scenario gives it (relative to its folder), so that the text is the same
  // wherever the scenario is read from.
  for (const std::string& w : hf.warnings) ctx.warn("model.hf_config", given + ": " + w);
  // Multi-token prediction (DeepSeek-V3's num_nextn_predict_layers): a training choice the
  // scenario makes with model.mtp_layers (core/model/mtp_layers.hpp), 0 when not given; a
  // checkpoint that has the module gets a warning unless the scenario says which.
  if (o.has("mtp_layers")) {
    c.mtp_layers = static_cast<int>(o.integer("mtp_layers", 0, 0, 64));
  } else if (hf.mtp_layers > 0) {
    ctx.warn("model.hf_config",
             given + ": num_nextn_predict_layers " + n(hf.mtp_layers) +
                 ": trained without the multi-token-prediction module (parameters and FLOPs are "
                 "the main model's); model.mtp_layers " +
                 n(hf.mtp_layers) + " trains with it, 0 silences this");
  }
  // The routing of a mixture of experts, which a Hugging Face config does not hold.
  if (o.has("moe_routing")) {
    if (!c.moe.any())
      ctx.fail(o.at("moe_routing"), path + " is not a mixture of experts",
               "remove moe_routing, or point hf_config at an MoE model (Mixtral, Qwen3-MoE)");
    c.moe.routing =
        parse_moe_routing(ctx, o.raw("moe_routing"), o.at("moe_routing"), c.moe.experts);
  }
  for (const char* k : {"moe_capacity_factor", "moe_pad_to_capacity"}) {
    if (o.has(k) && !c.moe.any())
      ctx.fail(o.at(k), path + " is not a mixture of experts",
               std::string("remove ") + k + ", or point hf_config at an MoE model");
  }
  parse_moe_capacity(ctx, o, "moe_capacity_factor", "moe_pad_to_capacity", c.moe);

  // model.transformer's checks, each named where its value came from.
  const bool gpt2 = hf.architecture == "GPT2LMHeadModel";
  const bool neox = hf.architecture == "GPTNeoXForCausalLM";
  if (const auto p = transformer_problem(c, gpu)) {
    if (p->key == "seq_len" || p->key == "max_positions")
      ctx.fail(o.at("seq_len"),
               p->key == "seq_len"
                   ? p->message
                   : "seq_len " + n(seq_len) + " is longer than the " + n(c.max_positions) +
                         " learned positions of " + path + " (n_positions)",
               p->key == "seq_len" ? p->hint : "a learned position table has one row per token");
    if (p->key == "attention.kernel") ctx.fail(o.at("attention") + ".kernel", p->message, p->hint);
    if (p->key == "vocab_pad_multiple") ctx.fail(o.at("vocab_pad_multiple"), p->message, p->hint);
    throw InputError(path, hf_field(p->key, gpt2, neox), p->message, p->hint);
  }
  if (hf.max_position_embeddings > 0 && seq_len > hf.max_position_embeddings)
    ctx.warn(o.at("seq_len"), n(seq_len) + " tokens exceed max_position_embeddings " +
                                  n(hf.max_position_embeddings) + " of " + path +
                                  " (RoPE has no table: the cost is counted for seq_len)");
  const std::int64_t built = transformer_layer_count(c);
  if (built > ctx.limits.max_layers)
    ctx.over_limit(
        o.at("hf_config"),
        n(c.layers) + " blocks (" + hf_field("layers", gpt2, neox) + ") = " + n(built) + " layers",
        ctx.limits.max_layers, "max_layers", ScenarioLimits::kCeilingLayers);
  ModelSpec m;
  try {
    m = build_transformer(c, dtype_bytes(precision_bytes(t.precision, t.amp_dtype).compute));
  } catch (const std::invalid_argument& e) {
    ctx.fail(o.at("hf_config"), e.what());  // transformer_problem checks every refused case
  }
  if (input_bytes >= 0) m.input_bytes_per_sample = input_bytes;
  m.python_hooks = hooks;
  return m;
}

}  // namespace csim::core::parse
