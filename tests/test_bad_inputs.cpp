// The catalogue of bad inputs (tests/bad_inputs/cases.json and the whole files next to it): each
// is run through simrun's command line in-process and must exit 2 with one line naming the file,
// the JSON path, what is wrong (and the hint, where the case gives one), writing nothing.
//
// Completeness: every key of the scenario format must be exercised by at least one case. The keys
// come from two places, and both are checked:
//  - kParserKeys below, every path the parser (core/scenario/scenario_parser.cpp) reads, "[]" for
//  array
//    elements; a key added to the parser must be added here (and a case written for it);
//  - the key tables of docs/scenario.md and docs/limits.md: every backticked key in the first
//    column of a table whose header starts with "| key" (and the second column of the layer
//    table, "| type | keys"), compared by its last dotted component, so that a key documented
//    but missing from kParserKeys (or from the catalogue) fails too.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/scenario/scenario_parser.hpp"
#include "tests/bad_input_catalogue.hpp"
#include "tests/simrun_cli_support.hpp"
#include "tests/test_support.hpp"

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::vector<std::string> kParserKeys = {
    "format_version", "name", "description", "cluster", "host", "model", "training", "strategy",
    "simulation", "nccl", "limits",
    // cluster
    "cluster.nodes", "cluster.gpus_per_node", "cluster.gpu", "cluster.gpu_power_limit_w",
    "cluster.reserve", "cluster.intra", "cluster.nics_per_node", "cluster.nic_gbps", "cluster.nic",
    "cluster.nic.stack", "cluster.nic.latency_us", "cluster.nic.efficiency", "cluster.p2p",
    "cluster.fabric", "cluster.stragglers", "cluster.degraded_links", "cluster.gpu.base",
    "cluster.gpu.name", "cluster.gpu.memory_gib", "cluster.gpu.peak_fp32_tflops",
    "cluster.gpu.peak_tf32_tflops", "cluster.gpu.peak_fp16_tflops", "cluster.gpu.peak_bf16_tflops",
    "cluster.gpu.peak_fp8_tflops", "cluster.gpu.mem_bw_gbps", "cluster.gpu.sm_count",
    "cluster.gpu.nccl_sms", "cluster.gpu.hbm_sharing", "cluster.gpu.compute_capability",
    "cluster.gpu.kernel_overhead_us", "cluster.gpu.mem_bw_efficiency", "cluster.gpu.efficiency",
    "cluster.gpu.gemm_tile_efficiency", "cluster.gpu.fp8_grouped_gemm_efficiency",
    "cluster.gpu.source", "cluster.gpu.efficiency.gemm", "cluster.gpu.efficiency.elementwise",
    "cluster.gpu.efficiency.conv", "cluster.gpu.efficiency.attention",
    "cluster.gpu.efficiency.gemm.max_efficiency", "cluster.gpu.efficiency.elementwise.half_flops",
    "cluster.gpu.efficiency.conv.source", "cluster.reserve.cuda_context_mb",
    "cluster.reserve.nccl_buffers_mb", "cluster.reserve.workspace_mb", "cluster.intra.kind",
    "cluster.intra.pcie_gen", "cluster.intra.pcie_lanes", "cluster.intra.host_bridge_gbps",
    "cluster.intra.nvlink_pairs", "cluster.intra.nvlink_gbps_per_link",
    "cluster.intra.nvswitch_gbps", "cluster.fabric.nodes_per_leaf",
    "cluster.fabric.oversubscription", "cluster.fabric.rail_optimized", "cluster.fabric.sharp",
    "cluster.stragglers[].gpu", "cluster.stragglers[].slowdown", "cluster.degraded_links[].node",
    "cluster.degraded_links[].nic", "cluster.degraded_links[].gpu",
    "cluster.degraded_links[].factor",
    // host
    "host.cpu_cores", "host.python", "host.gil", "host.python_us_per_op", "host.dispatch_us_per_op",
    "host.launch_latency_us", "host.thread_start_us", "host.host_memcpy_gbps",
    // training
    "training.global_batch", "training.dataset_size", "training.precision", "training.amp_dtype",
    "training.optimizer", "training.sgd_momentum", "training.steps",
    "training.gradient_accumulation", "training.data_loader", "training.leaks",
    "training.empty_cache_every", "training.del_temporaries", "training.compile",
    "training.framework", "training.fused_rmsnorm", "training.pytorch_version",
    "training.clip_grad_norm", "training.allocator", "training.allocator.expandable_segments",
    "training.data_loader.num_workers", "training.data_loader.pin_memory",
    "training.data_loader.per_sample_load_us", "training.data_loader.prefetch_factor",
    "training.leaks.loss_as_tensor", "training.leaks.keep_outputs", "training.fp8",
    "training.fp8.recipe", "training.fp8.lm_head", "training.fp8.attention",
    "training.fp8.fp8_all_gather", "training.fp8.amax_history_len", "training.fp8.moe_dispatch",
    "training.fp8.moe_act_input",
    // model
    "model.name", "model.layers", "model.gpt", "model.resnet50", "model.explicit",
    "model.input_bytes_per_sample", "model.python_hooks", "model.layers[].type",
    "model.layers[].name", "model.layers[].extra_python_us", "model.layers[].in",
    "model.layers[].out", "model.layers[].bias", "model.layers[].kernel", "model.layers[].stride",
    "model.layers[].padding", "model.layers[].in_h", "model.layers[].in_w",
    "model.layers[].channels", "model.layers[].p", "model.layers[].num", "model.layers[].dim",
    "model.layers[].seq", "model.layers[].features", "model.layers[].hidden",
    "model.layers[].heads", "model.gpt.layers", "model.gpt.hidden", "model.gpt.heads",
    "model.gpt.seq_len", "model.gpt.vocab", "model.gpt.ffn_hidden", "model.gpt.tied_embeddings",
    "model.resnet50.image_size", "model.resnet50.num_classes", "model.explicit[].name",
    "model.explicit[].kind", "model.explicit[].params", "model.explicit[].buffer_elems",
    "model.explicit[].fwd_flops_per_sample", "model.explicit[].fwd_bytes_per_sample",
    "model.explicit[].activation_bytes_per_sample", "model.explicit[].output_bytes_per_sample",
    "model.explicit[].bwd_bytes_per_sample", "model.explicit[].kernels",
    "model.explicit[].extra_python_us",
    // model.transformer (core/scenario/parse_transformer.cpp)
    "model.transformer", "model.transformer.layers", "model.transformer.hidden",
    "model.transformer.heads", "model.transformer.kv_heads", "model.transformer.head_dim",
    "model.transformer.ffn_hidden", "model.transformer.seq_len", "model.transformer.vocab",
    "model.transformer.vocab_pad_multiple", "model.transformer.max_positions",
    "model.transformer.mlp", "model.transformer.norm", "model.transformer.position",
    "model.transformer.rotary_fraction", "model.transformer.tied_embeddings",
    "model.transformer.qkv_bias", "model.transformer.attn_out_bias", "model.transformer.mlp_bias",
    "model.transformer.qk_norm", "model.transformer.parallel_residual",
    "model.transformer.hidden_dropout", "model.transformer.attention",
    "model.transformer.attention.kernel", "model.transformer.attention.window",
    "model.transformer.attention.global_every", "model.transformer.attention.dropout",
    "model.transformer.attention.sinks", "model.transformer.mtp_layers",
    // model.transformer.moe (core/scenario/parse_moe.cpp)
    "model.transformer.moe", "model.transformer.moe.experts", "model.transformer.moe.top_k",
    "model.transformer.moe.expert_ffn_hidden", "model.transformer.moe.shared_experts",
    "model.transformer.moe.shared_ffn_hidden", "model.transformer.moe.first_dense_layers",
    "model.transformer.moe.every_k_layers", "model.transformer.moe.routing",
    "model.transformer.moe.routing.kind", "model.transformer.moe.routing.skew",
    "model.transformer.moe.routing.concentration", "model.transformer.moe.routing.tokens",
    "model.transformer.moe.routing.seed", "model.transformer.moe.expert_bias",
    "model.transformer.moe.capacity_factor", "model.transformer.moe.pad_to_capacity",
    "model.transformer.moe.router", "model.transformer.moe.router.score",
    "model.transformer.moe.router.bias", "model.transformer.moe.router.groups",
    "model.transformer.moe.router.group_top_k",
    // model.transformer.mla (core/scenario/parse_mla.cpp)
    "model.transformer.mla", "model.transformer.mla.q_lora_rank",
    "model.transformer.mla.kv_lora_rank", "model.transformer.mla.qk_nope_head_dim",
    "model.transformer.mla.qk_rope_head_dim", "model.transformer.mla.v_head_dim",
    // model.hf_config (core/scenario/parse_hf_model.cpp)
    "model.hf_config", "model.seq_len", "model.attention", "model.attention.kernel",
    "model.vocab_pad_multiple", "model.mtp_layers", "model.moe_routing",
    "model.moe_capacity_factor", "model.moe_pad_to_capacity",
    // strategy
    "strategy.kind", "strategy.device_ids", "strategy.output_device", "strategy.ddp",
    "strategy.ddp.bucket_cap_mb", "strategy.ddp.first_bucket_mb", "strategy.ddp.overlap",
    "strategy.ddp.broadcast_buffers", "strategy.ddp.gradient_as_bucket_view",
    "strategy.ddp.launcher", "strategy.dp", "strategy.tp", "strategy.pp", "strategy.cp",
    "strategy.cp_comm", "strategy.cp_a2a", "strategy.ep", "strategy.etp", "strategy.moe_dispatcher",
    "strategy.deepep_sms", "strategy.moe_a2a_overlap", "strategy.rank_order",
    "strategy.sequence_parallel", "strategy.tp_comm_overlap", "strategy.micro_batch_size",
    "strategy.schedule", "strategy.virtual_stages", "strategy.zero_stage", "strategy.fsdp_sharding",
    "strategy.prefetch", "strategy.overlap_grad_reduce", "strategy.recompute", "strategy.split_at",
    "strategy.stage_layers", "strategy.first_stage_layers", "strategy.last_stage_layers",
    "strategy.account_for_embedding", "strategy.account_for_loss", "strategy.recompute_every",
    "strategy.recompute_modules", "strategy.fsdp_version", "strategy.reshard_after_forward",
    "strategy.reduce_dtype", "strategy.replicate", "strategy.distributed_optimizer",
    "strategy.megatron_fsdp", "strategy.optimizer_offload", "strategy.activation_offload",
    "strategy.stage3_prefetch_bucket_size", "strategy.stage3_max_live_parameters",
    "strategy.stage3_max_reuse_distance", "strategy.stage3_param_persistence_threshold",
    "strategy.reduce_bucket_size", "strategy.overlap_comm", "strategy.zero3_fetch",
    "strategy.limit_all_gathers", "strategy.forward_prefetch", "strategy.backward_prefetch",
    // nccl, simulation, limits
    "nccl.algo", "nccl.proto", "nccl.p2p_disable", "simulation.symmetry", "limits.max_gpus",
    "limits.max_steps", "limits.max_layers", "limits.max_trace_events",
    "limits.max_per_rank_events"};

const fs::path kDir = fs::path(CSIM_SOURCE_DIR) / "tests" / "bad_inputs";

struct Outcome {
  int code;
  std::string err;
  bool wrote;
};

Outcome run_on(const fs::path& scenario, const fs::path& dir) {
  const fs::path out = dir / "must_not_exist.json";
  const fs::path summary = dir / "must_not_exist_summary.json";
  const csim::test::CliResult r = csim::test::run_simrun(
      {scenario.string(), "-q", "-o", out.string(), "--summary", summary.string()});
  return {r.code, r.err, fs::exists(out) || fs::exists(summary)};
}

// The key tables of a doc: last components of the backticked keys they list.
std::set<std::string> documented_keys(const fs::path& doc) {
  std::set<std::string> keys;
  std::ifstream in(doc);
  REQUIRE(in);
  std::string line;
  int column = -1;  // the column holding keys in the current table; -1 outside key tables
  const std::regex tick("`([a-z_0-9.]+)`");
  while (std::getline(in, line)) {
    if (line.rfind("|", 0) != 0) {
      column = -1;
      continue;
    }
    if (line.rfind("| key", 0) == 0) {
      column = 0;
      continue;
    }
    if (line.rfind("| type | keys", 0) == 0) {
      column = 1;
      continue;
    }
    if (column < 0 || line.rfind("| ---", 0) == 0) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(cell);
    if (static_cast<int>(cells.size()) <= column) continue;
    const std::string& c = cells[static_cast<std::size_t>(column)];
    for (std::sregex_iterator it(c.begin(), c.end(), tick), end; it != end; ++it) {
      std::string k = (*it)[1];
      const std::size_t dot = k.rfind('.');
      if (dot != std::string::npos) k = k.substr(dot + 1);
      keys.insert(k);
    }
  }
  return keys;
}

std::string last_component(const std::string& path) {
  const std::size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

}  // namespace

TEST_CASE("bad inputs: every base scenario of the catalogue is valid", "[bad_inputs]") {
  // So that each case fails for the one thing it changes.
  const json cat = csim::test::load_bad_input_catalogue();
  for (auto it = cat.at("bases").begin(); it != cat.at("bases").end(); ++it) {
    INFO("base " << it.key());
    CHECK_NOTHROW(csim::core::parse_scenario_string(it.value().dump(), it.key()));
  }
}

TEST_CASE("bad inputs: every case of the catalogue exits 2 naming file, path and problem",
          "[bad_inputs]") {
  const json cat = csim::test::load_bad_input_catalogue();
  const fs::path dir = csim::test::fresh_dir("csim_bad_inputs_", "cases");
  // The model.hf_config cases name configs relative to the scenario's folder: the bundled ones,
  // copied beside the case files, so that a case may get past reading its config.
  fs::create_directories(dir / "models");
  fs::copy_file(fs::path(CSIM_SOURCE_DIR) / "scenarios" / "models" / "gpt2.json",
                dir / "models" / "gpt2.json");
  int n = 0;
  for (const json& c : cat.at("cases")) {
    ++n;
    std::string first_path;
    const json doc = csim::test::apply_bad_input_case(cat, c, &first_path);
    const std::string path = c.value("path", first_path);
    const fs::path file = dir / ("case" + std::to_string(n) + ".json");
    {
      std::ofstream out(file, std::ios::binary);
      out << doc.dump(1) << "\n";
    }
    INFO("case " << n << ": " << c.at("key").get<std::string>() << " (" << c.at("why") << ")");
    const Outcome o = run_on(file, dir);
    INFO("stderr: " << o.err);
    CHECK(o.code == 2);
    CHECK_FALSE(o.wrote);
    CHECK(o.err.find("simrun: " + file.string() + ": " + path + ": ") != std::string::npos);
    CHECK(o.err.find(c.at("expect").get<std::string>()) != std::string::npos);
    if (c.contains("hint"))
      CHECK(o.err.find("(hint: " + c.at("hint").get<std::string>()) != std::string::npos);
    CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
  }
  CHECK(n >= 200);
  fs::remove_all(dir);
}

TEST_CASE("bad inputs: whole files (not JSON, empty, truncated, limits) exit 2", "[bad_inputs]") {
  const json cat = csim::test::load_bad_input_catalogue();
  const fs::path dir = csim::test::fresh_dir("csim_bad_inputs_", "files");
  for (const json& c : cat.at("files")) {
    const fs::path file = kDir / c.at("file").get<std::string>();
    INFO(c.at("file").get<std::string>() << " (" << c.at("why") << ")");
    REQUIRE(fs::exists(file));
    const Outcome o = run_on(file, dir);
    INFO("stderr: " << o.err);
    CHECK(o.code == c.value("exit", 2));
    CHECK_FALSE(o.wrote);
    const std::string path = c.value("path", "");
    CHECK(o.err.find("simrun: " + file.string() + ": " + (path.empty() ? "" : path + ": ")) !=
          std::string::npos);
    CHECK(o.err.find(c.at("expect").get<std::string>()) != std::string::npos);
    if (c.contains("hint"))
      CHECK(o.err.find("(hint: " + c.at("hint").get<std::string>()) != std::string::npos);
  }
  // A file that does not exist.
  const Outcome o = run_on(kDir / "no_such_file.json", dir);
  CHECK(o.code == 2);
  CHECK(o.err.find("cannot read the scenario file") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("bad inputs: the catalogue covers every key of the scenario format", "[bad_inputs]") {
  const json cat = csim::test::load_bad_input_catalogue();
  std::set<std::string> covered;
  for (const json& c : cat.at("cases")) covered.insert(c.at("key").get<std::string>());
  for (const std::string& k : kParserKeys) {
    INFO("no bad-input case for " << k << " (add one to tests/bad_inputs/cases.json)");
    CHECK(covered.count(k) == 1);
  }
  std::set<std::string> parser_leaves;
  for (const std::string& k : kParserKeys) {
    std::string leaf = last_component(k);
    const std::size_t br = leaf.find('[');
    if (br != std::string::npos) leaf = leaf.substr(0, br);
    parser_leaves.insert(leaf);
  }
  for (const char* doc : {"docs/scenario.md", "docs/limits.md"}) {
    const std::set<std::string> keys = documented_keys(fs::path(CSIM_SOURCE_DIR) / doc);
    CHECK(keys.size() > (std::string(doc) == "docs/scenario.md" ? 100u : 3u));
    for (const std::string& k : keys) {
      INFO(doc << " documents key '" << k
               << "' that no entry of kParserKeys (tests/test_bad_inputs.cpp) ends with");
      CHECK(parser_leaves.count(k) == 1);
    }
  }
}
