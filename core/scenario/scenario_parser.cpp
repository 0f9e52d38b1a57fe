// Strict scenario.json parser (core/scenario/scenario_parser.hpp). Every key, unit, default and
// range is in docs/scenario.md; this file is its executable form.
//
// Index: [SECTION] Context and readers, [SECTION] Overrides, [SECTION] Cluster, [SECTION] Host,
//        [SECTION] Training, [SECTION] Model, [SECTION] Strategy, [SECTION] Limits,
//        [SECTION] Scenario
#include "core/scenario/scenario_parser.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/input_file.hpp"
#include "core/json_diagnostics.hpp"
#include "core/model/compile_fusion.hpp"
#include "core/model/eager_kernels.hpp"
#include "core/model/fp8_moe.hpp"
#include "core/model/fp8_recipe.hpp"
#include "core/model/model_builders.hpp"
#include "core/model/moe_routing.hpp"
#include "core/scenario/cluster_document.hpp"
#include "core/scenario/parse_cluster_links.hpp"
#include "core/scenario/parse_context.hpp"
#include "core/scenario/parse_fp8.hpp"
#include "core/scenario/parse_hf_model.hpp"
#include "core/scenario/parse_nccl.hpp"
#include "core/scenario/parse_parallel.hpp"
#include "core/scenario/parse_transformer.hpp"

namespace csim::core {

namespace {

using json = nlohmann::json;
using i64 = std::int64_t;

// [SECTION] Context and readers: core/scenario/parse_context.hpp
// -----------------------------------------
using namespace csim::core::parse;  // Ctx, Obj and the readers (core/scenario/parse_context.hpp)

// [SECTION] Overrides ----------------------------------------------------------------------------

struct PathStep {
  bool is_index = false;
  std::string key;
  std::size_t index = 0;
};

// "a.b[2].c" -> a, b, [2], c. Throws InputError (file = the override) on a malformed path.
std::vector<PathStep> split_path(const std::string& path, const std::string& origin) {
  std::vector<PathStep> steps;
  std::size_t i = 0;
  auto bad = [&](const std::string& why) {
    throw InputError(origin, path, "malformed override path: " + why,
                     "write KEY.SUBKEY[INDEX]=VALUE, e.g. --set strategy.ddp.bucket_cap_mb=50");
  };
  while (i < path.size()) {
    if (path[i] == '[') {
      const std::size_t close = path.find(']', i);
      if (close == std::string::npos || close == i + 1) bad("unclosed or empty [ ]");
      const std::string digits = path.substr(i + 1, close - i - 1);
      for (char c : digits) {
        if (c < '0' || c > '9') bad("index '" + digits + "' is not a number");
      }
      PathStep s;
      s.is_index = true;
      s.index = std::stoul(digits);
      steps.push_back(s);
      i = close + 1;
      if (i < path.size() && path[i] == '.') ++i;
      continue;
    }
    std::size_t end = i;
    while (end < path.size() && path[end] != '.' && path[end] != '[') ++end;
    if (end == i) bad("empty key");
    PathStep s;
    s.key = path.substr(i, end - i);
    steps.push_back(s);
    i = end;
    if (i < path.size() && path[i] == '.') {
      ++i;
      if (i == path.size()) bad("trailing '.'");
    }
  }
  if (steps.empty()) bad("empty path");
  return steps;
}

// Sets `value` at `path` of the document, before validation; `origin` names where it came from
// (a --set, or `from`, a value another file gives).
void set_at_path(json& doc, const std::string& path, json value, const std::string& origin,
                 const FileOverride* from, Ctx& ctx) {
  std::vector<PathStep> steps;
  try {
    steps = split_path(path, origin);
  } catch (const InputError& e) {
    if (!from) throw;
    Ctx::throw_in_file(*from, path, e.message(), e.hint());
  }
  const auto bad = [&](const std::string& walked, const std::string& message,
                       const std::string& hint) {
    if (from) Ctx::throw_in_file(*from, walked, message, hint);
    throw InputError(ctx.file + " (" + origin + ")", walked, message, hint);
  };
  json* cur = &doc;
  std::string walked;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const PathStep& s = steps[i];
    const bool last = i + 1 == steps.size();
    if (s.is_index) {
      walked = index_path(walked, s.index);
      if (!cur->is_array()) {
        bad(walked, "cannot index: the value there is " + describe_value(*cur) + ", not an array",
            "");
      }
      if (s.index >= cur->size()) {
        bad(walked,
            "index out of range: the array has " + std::to_string(cur->size()) + " elements",
            "set the whole array instead, e.g. --set KEY=[1,2,3]");
      }
      cur = &(*cur)[s.index];
    } else {
      walked = child_path(walked, s.key);
      if (!cur->is_object()) bad(walked, "cannot set a key inside " + describe_value(*cur), "");
      if (!last && !cur->contains(s.key)) (*cur)[s.key] = json::object();
      cur = &(*cur)[s.key];
    }
  }
  *cur = std::move(value);
  ctx.overrides.push_back({path, origin, from});
}

void apply_override(json& doc, const std::string& text, Ctx& ctx) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos) {
    throw InputError("--set " + text, "", "expected KEY=VALUE",
                     "e.g. --set strategy.kind=ddp or --set strategy.device_ids=[0,1,2]");
  }
  const std::string path = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  // VALUE as JSON when it parses as JSON, else as a string (so --set strategy.kind=ddp works);
  // nested at most kMaxJsonDepth levels, as a file (docs/limits.md, "JSON nesting").
  check_json_depth(value_text, "--set " + path);
  json value = json::parse(value_text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = value_text;
  set_at_path(doc, path, std::move(value), "--set " + path, nullptr, ctx);
}

// A value another file gives (FileOverride): set as it is, no text read back.
void apply_file_override(json& doc, const FileOverride& f, Ctx& ctx) {
  set_at_path(doc, f.path, f.value, f.file + " " + f.json_path, &f, ctx);
}

// [SECTION] Cluster ------------------------------------------------------------------------------

const char* const kEfficiencyKinds[kNumComputeKinds] = {"gemm", "elementwise", "conv", "attention"};

// A GPU: a catalog name, {"base": NAME, overrides...}, or a full inline custom GPU.
GpuCatalogEntry parse_gpu(Ctx& ctx, const json& v, const std::string& path) {
  if (v.is_string()) {
    const GpuCatalogEntry* e = find_gpu(v.get<std::string>());
    if (e == nullptr) {
      ctx.fail(path, "unknown GPU '" + v.get<std::string>() + "'",
               gpu_name_hint(v.get<std::string>()));
    }
    return *e;
  }
  Obj o(ctx, v, path,
        {"base", "name", "memory_gib", "peak_fp32_tflops", "peak_tf32_tflops", "peak_fp16_tflops",
         "peak_bf16_tflops", "peak_fp8_tflops", "mem_bw_gbps", "sm_count", "nccl_sms",
         "hbm_sharing", "compute_capability", "kernel_overhead_us", "mem_bw_efficiency",
         "efficiency", "gemm_tile_efficiency", "fp8_grouped_gemm_efficiency", "source"});
  GpuCatalogEntry e;
  if (o.has("base")) {
    const std::string base = o.string("base", "");
    const GpuCatalogEntry* b = find_gpu(base);
    if (b == nullptr) ctx.fail(o.at("base"), "unknown GPU '" + base + "'", gpu_name_hint(base));
    e = *b;
    e.gpu.source += " (with overrides from the scenario)";
  } else {
    // A custom GPU: these figures have no catalog default.
    o.require("name");
    o.require("memory_gib");
    o.require("peak_fp32_tflops");
    o.require("mem_bw_gbps");
    e.intra_kind = IntraNodeKind::kPcie;
    e.pcie_gen = 3;
    e.nics_per_node = 1;
    e.nic_bytes_per_s = 12.5 * kGB;
    MemoryReserve r;
    r.cuda_context_bytes = 500 * kMiB;
    r.nccl_buffers_bytes = 256 * kMiB;
    r.workspace_bytes = 128 * kMiB;
    e.reserve = r;
    e.reserve_source = "default for a custom GPU";
    e.link_source = "default for a custom GPU: PCIe 3.0 x16, one 100 Gb/s NIC";
    e.gpu.source = "inline custom GPU (scenario file)";
    for (int k = 0; k < kNumComputeKinds; ++k) e.gpu.efficiency[k].source = "default curve";
  }
  GpuSpec& g = e.gpu;
  g.name = o.string("name", g.name);
  if (g.name.empty())
    ctx.fail(o.at("name"), "must not be empty", "name the GPU, e.g. \"name\": \"A100-custom\"");
  if (o.has("memory_gib")) {
    g.memory_bytes =
        static_cast<Bytes>(std::llround(o.number("memory_gib", 0, 0.001, 65536) * kGiB));
  }
  g.peak_fp32_flops_per_s =
      o.number("peak_fp32_tflops", g.peak_fp32_flops_per_s / 1e12, 0.001, 1e6) * 1e12;
  g.peak_tf32_flops_per_s =
      o.number("peak_tf32_tflops", g.peak_tf32_flops_per_s / 1e12, 0, 1e6) * 1e12;
  g.peak_fp16_flops_per_s =
      o.number("peak_fp16_tflops", g.peak_fp16_flops_per_s / 1e12, 0, 1e6) * 1e12;
  g.peak_bf16_flops_per_s =
      o.number("peak_bf16_tflops", g.peak_bf16_flops_per_s / 1e12, 0, 1e6) * 1e12;
  g.peak_fp8_flops_per_s =
      o.number("peak_fp8_tflops", g.peak_fp8_flops_per_s / 1e12, 0, 1e6) * 1e12;
  g.mem_bw_bytes_per_s = o.number("mem_bw_gbps", g.mem_bw_bytes_per_s / kGB, 1, 1e6) * kGB;
  g.sm_count = static_cast<int>(o.integer("sm_count", g.sm_count, 0, 100000));
  g.nccl_sms = static_cast<int>(o.integer("nccl_sms", g.nccl_sms, 0, 100000));
  if (g.nccl_sms > 0 && g.nccl_sms >= g.sm_count)
    ctx.fail(o.at("nccl_sms"), "must be below sm_count (" + std::to_string(g.sm_count) + ")",
             "NCCL takes one SM per channel; 0 turns the interference off");
  g.hbm_sharing = o.boolean("hbm_sharing", g.hbm_sharing);
  g.compute_capability =
      static_cast<int>(o.integer("compute_capability", g.compute_capability, 0, 1000));
  g.kernel_overhead_ns = us_to_ns(
      o.number("kernel_overhead_us", static_cast<double>(g.kernel_overhead_ns) / 1e3, 0, 1e4));
  g.mem_bw_efficiency = o.number("mem_bw_efficiency", g.mem_bw_efficiency, 0.01, 1.0);
  g.source = o.string("source", g.source);
  if (o.has("efficiency")) {
    Obj eff(ctx, o.raw("efficiency"), o.at("efficiency"),
            {kEfficiencyKinds[0], kEfficiencyKinds[1], kEfficiencyKinds[2], kEfficiencyKinds[3]});
    for (int k = 0; k < kNumComputeKinds; ++k) {
      if (!eff.has(kEfficiencyKinds[k])) continue;
      Obj c(ctx, eff.raw(kEfficiencyKinds[k]), eff.at(kEfficiencyKinds[k]),
            {"max_efficiency", "half_flops", "source"});
      EfficiencyCurve& cv = g.efficiency[k];
      cv.max_efficiency = c.number("max_efficiency", cv.max_efficiency, 0.001, 1.0);
      cv.half_flops = c.number("half_flops", cv.half_flops, 0, kHuge);
      cv.source = c.string("source", "scenario file");
      // A gemm curve given here also sets the shaped GEMMs' tile efficiency (docs/cost-model.md,
      // "GEMM shape") unless gemm_tile_efficiency says otherwise.
      if (k == static_cast<int>(ComputeKind::kGemm) && c.has("max_efficiency"))
        g.gemm_tile_efficiency = 0;
    }
  }
  g.gemm_tile_efficiency = o.number("gemm_tile_efficiency", g.gemm_tile_efficiency, 0, 1.0);
  g.fp8_grouped_gemm_efficiency =
      o.number("fp8_grouped_gemm_efficiency", g.fp8_grouped_gemm_efficiency, 0.01, 1.0);
  return e;
}

std::vector<NvlinkPair> parse_nvlink_pairs(Ctx& ctx, const json& v, const std::string& path,
                                           int gpus_per_node, int max_links_per_gpu) {
  if (v.is_string()) {
    const std::string preset = v.get<std::string>();
    if (preset != "dgx1") {
      ctx.fail(
          path, "unknown NVLink preset '" + preset + "'",
          "the only preset is \"dgx1\" (DGX-1V hybrid cube-mesh); or give [[a, b, links], ...]");
    }
    if (gpus_per_node != 8) {
      ctx.fail(
          path,
          "preset dgx1 joins 8 GPUs, but cluster.gpus_per_node is " + std::to_string(gpus_per_node),
          "set cluster.gpus_per_node to 8");
    }
    return dgx1_nvlink_pairs();
  }
  require_array(ctx, v, path, true);
  std::vector<NvlinkPair> pairs;
  std::set<std::pair<int, int>> seen;
  std::vector<int> per_gpu(static_cast<std::size_t>(gpus_per_node), 0);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = index_path(path, i);
    const json& e = v[i];
    if (!e.is_array() || e.size() < 2 || e.size() > 3) {
      ctx.fail(p, "expected [a, b] or [a, b, links], got " + describe_value(e));
    }
    Obj dummy(ctx, empty_object(), p, {});
    NvlinkPair np;
    np.a = static_cast<int>(dummy.to_int(e[0], index_path(p, 0), 0, gpus_per_node - 1));
    np.b = static_cast<int>(dummy.to_int(e[1], index_path(p, 1), 0, gpus_per_node - 1));
    np.links = e.size() == 3 ? static_cast<int>(dummy.to_int(e[2], index_path(p, 2), 1, 18)) : 1;
    if (np.a == np.b)
      ctx.fail(p, "a GPU cannot be linked to itself (" + std::to_string(np.a) + ")",
               "each entry is [gpu_a, gpu_b, links] with gpu_a != gpu_b");
    const std::pair<int, int> key = std::minmax(np.a, np.b);
    if (!seen.insert(key).second) {
      ctx.fail(
          p,
          "pair " + std::to_string(key.first) + "-" + std::to_string(key.second) + " listed twice",
          "give each pair once, with its link count");
    }
    per_gpu[static_cast<std::size_t>(np.a)] += np.links;
    per_gpu[static_cast<std::size_t>(np.b)] += np.links;
    pairs.push_back(np);
  }
  if (max_links_per_gpu > 0) {
    for (int g = 0; g < gpus_per_node; ++g) {
      if (per_gpu[static_cast<std::size_t>(g)] > max_links_per_gpu) {
        ctx.fail(path,
                 "GPU " + std::to_string(g) + " would use " +
                     std::to_string(per_gpu[static_cast<std::size_t>(g)]) +
                     " NVLink links; this GPU has " + std::to_string(max_links_per_gpu),
                 "reduce the link counts of GPU " + std::to_string(g) + "'s pairs");
      }
    }
  }
  return pairs;
}

IntraNodeSpec parse_intra(Ctx& ctx, const Obj& cluster, const GpuCatalogEntry& e,
                          int gpus_per_node) {
  IntraNodeSpec s = default_intra(e, gpus_per_node);
  if (!cluster.has("intra")) return s;
  Obj o(ctx, cluster.raw("intra"), cluster.at("intra"),
        {"kind", "pcie_gen", "pcie_lanes", "host_bridge_gbps", "nvlink_pairs",
         "nvlink_gbps_per_link", "nvswitch_gbps"});
  const int kind = o.choice("kind", {"pcie", "nvlink_mesh", "nvswitch"}, static_cast<int>(s.kind));
  s.kind = static_cast<IntraNodeKind>(kind);
  s.pcie_gen = static_cast<int>(o.integer("pcie_gen", s.pcie_gen, 3, 5));
  s.pcie_lanes = static_cast<int>(o.integer("pcie_lanes", s.pcie_lanes, 1, 16));
  if (s.pcie_lanes != 1 && s.pcie_lanes != 2 && s.pcie_lanes != 4 && s.pcie_lanes != 8 &&
      s.pcie_lanes != 16) {
    ctx.fail(o.at("pcie_lanes"), std::to_string(s.pcie_lanes) + " is not a PCIe link width",
             "use 1, 2, 4, 8 or 16");
  }
  s.host_bridge_bytes_per_s =
      o.number("host_bridge_gbps", s.host_bridge_bytes_per_s / kGB, 0, 1e5) * kGB;
  s.nvlink_bytes_per_s_per_link =
      o.number("nvlink_gbps_per_link", s.nvlink_bytes_per_s_per_link / kGB, 0, 1e4) * kGB;
  s.nvswitch_bytes_per_s = o.number("nvswitch_gbps", s.nvswitch_bytes_per_s / kGB, 0, 1e5) * kGB;
  if (o.has("nvlink_pairs")) {
    s.nvlink_pairs = parse_nvlink_pairs(ctx, o.raw("nvlink_pairs"), o.at("nvlink_pairs"),
                                        gpus_per_node, e.nvlink_links_per_gpu);
    if (s.kind != IntraNodeKind::kNvlinkMesh) {
      ctx.warn(o.at("nvlink_pairs"), std::string("ignored: intra.kind is ") + to_string(s.kind));
    }
  }
  if (s.kind == IntraNodeKind::kNvlinkMesh) {
    if (!o.has("nvlink_pairs") && s.nvlink_pairs.empty()) {
      ctx.fail(o.at("nvlink_pairs"), "intra.kind nvlink_mesh needs nvlink_pairs",
               gpus_per_node == 8
                   ? "give \"dgx1\" for the DGX-1 hybrid cube-mesh, or [[a, b, links], ...]"
                   : "give [[a, b, links], ...]");
    }
    if (s.nvlink_bytes_per_s_per_link <= 0) {
      ctx.fail(o.at("nvlink_gbps_per_link"),
               "intra.kind nvlink_mesh needs nvlink_gbps_per_link > 0",
               "V100 NVLink2: 25 GB/s per link per direction");
    }
  } else {
    s.nvlink_pairs.clear();
  }
  if (s.kind == IntraNodeKind::kNvswitch && s.nvswitch_bytes_per_s <= 0) {
    ctx.fail(o.at("nvswitch_gbps"), "intra.kind nvswitch needs nvswitch_gbps > 0",
             "A100: 300 GB/s per direction; H100/H200: 450");
  }
  return s;
}

void parse_heterogeneity(Ctx& ctx, const Obj& o, ClusterSpec& c);  // below
void parse_power_limit(Ctx& ctx, const Obj& o, const GpuCatalogEntry& e, ClusterSpec& c);

ClusterSpec parse_cluster(Ctx& ctx, const json& v) {
  Obj o(ctx, v, "cluster",
        {"nodes", "gpus_per_node", "gpu", "gpu_power_limit_w", "reserve", "intra", "nics_per_node",
         "nic_gbps", "nic", "p2p", "fabric", "stragglers", "degraded_links"});
  ClusterSpec c;
  c.gpus_per_node = static_cast<int>(o.integer("gpus_per_node", 1, 1, 16));
  // Total GPUs = nodes x gpus_per_node against limits.max_gpus (docs/limits.md).
  if (!o.has("nodes") || o.raw("nodes").is_number()) {
    const double nodes = o.has("nodes") ? o.raw("nodes").get<double>() : 1.0;
    const double world = nodes * c.gpus_per_node;
    if (world > static_cast<double>(ctx.limits.max_gpus)) {
      ctx.over_limit(o.has("nodes") ? o.at("nodes") : o.at("gpus_per_node"),
                     (o.has("nodes") ? o.raw("nodes").dump() : std::string("1")) + " nodes x " +
                         std::to_string(c.gpus_per_node) + " GPUs per node = " + num_text(world) +
                         " GPUs",
                     ctx.limits.max_gpus, "max_gpus", ScenarioLimits::kCeilingGpus);
    }
  }
  c.nodes = static_cast<int>(o.integer("nodes", 1, 1, ctx.limits.max_gpus));
  const GpuCatalogEntry e = parse_gpu(ctx, o.require("gpu"), o.at("gpu"));
  c.gpu = e.gpu;
  parse_power_limit(ctx, o, e, c);
  c.reserve = e.reserve;
  if (o.has("reserve")) {
    Obj r(ctx, o.raw("reserve"), o.at("reserve"),
          {"cuda_context_mb", "nccl_buffers_mb", "workspace_mb"});
    const double mem_mib = static_cast<double>(c.gpu.memory_bytes) / kMiB;
    auto mib = [&](const char* key, Bytes def) {
      return static_cast<Bytes>(
          std::llround(r.number(key, static_cast<double>(def) / kMiB, 0, mem_mib) * kMiB));
    };
    c.reserve.cuda_context_bytes = mib("cuda_context_mb", c.reserve.cuda_context_bytes);
    c.reserve.nccl_buffers_bytes = mib("nccl_buffers_mb", c.reserve.nccl_buffers_bytes);
    c.reserve.workspace_bytes = mib("workspace_mb", c.reserve.workspace_bytes);
  }
  if (usable_memory_bytes(c, true) <= 0) {
    ctx.fail(o.at("reserve"),
             "the reserves leave no usable memory on " + c.gpu.name + " (" +
                 num_text(static_cast<double>(c.gpu.memory_bytes) / kMiB) + " MiB)",
             "lower cuda_context_mb, nccl_buffers_mb or workspace_mb");
  }
  c.intra = parse_intra(ctx, o, e, c.gpus_per_node);
  c.nics_per_node = static_cast<int>(o.integer("nics_per_node", e.nics_per_node, 0, 64));
  c.nic_bytes_per_s = o.number("nic_gbps", e.nic_bytes_per_s / kGB, 0, 1e5) * kGB;
  if (c.nodes > 1 && (c.nics_per_node == 0 || c.nic_bytes_per_s <= 0)) {
    ctx.fail(o.has("nic_gbps") ? o.at("nic_gbps") : o.at("nics_per_node"),
             "a cluster of " + std::to_string(c.nodes) +
                 " nodes needs NICs (nics_per_node >= 1, nic_gbps > 0)",
             "e.g. \"nics_per_node\": 8, \"nic_gbps\": 25 (200 Gb/s HDR InfiniBand)");
  }
  parse_cluster_links(ctx, o, c);  // core/scenario/parse_cluster_links.cpp
  parse_heterogeneity(ctx, o, c);
  return c;
}

// cluster.gpu_power_limit_w (docs/scenario.md; docs/cost-model.md, "Power limit"): a board power
// cap at or below the GPU's datasheet TDP; its compute-throughput factor from the catalog's
// published clocks under a cap (core/hardware/power_limit.cpp), 1 with a warning where none is
// published.
void parse_power_limit(Ctx& ctx, const Obj& o, const GpuCatalogEntry& e, ClusterSpec& c) {
  if (!o.has("gpu_power_limit_w")) return;
  const PowerProfile& pw = e.power;
  if (!(pw.tdp_w > 0)) {
    ctx.fail(o.at("gpu_power_limit_w"),
             "no datasheet TDP for " + c.gpu.name + " in the catalog, so no power cap below it",
             "remove cluster.gpu_power_limit_w, or give the GPU as {\"base\": <catalog GPU>, ...}");
  }
  // 1 W: any positive cap; the TDP: a cap cannot raise the board's power.
  c.gpu_power_limit_w = o.number("gpu_power_limit_w", pw.tdp_w, 1, pw.tdp_w);
  c.gpu.compute_clock_factor = power_limit_clock_factor(pw, c.gpu_power_limit_w);
  if (!power_limit_modelled(pw, c.gpu_power_limit_w)) {
    ctx.warn(o.at("gpu_power_limit_w"),
             "no published sustained-clock measurement of " + c.gpu.name + " under a power cap: " +
                 num_text(c.gpu_power_limit_w) + " W (TDP " + num_text(pw.tdp_w) +
                 " W) is recorded, not modelled; kernels keep the catalog's clocks");
  }
}

// Fabric, stragglers and degraded links (docs/scenario.md, "cluster.fabric", "Heterogeneity").
void parse_heterogeneity(Ctx& ctx, const Obj& o, ClusterSpec& c) {
  if (o.has("fabric")) {
    Obj f(ctx, o.raw("fabric"), o.at("fabric"),
          {"nodes_per_leaf", "oversubscription", "rail_optimized", "sharp"});
    c.fabric.nodes_per_leaf = static_cast<int>(f.integer("nodes_per_leaf", 0, 0, 4096));
    c.fabric.oversubscription = f.number("oversubscription", 1.0, 1.0, 64.0);
    c.fabric.rail_optimized = f.boolean("rail_optimized", true);
    c.fabric.sharp = f.boolean("sharp", false);
    if (c.fabric.nodes_per_leaf == 0 && (f.has("oversubscription") || f.has("rail_optimized")))
      ctx.warn(f.at("nodes_per_leaf"),
               "no leaf switches: oversubscription and rail_optimized "
               "are ignored (set nodes_per_leaf for a fat tree)");
  }
  const int world = c.world_gpus();
  if (o.has("stragglers")) {
    const json& arr = require_array(ctx, o.raw("stragglers"), o.at("stragglers"), false);
    for (std::size_t i = 0; i < arr.size(); ++i) {
      Obj e(ctx, arr[i], index_path(o.at("stragglers"), i), {"gpu", "slowdown"});
      Straggler st;
      st.gpu = static_cast<int>(e.req_integer("gpu", 0, world - 1));
      st.slowdown = e.req_number("slowdown", 1.0, 100.0);
      c.stragglers.push_back(st);
    }
  }
  if (o.has("degraded_links")) {
    const json& arr = require_array(ctx, o.raw("degraded_links"), o.at("degraded_links"), false);
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const std::string p = index_path(o.at("degraded_links"), i);
      Obj e(ctx, arr[i], p, {"node", "nic", "gpu", "factor"});
      LinkDegradation d;
      d.node = static_cast<int>(e.req_integer("node", 0, c.nodes - 1));
      if (e.has("nic") == e.has("gpu"))
        ctx.fail(p, "name exactly one of 'nic' or 'gpu'",
                 "{\"node\": 3, \"nic\": 0, \"factor\": 0.5} or {\"node\": 0, \"gpu\": 2, ...}");
      if (e.has("nic")) {
        if (c.nics_per_node == 0)
          ctx.fail(e.at("nic"), "the cluster has no NICs", "set cluster.nics_per_node");
        d.nic = static_cast<int>(e.req_integer("nic", 0, c.nics_per_node - 1));
      } else {
        d.gpu = static_cast<int>(e.req_integer("gpu", 0, c.gpus_per_node - 1));
      }
      d.factor = e.req_number("factor", 1e-3, 1.0);
      c.degraded_links.push_back(d);
    }
  }
}

// [SECTION] Host ---------------------------------------------------------------------------------

HostSpec parse_host(Ctx& ctx, const json* v) {
  HostSpec h;
  if (v == nullptr) return h;
  Obj o(ctx, *v, "host",
        {"cpu_cores", "python", "gil", "python_us_per_op", "dispatch_us_per_op",
         "launch_latency_us", "thread_start_us", "host_memcpy_gbps"});
  h.cpu_cores = static_cast<int>(o.integer("cpu_cores", h.cpu_cores, 1, 1024));
  h.python = o.boolean("python", h.python);
  h.gil = o.boolean("gil", h.gil);
  h.python_us_per_op = o.number("python_us_per_op", h.python_us_per_op, 0, 1e6);
  h.dispatch_us_per_op = o.number("dispatch_us_per_op", h.dispatch_us_per_op, 0, 1e6);
  h.launch_latency_us = o.number("launch_latency_us", h.launch_latency_us, 0, 1e6);
  h.thread_start_us = o.number("thread_start_us", h.thread_start_us, 0, 1e6);
  h.host_memcpy_bytes_per_s =
      o.number("host_memcpy_gbps", h.host_memcpy_bytes_per_s / kGB, 0.01, 1e4) * kGB;
  if (!h.python && o.has("gil"))
    ctx.warn(o.at("gil"), "ignored: host.python is false (no Python, no GIL)");
  return h;
}

// [SECTION] Training -----------------------------------------------------------------------------

// training.pytorch_version: "MAJOR.MINOR" (a patch level is accepted and ignored) as
// MAJOR * 100 + MINOR (core/lowering/optimizer_kernels.hpp).
int parse_pytorch_version(Ctx& ctx, const Obj& o) {
  const std::string v = o.string("pytorch_version", "");
  int major = 0, minor = 0, used = 0;
  if (std::sscanf(v.c_str(), "%d.%d%n", &major, &minor, &used) != 2 ||
      (used != static_cast<int>(v.size()) && v[static_cast<std::size_t>(used)] != '.') ||
      major < 1 || major > 9 || minor < 0 || minor > 99)
    ctx.fail(o.at("pytorch_version"), "'" + v + "' is not a PyTorch release",
             "write MAJOR.MINOR, e.g. \"1.8\" or \"2.5\"");
  return major * 100 + minor;
}

TrainingSpec parse_training(Ctx& ctx, const json& v, const GpuSpec& gpu) {
  Obj o(ctx, v, "training",
        {"global_batch", "dataset_size", "precision", "amp_dtype", "optimizer", "sgd_momentum",
         "steps", "gradient_accumulation", "data_loader", "leaks", "empty_cache_every",
         "del_temporaries", "fp8", "compile", "framework", "fused_rmsnorm", "allocator",
         "pytorch_version", "clip_grad_norm"});
  TrainingSpec t;
  t.global_batch = o.req_integer("global_batch", 1, 1 << 24);
  t.dataset_size = o.integer("dataset_size", 0, 0, 1000000000000LL);
  t.precision =
      static_cast<Precision>(o.choice("precision", {"fp32", "amp", "bf16", "fp16", "fp8"}, 0));
  const int amp = o.choice("amp_dtype", {"fp16", "bf16"}, 0);
  t.amp_dtype = amp == 0 ? Dtype::kFp16 : Dtype::kBf16;
  // Before the compute-dtype check below: an FP8 recipe the GPU cannot run is the more specific
  // error (core/scenario/parse_fp8.cpp).
  t.fp8 = parse_fp8(ctx, o, t.precision, gpu);
  t.optimizer = static_cast<OptimizerKind>(o.choice("optimizer", {"sgd", "adam"}, 1));
  t.sgd_momentum = o.number("sgd_momentum", 0.0, 0.0, 0.999999);
  t.steps = static_cast<int>(limited_int(ctx, o, "steps", t.steps, 1, ctx.limits.max_steps,
                                         "max_steps", ScenarioLimits::kCeilingSteps, "steps"));
  t.gradient_accumulation = static_cast<int>(o.integer("gradient_accumulation", 1, 1, 4096));
  if (o.has("data_loader")) {
    Obj d(ctx, o.raw("data_loader"), o.at("data_loader"),
          {"num_workers", "pin_memory", "per_sample_load_us", "prefetch_factor"});
    t.loader.num_workers = static_cast<int>(d.integer("num_workers", 0, 0, 256));
    t.loader.pin_memory = d.boolean("pin_memory", false);
    t.loader.per_sample_load_us = d.number("per_sample_load_us", 0, 0, 1e7);
    t.loader.prefetch_factor = static_cast<int>(d.integer("prefetch_factor", 2, 1, 64));
    if (d.has("prefetch_factor") && t.loader.num_workers == 0) {
      ctx.warn(d.at("prefetch_factor"),
               "ignored: num_workers is 0 (the main process loads batches)");
    }
  }
  if (o.has("leaks")) {
    Obj l(ctx, o.raw("leaks"), o.at("leaks"), {"loss_as_tensor", "keep_outputs"});
    t.leak_loss_as_tensor = l.boolean("loss_as_tensor", false);
    t.leak_keep_outputs = l.boolean("keep_outputs", false);
  }
  t.empty_cache_every = static_cast<int>(o.integer("empty_cache_every", 0, 0, 100000));
  t.del_temporaries = o.boolean("del_temporaries", true);
  t.compile = o.boolean("compile", false);
  // Given here; otherwise resolved from the strategy by resolve_framework below.
  t.framework = static_cast<Framework>(
      o.choice("framework", {std::begin(kFrameworkNames), std::end(kFrameworkNames)}, 0));
  t.fused_rmsnorm = o.boolean("fused_rmsnorm", false);
  if (o.has("allocator")) {
    Obj a(ctx, o.raw("allocator"), o.at("allocator"), {"expandable_segments"});
    t.expandable_segments = a.boolean("expandable_segments", false);
  }
  if (o.has("pytorch_version")) t.pytorch_version = parse_pytorch_version(ctx, o);
  t.clip_grad_norm = o.number("clip_grad_norm", 0.0, 0.0, 1e12);
  if (o.has("amp_dtype") && t.precision != Precision::kAmp) {
    ctx.warn(o.at("amp_dtype"), std::string("ignored: precision is ") + to_string(t.precision));
  }
  if (o.has("sgd_momentum") && t.optimizer != OptimizerKind::kSgd) {
    ctx.warn(o.at("sgd_momentum"), "ignored: optimizer is adam");
  }
  if (t.global_batch % t.gradient_accumulation != 0) {
    ctx.fail(o.at("global_batch"),
             std::to_string(t.global_batch) + " is not a multiple of gradient_accumulation (" +
                 std::to_string(t.gradient_accumulation) + ")",
             "the global batch is gradient_accumulation micro-batches of equal size");
  }
  if (t.dataset_size > 0 && t.dataset_size < t.global_batch) {
    ctx.warn(o.at("dataset_size"),
             "smaller than global_batch: every step sees the whole dataset (" +
                 std::to_string(t.dataset_size) + " samples)");
  }
  // The dtype the kernels run in must exist on the GPU (docs/scenario.md, "training.precision").
  const PrecisionBytes pb = precision_bytes(t.precision, t.amp_dtype);
  // Blame amp_dtype when it chose the dtype, else precision.
  const std::string where_path =
      t.precision == Precision::kAmp && o.has("amp_dtype") ? o.at("amp_dtype") : o.at("precision");
  if (gpu.peak_flops_per_s(pb.compute) <= 0) {
    ctx.fail(where_path,
             std::string(to_string(pb.compute)) + " is not supported by " + gpu.name + " (no " +
                 to_string(pb.compute) + " peak in its figures)",
             pb.compute == Dtype::kBf16 && gpu.peak_fp16_flops_per_s > gpu.peak_fp32_flops_per_s
                 ? "use precision amp with amp_dtype fp16 (or fp16), or fp32"
                 : "use precision fp32");
  }
  if (pb.compute != Dtype::kFp32 &&
      gpu.peak_flops_per_s(pb.compute) < 0.5 * gpu.peak_fp32_flops_per_s) {
    ctx.warn(where_path,
             std::string(to_string(pb.compute)) + " runs at " +
                 num_text(gpu.peak_fp32_flops_per_s / gpu.peak_flops_per_s(pb.compute)) +
                 "x lower rate than fp32 on " + gpu.name + ": expect it to be slower than fp32");
  }
  return t;
}

// [SECTION] Model --------------------------------------------------------------------------------

const std::vector<std::string> kLayerTypes = {
    "linear",  "conv2d",      "batchnorm2d", "maxpool2d", "adaptive_avgpool",
    "flatten", "relu",        "gelu",        "dropout",   "sigmoid",
    "tanh",    "elementwise", "embedding",   "layernorm", "attention"};

std::vector<std::string> layer_keys(const std::string& type) {
  std::vector<std::string> k = {"type", "name", "extra_python_us"};
  auto add = [&](std::initializer_list<const char*> more) {
    for (const char* m : more) k.emplace_back(m);
  };
  if (type == "linear")
    add({"in", "out", "bias"});
  else if (type == "conv2d")
    add({"in", "out", "kernel", "stride", "padding", "in_h", "in_w", "bias"});
  else if (type == "batchnorm2d")
    add({"channels"});
  else if (type == "maxpool2d")
    add({"kernel", "stride", "padding"});
  else if (type == "dropout")
    add({"p"});
  else if (type == "embedding")
    add({"num", "dim", "seq"});
  else if (type == "layernorm")
    add({"features"});
  else if (type == "attention")
    add({"hidden", "heads"});
  return k;
}

ModelSpec parse_layer_list(Ctx& ctx, const json& v, const std::string& path, int act_bytes) {
  require_array(ctx, v, path, true);
  if (static_cast<i64>(v.size()) > ctx.limits.max_layers)
    ctx.over_limit(path, std::to_string(v.size()) + " layers", ctx.limits.max_layers, "max_layers",
                   ScenarioLimits::kCeilingLayers);
  LayerListBuilder b(act_bytes);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = index_path(path, i);
    if (!v[i].is_object())
      ctx.fail(p, "expected a layer object, got " + describe_value(v[i]),
               "e.g. {\"type\": \"linear\", \"in\": 64, \"out\": 64} (docs/scenario.md, layers)");
    if (!v[i].contains("type")) {
      ctx.fail(child_path(p, "type"), "missing required key 'type'",
               "one of linear, conv2d, batchnorm2d, relu, embedding, layernorm, attention, ...");
    }
    Obj probe(ctx, empty_object(), p, {});
    const std::string type = kLayerTypes[static_cast<std::size_t>(
        probe.to_choice(v[i].at("type"), child_path(p, "type"), kLayerTypes))];
    Obj o(ctx, v[i], p, layer_keys(type));
    const std::string name = o.string("name", type + std::to_string(i));
    const i64 kDim = 1LL << 24;
    try {
      if (type == "linear") {
        b.linear(name, o.req_integer("in", 1, kDim), o.req_integer("out", 1, kDim),
                 o.boolean("bias", true));
      } else if (type == "conv2d") {
        b.conv2d(name, o.req_integer("in", 1, 65536), o.req_integer("out", 1, 65536),
                 static_cast<int>(o.req_integer("kernel", 1, 64)),
                 static_cast<int>(o.integer("stride", 1, 1, 64)),
                 static_cast<int>(o.integer("padding", 0, 0, 64)), o.integer("in_h", 0, 0, 65536),
                 o.integer("in_w", 0, 0, 65536), o.boolean("bias", true));
      } else if (type == "batchnorm2d") {
        b.batchnorm2d(name, o.integer("channels", 0, 0, 65536));
      } else if (type == "maxpool2d") {
        const int k = static_cast<int>(o.req_integer("kernel", 1, 64));
        b.maxpool2d(name, k, static_cast<int>(o.integer("stride", k, 1, 64)),
                    static_cast<int>(o.integer("padding", 0, 0, 32)));
      } else if (type == "adaptive_avgpool") {
        b.adaptive_avgpool(name);
      } else if (type == "flatten") {
        b.flatten();
      } else if (type == "embedding") {
        b.embedding(name, o.req_integer("num", 1, 1LL << 28), o.req_integer("dim", 1, kDim),
                    o.req_integer("seq", 1, 1 << 20));
      } else if (type == "layernorm") {
        b.layernorm(name, o.integer("features", 0, 0, kDim));
      } else if (type == "attention") {
        b.attention(name, o.integer("hidden", 0, 0, kDim),
                    static_cast<int>(o.req_integer("heads", 1, 4096)));
      } else {
        o.number("p", 0.5, 0.0, 1.0);
        b.elementwise(name, type);
      }
      const double py = o.number("extra_python_us", 0, 0, 1e7);
      if (py > 0) {
        if (type == "flatten")
          ctx.fail(o.at("extra_python_us"), "flatten is a view, not a layer",
                   "put the Python time on a layer");
        b.add_python_us(py);
      }
    } catch (const std::invalid_argument& e) {
      ctx.fail(p, e.what());
    }
  }
  ModelSpec m;
  m.name = "layers";
  m.source = "layers";
  m.input_bytes_per_sample = b.input_bytes_per_sample();
  m.layers = b.take_layers();
  if (m.layers.empty())
    ctx.fail(path, "no layer with work: a model of only flatten has nothing to run");
  return m;
}

ModelSpec parse_gpt(Ctx& ctx, const json& v, const std::string& path, int act_bytes) {
  Obj o(ctx, v, path,
        {"layers", "hidden", "heads", "seq_len", "vocab", "ffn_hidden", "tied_embeddings"});
  GptConfig c;
  c.layers = static_cast<int>(o.req_integer("layers", 1, 1000));
  c.hidden = o.req_integer("hidden", 1, 1 << 17);
  c.heads = static_cast<int>(o.req_integer("heads", 1, 4096));
  c.seq_len = o.req_integer("seq_len", 1, 1 << 20);
  c.vocab = o.req_integer("vocab", 1, 1 << 24);
  c.ffn_hidden = o.integer("ffn_hidden", 0, 0, 1 << 20);
  c.tied_embeddings = o.boolean("tied_embeddings", true);
  if (c.hidden % c.heads != 0) {
    ctx.fail(o.at("heads"),
             std::to_string(c.heads) + " heads do not divide hidden " + std::to_string(c.hidden),
             "hidden must be a multiple of heads (head_dim = hidden / heads)");
  }
  const i64 built_layers = 13LL * c.layers + 3;  // docs/scenario.md, "model.gpt"
  if (built_layers > ctx.limits.max_layers)
    ctx.over_limit(
        o.at("layers"),
        std::to_string(c.layers) + " blocks = " + std::to_string(built_layers) + " layers",
        ctx.limits.max_layers, "max_layers", ScenarioLimits::kCeilingLayers);
  ModelSpec m = build_gpt(c, act_bytes);
  m.name = "gpt-" + std::to_string(c.layers) + "L-" + std::to_string(c.hidden) + "h";
  return m;
}

ModelSpec parse_explicit(Ctx& ctx, const json& v, const std::string& path) {
  require_array(ctx, v, path, true);
  if (static_cast<i64>(v.size()) > ctx.limits.max_layers)
    ctx.over_limit(path, std::to_string(v.size()) + " layers", ctx.limits.max_layers, "max_layers",
                   ScenarioLimits::kCeilingLayers);
  std::vector<LayerSpec> layers;
  std::set<std::string> names;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = index_path(path, i);
    Obj o(ctx, v[i], p,
          {"name", "kind", "params", "buffer_elems", "fwd_flops_per_sample", "fwd_bytes_per_sample",
           "activation_bytes_per_sample", "output_bytes_per_sample", "bwd_bytes_per_sample",
           "kernels", "extra_python_us"});
    LayerSpec l;
    l.name = o.string("name", "layer" + std::to_string(i));
    if (!names.insert(l.name).second)
      ctx.fail(o.at("name"), "duplicate layer name '" + l.name + "'",
               "give each layer its own name");
    l.kind = static_cast<ComputeKind>(o.choice(
        "kind",
        {kEfficiencyKinds[0], kEfficiencyKinds[1], kEfficiencyKinds[2], kEfficiencyKinds[3]}, 0));
    l.params = o.integer("params", 0, 0, 1LL << 44);
    l.buffer_elems = o.integer("buffer_elems", 0, 0, 1LL << 44);
    l.fwd_flops_per_sample = o.number("fwd_flops_per_sample", 0, 0, kHuge);
    l.fwd_bytes_per_sample = o.number("fwd_bytes_per_sample", 0, 0, kHuge);
    l.activation_bytes_per_sample = o.number("activation_bytes_per_sample", 0, 0, kHuge);
    l.output_bytes_per_sample = o.number("output_bytes_per_sample", 0, 0, kHuge);
    if (o.has("bwd_bytes_per_sample"))
      l.bwd_bytes_per_sample = o.number("bwd_bytes_per_sample", 0, 0, kHuge);
    l.kernels = static_cast<int>(o.integer("kernels", 1, 0, 100000));
    l.extra_python_us = o.number("extra_python_us", 0, 0, 1e7);
    layers.push_back(std::move(l));
  }
  return build_explicit(std::move(layers), 0);
}

// The passes every model kind goes through after it is built, model.hf_config included: the
// framework's eager kernel sequences (docs/transformer.md, "Eager kernel sequences"),
// torch.compile's fusion (docs/compile.md) and FP8's saved activations (docs/fp8.md, "Memory").
// training.framework when not given (core/model/eager_kernels.hpp, default_framework), read off the
// raw strategy and model before they are parsed: a malformed one is reported with its own path
// later. training.clip_grad_norm is lowered where the optimizer step is PyTorch's on whole
// gradients (single, data_parallel, ddp): elsewhere the norm needs a reduction across the shards or
// stages the model does not emit yet.
void check_clip_grad_norm(Ctx& ctx, const Scenario& sc) {
  const StrategyKind k = sc.strategy.kind;
  if (sc.training.clip_grad_norm > 0 && k != StrategyKind::kSingle &&
      k != StrategyKind::kDataParallel && k != StrategyKind::kDdp)
    ctx.warn("training.clip_grad_norm",
             std::string("ignored: not lowered for strategy kind ") + to_string(k) +
                 " (single, data_parallel and ddp only; docs/program.md, \"Optimizer and "
                 "clipping kernels\")");
}

Framework resolve_framework(const json* strategy, const json& model) {
  StrategyKind kind = StrategyKind::kSingle;
  int fsdp_version = 1;
  bool megatron_fsdp = false;
  if (strategy != nullptr && strategy->is_object()) {
    const char* kinds[] = {"single",   "data_parallel",   "ddp", "model_parallel",
                           "pipeline", "tensor_parallel", "3d",  "zero",
                           "fsdp"};
    const auto k = strategy->find("kind");
    if (k != strategy->end() && k->is_string())
      for (int i = 0; i < static_cast<int>(std::size(kinds)); ++i)
        if (k->get<std::string>() == kinds[i]) kind = static_cast<StrategyKind>(i);
    const auto v = strategy->find("fsdp_version");
    if (v != strategy->end() && v->is_number_integer()) fsdp_version = v->get<int>();
    const auto mf = strategy->find("megatron_fsdp");
    megatron_fsdp = mf != strategy->end() && mf->is_boolean() && mf->get<bool>();
  }
  return default_framework(kind, fsdp_version, megatron_fsdp, is_hf_model(model));
}

ModelSpec finish_model(Ctx& ctx, ModelSpec m, const TrainingSpec& t) {
  // The framework's eager kernels first (core/model/eager_kernels.hpp): compile fuses them back.
  apply_eager_kernels(m, t.framework, t.fused_rmsnorm);
  if (t.compile) {
    // torch.compile per transformer block (docs/compile.md): the fusion pass on the built model.
    const bool has_blocks = std::any_of(m.layers.begin(), m.layers.end(),
                                        [](const LayerSpec& l) { return l.block >= 0; });
    if (!has_blocks) {
      ctx.warn("training.compile",
               "no transformer blocks in this model: nothing is fused (the pass compiles each "
               "block, as torchtitan does)");
    }
    m = compile_model(m);
  }
  apply_fp8_saved_activations(m, t);  // no-op unless precision is fp8
  apply_fp8_moe_act_input(m, t);      // core/model/fp8_moe.hpp; no-op unless switched on
  return m;
}

ModelSpec parse_model(Ctx& ctx, const json& v, const TrainingSpec& t, const GpuSpec& gpu) {
  if (is_hf_model(v))  // core/scenario/parse_hf_model.cpp
    return finish_model(ctx, parse_hf_model(ctx, v, t, gpu), t);
  Obj o(ctx, v, "model",
        {"name", "layers", "gpt", "transformer", "resnet50", "explicit", "input_bytes_per_sample",
         "python_hooks"});
  const char* kinds[] = {"layers", "gpt", "transformer", "resnet50", "explicit"};
  std::vector<std::string> given;
  for (const char* k : kinds) {
    if (o.has(k)) given.emplace_back(k);
  }
  if (given.empty()) {
    ctx.fail(
        "model",
        "missing the model: give one of layers, gpt, transformer, resnet50, explicit, hf_config",
        "e.g. \"model\": {\"resnet50\": {}}");
  }
  if (given.size() > 1) {
    ctx.fail(o.at(given[1]), "the model is given twice (" + given[0] + " and " + given[1] + ")",
             "keep exactly one of layers, gpt, transformer, resnet50, explicit");
  }
  const int act_bytes = dtype_bytes(precision_bytes(t.precision, t.amp_dtype).compute);
  const std::string& kind = given[0];
  ModelSpec m;
  if (kind == "layers") {
    m = parse_layer_list(ctx, o.raw("layers"), o.at("layers"), act_bytes);
  } else if (kind == "gpt") {
    m = parse_gpt(ctx, o.raw("gpt"), o.at("gpt"), act_bytes);
  } else if (kind == "transformer") {  // core/scenario/parse_transformer.cpp
    m = parse_transformer(ctx, o.raw("transformer"), o.at("transformer"), act_bytes, gpu);
  } else if (kind == "resnet50") {
    Obj r(ctx, o.raw("resnet50"), o.at("resnet50"), {"image_size", "num_classes"});
    ResNet50Config c;
    c.image_size = r.integer("image_size", 224, 32, 4096);
    c.num_classes = r.integer("num_classes", 1000, 1, 1000000);
    m = build_resnet50(c, act_bytes);
  } else {
    m = parse_explicit(ctx, o.raw("explicit"), o.at("explicit"));
    if (!o.has("input_bytes_per_sample")) {
      ctx.warn("model.input_bytes_per_sample",
               "not given for an explicit model: input copies move 0 bytes");
    }
  }
  m.name = o.string("name", m.name);
  m.input_bytes_per_sample = o.number("input_bytes_per_sample", m.input_bytes_per_sample, 0, 1e12);
  m.python_hooks = o.boolean("python_hooks", false);
  return finish_model(ctx, std::move(m), t);
}

// [SECTION] Strategy (the parallel dimensions: core/scenario/parse_parallel.hpp)
// ---------------------------

StrategySpec parse_strategy(Ctx& ctx, const json* v, const ClusterSpec& c, const TrainingSpec& t,
                            const ModelSpec& m, bool ga_given) {
  StrategySpec s;
  std::vector<std::string> keys = {"kind", "device_ids", "output_device", "ddp"};
  keys.insert(keys.end(), kParallelKeys.begin(), kParallelKeys.end());
  Obj o(ctx, v ? *v : empty_object(), "strategy", keys);
  s.kind = static_cast<StrategyKind>(o.choice("kind",
                                              {"single", "data_parallel", "ddp", "model_parallel",
                                               "pipeline", "tensor_parallel", "3d", "zero", "fsdp"},
                                              0));
  const int world = c.world_gpus();
  const std::string ids_path = o.at("device_ids");
  if (o.has("device_ids")) {
    const json& ids = require_array(ctx, o.raw("device_ids"), ids_path, false);
    std::set<int> seen;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::string p = index_path(ids_path, i);
      const json& id = ids[i];
      if (!id.is_number_integer()) ctx.fail(p, "expected a GPU index, got " + describe_value(id));
      const i64 g = id.get<i64>();
      if (g < 0 || g >= world) {
        ctx.fail(p,
                 "GPU " + std::to_string(g) + " does not exist: the cluster has " +
                     std::to_string(world) + " GPU" + (world == 1 ? "" : "s") + " (0.." +
                     std::to_string(world - 1) + ")",
                 "global index = node * gpus_per_node + local index");
      }
      if (!seen.insert(static_cast<int>(g)).second) {
        ctx.fail(p, "GPU " + std::to_string(g) + " is listed twice", "list each GPU once");
      }
      s.device_ids.push_back(static_cast<int>(g));
    }
  }
  // Defaults (docs/scenario.md, "strategy.device_ids").
  if (s.device_ids.empty()) {
    if (s.kind == StrategyKind::kSingle) {
      s.device_ids = {0};
    } else {
      const int n = s.kind == StrategyKind::kDataParallel || s.kind == StrategyKind::kModelParallel
                        ? c.gpus_per_node
                        : world;
      for (int g = 0; g < n; ++g) s.device_ids.push_back(g);
    }
  }
  if (s.kind == StrategyKind::kSingle && s.device_ids.size() != 1) {
    ctx.fail(ids_path,
             "strategy single runs on exactly one GPU, " + std::to_string(s.device_ids.size()) +
                 " given",
             "give one id, e.g. [0], or use kind data_parallel / ddp");
  }
  if (s.kind == StrategyKind::kDataParallel || s.kind == StrategyKind::kModelParallel) {
    const int node0 = s.device_ids[0] / c.gpus_per_node;
    for (std::size_t i = 1; i < s.device_ids.size(); ++i) {
      const int node = s.device_ids[i] / c.gpus_per_node;
      if (node != node0) {
        ctx.fail(
            o.has("device_ids") ? index_path(ids_path, i) : ids_path,
            std::string(s.kind == StrategyKind::kDataParallel ? "DataParallel" : "model_parallel") +
                " is single-process: all device_ids must be on one node, but GPU " +
                std::to_string(s.device_ids[i]) + " is on node " + std::to_string(node) +
                " and GPU " + std::to_string(s.device_ids[0]) + " on node " + std::to_string(node0),
            "use strategy.kind ddp across nodes");
      }
    }
  }
  // output_device: -1 = device_ids[0].
  const std::string out_path = o.at("output_device");
  s.output_device = static_cast<int>(o.integer("output_device", -1, -1, world - 1));
  if (s.output_device == -1) {
    s.output_device = s.device_ids[0];
  } else if (s.kind == StrategyKind::kDataParallel) {
    bool found = false;
    for (int d : s.device_ids) found = found || d == s.output_device;
    if (!found) {
      ctx.fail(out_path, "GPU " + std::to_string(s.output_device) + " is not one of device_ids",
               "the gathered outputs go to one of the replicas' GPUs; pick one of device_ids");
    }
  } else {
    ctx.warn(out_path, std::string("ignored: output_device applies to data_parallel, kind is ") +
                           to_string(s.kind));
  }
  if (o.has("ddp")) {
    Obj d(ctx, o.raw("ddp"), o.at("ddp"),
          {"bucket_cap_mb", "first_bucket_mb", "overlap", "broadcast_buffers",
           "gradient_as_bucket_view", "launcher"});
    DdpSpec& p = s.ddp;
    p.bucket_cap_mb = d.number("bucket_cap_mb", p.bucket_cap_mb, 0.001, 65536);
    p.first_bucket_mb = d.number("first_bucket_mb", p.first_bucket_mb, 0.001, 65536);
    p.overlap = d.boolean("overlap", p.overlap);
    p.broadcast_buffers = d.boolean("broadcast_buffers", p.broadcast_buffers);
    p.gradient_as_bucket_view = d.boolean("gradient_as_bucket_view", p.gradient_as_bucket_view);
    p.launcher = static_cast<DdpLauncher>(d.choice("launcher", {"process", "thread"}, 0));
    if (s.kind != StrategyKind::kDdp) {
      ctx.warn(o.at("ddp"), std::string("ignored: strategy.kind is ") + to_string(s.kind));
    } else if (p.launcher == DdpLauncher::kThread) {
      ctx.warn(d.at("launcher"),
               "thread launcher is a what-if: PyTorch DDP needs one process per GPU; the trace "
               "labels it");
    }
  }
  if (is_parallel_kind(s.kind)) {
    s.parallel =
        parse_parallel(ctx, o, s.kind, static_cast<int>(s.device_ids.size()), t, m, ga_given, c);
  } else {
    for (const std::string& k : kParallelKeys) {
      if (o.has(k)) {
        ctx.fail(
            o.at(k),
            std::string("strategy.") + k + " does not apply to strategy.kind " + to_string(s.kind),
            "use kind model_parallel, pipeline, tensor_parallel, 3d, zero or fsdp");
      }
    }
  }
  // Batch split (docs/scenario.md, "training.global_batch").
  const i64 micro = t.global_batch / t.gradient_accumulation;
  const i64 n = static_cast<i64>(s.device_ids.size());
  if (s.kind == StrategyKind::kDdp && micro % n != 0) {
    ctx.fail("training.global_batch",
             "micro-batch " + std::to_string(micro) + " does not split evenly over " +
                 std::to_string(n) + " DDP ranks",
             "use a multiple of " + std::to_string(n * t.gradient_accumulation) +
                 " (ranks x gradient_accumulation)");
  }
  if (s.kind == StrategyKind::kDataParallel) {
    // torch.chunk: chunk = ceil(B / n); only ceil(B / chunk) replicas get data.
    const i64 chunk = (micro + n - 1) / n;
    const i64 replicas = (micro + chunk - 1) / chunk;
    if (replicas < n) {
      ctx.warn("strategy.device_ids", "only " + std::to_string(replicas) + " of " +
                                          std::to_string(n) + " replicas run: torch.chunk splits " +
                                          std::to_string(micro) + " samples into chunks of " +
                                          std::to_string(chunk));
    }
  }
  return s;
}

// [SECTION] Scenario -----------------------------------------------------------------------------

std::string file_stem(const std::string& path) {
  std::string s = path;
  const std::size_t slash = s.find_last_of("/\\");
  if (slash != std::string::npos) s = s.substr(slash + 1);
  const std::size_t dot = s.rfind('.');
  if (dot != std::string::npos && dot > 0) s = s.substr(0, dot);
  return s;
}

// [SECTION] Limits (docs/limits.md) -------------------------------------------------------------

void parse_limits(Ctx& ctx, const Obj& top) {
  if (!top.has("limits")) return;
  Obj l(ctx, top.raw("limits"), "limits",
        {"max_gpus", "max_steps", "max_layers", "max_trace_events", "max_per_rank_events"});
  auto read = [&](const char* key, i64 def, i64 ceiling) {
    if (!l.has(key)) return def;
    const json& v = l.raw(key);
    if (v.is_number() && v.get<double>() > static_cast<double>(ceiling)) {
      ctx.fail(
          l.at(key),
          v.dump() + " is above the hard ceiling of limits." + key + ", " + std::to_string(ceiling),
          "the simulator cannot go past it (docs/limits.md says why)");
    }
    return l.to_int(v, l.at(key), 1, ceiling);
  };
  ScenarioLimits& m = ctx.limits;
  m.max_gpus = read("max_gpus", m.max_gpus, ScenarioLimits::kCeilingGpus);
  m.max_steps = read("max_steps", m.max_steps, ScenarioLimits::kCeilingSteps);
  m.max_layers = read("max_layers", m.max_layers, ScenarioLimits::kCeilingLayers);
  m.max_trace_events =
      read("max_trace_events", m.max_trace_events, ScenarioLimits::kCeilingTraceEvents);
  m.max_per_rank_events =
      read("max_per_rank_events", m.max_per_rank_events, ScenarioLimits::kCeilingTraceEvents);
}

// Trace events per layer, micro-batch, simulated model replica and step: forward and backward
// kernels with their Python and launch events, flows, memory counter samples, the per-layer
// gradient / parameter collectives. Measured on the bundled scenarios (trace events / (steps x
// micro-batches x layers x replicas) is 14-16 on them; docs/limits.md); kept as an upper estimate.
constexpr double kEventsPerLayerStep = 16;

// The trace a run of `sc` would write, estimated before lowering (docs/limits.md): steps x
// micro-batches per step x (model layers + 4) x model replicas the simulator runs op by op x 16.
// EVERY_RANK: the model replicas of every GPU instead, rank symmetry's mirrors included (the
// per-rank files, docs/limits.md "Per-rank files").
double estimate_trace_events(const Scenario& sc, double* replicas_out, double* micro_out,
                             bool every_rank = false) {
  const StrategySpec& st = sc.strategy;
  double replicas = 1, micro = static_cast<double>(sc.training.gradient_accumulation);
  const double n = static_cast<double>(st.device_ids.size());
  switch (st.kind) {
    case StrategyKind::kSingle:
      break;
    case StrategyKind::kDataParallel:
    case StrategyKind::kDdp:
      replicas = n;
      break;
    default: {
      const ParallelSpec& ps = st.parallel;
      micro = static_cast<double>(ps.micro_batches);
      // Rank symmetry (docs/program.md, "Rank symmetry"): one representative per class of dp /
      // cp / tp mirror images. HSDP's shard groups are not mirrored (every rank runs); under
      // uneven routing only the expert-data-parallel shift folds EP ranks, so each stage keeps
      // one EP group's etp x ep ranks.
      const bool symmetric = sc.simulation.symmetry && sc.cluster.homogeneous() &&
                             st.kind != StrategyKind::kModelParallel && ps.fsdp2.replicate <= 1;
      const double all = static_cast<double>(ps.dp) * ps.tp * ps.cp;
      replicas = !symmetric || every_rank ? all
                 : ps.ep > 1 && !uniform_expert_load(sc.model.transformer_config.moe)
                     ? static_cast<double>(ps.ep) * ps.etp
                     : 1.0;
      break;
    }
  }
  *replicas_out = replicas;
  *micro_out = micro;
  // + 4: the loss, the optimizer step and the data loading of each micro-batch and step.
  return static_cast<double>(sc.training.steps) * micro *
         (static_cast<double>(sc.model.layers.size()) + 4) * replicas * kEventsPerLayerStep;
}

// Memory per estimated trace event while simulating without writing a trace (the Program, the
// timings and the in-memory trace the summary is computed from) and when writing one too:
// gpt_1t_3072xa100_3d (1.71 M estimated events) peaks at 865 MB without -o and 888 MB with it,
// over simrun's 227 MB baseline: (865 - 227) MB / 1.71 M = 373 B and 387 B per event, rounded up
// (docs/limits.md, "Measured").
constexpr double kBytesPerEventSimulated = 380;
constexpr double kBytesPerEventTraced = 400;

// "100 steps x 1 micro-batches x (13003 layers + 4) x 65536 simulated model replicas x 16"
std::string describe_trace_events(const Scenario& sc) {
  double replicas = 1, micro = 1;
  const double events = estimate_trace_events(sc, &replicas, &micro);
  return "about " + num_text(events) + " events: " + std::to_string(sc.training.steps) +
         " steps x " + num_text(micro) + " micro-batches x (" +
         std::to_string(sc.model.layers.size()) + " layers + 4) x " + num_text(replicas) +
         " simulated model replicas x 16";
}

// The key that changes the run's size most directly: the steps while there are several, else
// rank symmetry when it is off and would apply, else the batch (fewer micro-batches).
std::string run_size_lever(const Scenario& sc) {
  if (sc.training.steps > 1) return "training.steps";
  if (!sc.simulation.symmetry && sc.strategy.kind != StrategyKind::kDataParallel &&
      sc.strategy.kind != StrategyKind::kDdp && sc.strategy.kind != StrategyKind::kSingle)
    return "simulation.symmetry";
  return "training.global_batch";
}

std::string run_size_hint(const Scenario& sc, bool traced) {
  std::vector<std::string> levers;
  if (sc.training.steps > 1)
    levers.push_back("simulate fewer training.steps (the summary needs 2)");
  if (!sc.simulation.symmetry) levers.push_back("set simulation.symmetry auto");
  const bool parallel = sc.strategy.kind != StrategyKind::kSingle &&
                        sc.strategy.kind != StrategyKind::kDataParallel &&
                        sc.strategy.kind != StrategyKind::kDdp;
  if (parallel && sc.strategy.parallel.micro_batches > 1)
    levers.push_back("use fewer, larger micro-batches (strategy.micro_batch_size)");
  else
    levers.push_back("use a smaller training.global_batch or fewer GPUs");
  if (traced) levers.push_back("write no trace (drop -o / --per-rank: the summary needs none)");
  std::string hint;
  for (std::size_t i = 0; i < levers.size(); ++i)
    hint += (i == 0 ? "" : i + 1 == levers.size() ? ", or " : ", ") + levers[i];
  return hint;
}

// 64-bit guards (docs/limits.md, "Fixed limits"): byte counts and nanosecond times are int64 in
// the Program and the simulator; these bounds keep every sum of them far from overflowing.
constexpr double kMaxModelBytes = 72057594037927936.0;  // 2^56 = 64 PiB
constexpr double kMaxGpuWorkSeconds = 1e8;  // simulated s per GPU; int64 ns hold 9.2e9 s

void check_sizes(Ctx& ctx, Scenario& sc) {
  const TrainingSpec& t = sc.training;
  const ModelSpec& m = sc.model;
  const GpuSpec& g = sc.cluster.gpu;
  const double batch = static_cast<double>(t.global_batch);
  // Bytes: every per-sample figure of every layer for the whole global batch, and the parameters
  // with their gradients and optimizer state (at most 20 bytes each).
  double per_sample = m.input_bytes_per_sample, params = 0;
  for (const LayerSpec& l : m.layers) {
    per_sample += l.fwd_bytes_per_sample + l.activation_bytes_per_sample +
                  l.output_bytes_per_sample + std::max(0.0, l.bwd_bytes_per_sample) +
                  2 * l.fwd_bytes_per_sample;
    params += static_cast<double>(l.params) + static_cast<double>(l.buffer_elems);
  }
  const double bytes = per_sample * batch + 20 * params;
  if (!(bytes <= kMaxModelBytes)) {
    ctx.fail("model",
             "the model's tensors add up to " + num_text(bytes) +
                 " bytes for one global batch (activations, traffic, parameters and optimizer "
                 "state), past the fixed limit of 2^56 bytes (64 PiB) that keeps 64-bit byte "
                 "counts from overflowing (docs/limits.md)",
             "use a smaller model, training.global_batch or per-sample figures");
  }
  // Time: one GPU's share of the run's compute and memory traffic, plus every kernel's fixed cost
  // and small-kernel penalty on it (an upper estimate of its busy time), bounds the simulated
  // timestamps.
  const PrecisionBytes pb = precision_bytes(t.precision, t.amp_dtype);
  const double peak = std::max(g.peak_flops_per_s(pb.compute), 1.0);
  const double bw = std::max(g.mem_bw_bytes_per_s * g.mem_bw_efficiency, 1.0);
  const double gpus = std::max<double>(1, static_cast<double>(sc.strategy.device_ids.size()));
  double replicas = 1, micro = 1;
  estimate_trace_events(sc, &replicas, &micro);
  double seconds = 0;
  for (const LayerSpec& l : m.layers) {
    const EfficiencyCurve& c = g.efficiency[static_cast<int>(l.kind)];
    const double eff = std::max(c.max_efficiency, 1e-3);
    const double kernels = std::max(l.kernels, 1);
    const double work =
        l.fwd_flops_per_sample * batch / (peak * eff) +
        (3 * l.fwd_bytes_per_sample + std::max(0.0, l.bwd_bytes_per_sample)) * batch / bw;
    const double fixed =
        micro * kernels *
        (c.half_flops / (peak * eff) + static_cast<double>(g.kernel_overhead_ns) * 1e-9);
    seconds += static_cast<double>(t.steps) * 3 * (work / gpus + fixed);
  }
  if (!(seconds <= kMaxGpuWorkSeconds)) {
    ctx.fail("training.steps",
             "the run asks for about " + num_text(seconds) +
                 " s of work per GPU, past the fixed limit of 1e8 s that keeps 64-bit nanosecond "
                 "times from overflowing (docs/limits.md)",
             "simulate fewer steps, a smaller model or batch, or a faster GPU");
  }
  // Size of the run: the trace limit applies only where a trace is written (check_trace_limit,
  // called by the front ends that write one); every run, traced or not, must fit in memory:
  // the Program, the timings and the summary's spans take about kBytesPerEventSimulated per
  // estimated event (docs/limits.md, "Trace size").
  const double events = estimate_trace_events(sc, &replicas, &micro);
  sc.estimated_trace_events = static_cast<i64>(std::min(events, 9e18));
  const double memory =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && events * kBytesPerEventSimulated > memory) {
    ctx.fail(run_size_lever(sc),
             "the run would need about " +
                 num_text(events * kBytesPerEventSimulated / 1073741824.0) +
                 " GiB of memory to simulate (" + describe_trace_events(sc) +
                 "), more than this machine's " +
                 std::to_string(std::llround(memory / 1073741824.0)) + " GiB",
             run_size_hint(sc, false));
  }
}

// A vocabulary that tensor parallelism cannot split evenly is padded as Megatron pads it
// (megatron/training/tokenizer: vocab_size_with_padding, make_vocab_size_divisible_by = 128):
// V' = ceil(V / (128 tp)) * 128 tp; the model is rebuilt with V' (the extra rows are real
// parameters, FLOPs and memory in Megatron too) and the summary notes it (docs/scenario.md,
// "model.gpt"). A vocabulary that tp divides is kept as given.
void pad_vocab_for_tensor_parallel(Ctx& ctx, json& doc, Scenario& sc) {
  const i64 vocab = sc.model.transformer.vocab;
  const int tp = sc.strategy.parallel.tp;
  if (sc.model.transformer_config.layers >
      0) {  // model.transformer: core/scenario/parse_transformer.cpp
    if (pad_transformer_vocab_for_tp(
            ctx, sc.model, tp,
            dtype_bytes(precision_bytes(sc.training.precision, sc.training.amp_dtype).compute)))
      sc.model = finish_model(ctx, std::move(sc.model), sc.training);
    return;
  }
  if (sc.model.transformer.layers == 0 || tp <= 1 || vocab % tp == 0) return;
  const i64 multiple = 128LL * tp;
  const i64 padded = (vocab + multiple - 1) / multiple * multiple;
  doc["model"]["gpt"]["vocab"] = padded;
  sc.model = parse_model(ctx, doc["model"], sc.training, sc.cluster.gpu);
  ctx.warn("model.gpt.vocab", std::to_string(vocab) + " does not split over tp " +
                                  std::to_string(tp) + ": padded to " + std::to_string(padded) +
                                  " (a multiple of 128 x tp, as Megatron pads it)");
}

// Checked before the document is copied: a copy of a deeply nested non-object (20,000 nested
// arrays, tests/bad_inputs/deep_nesting.json) recurses once per level.
void require_object(const json& doc, const std::string& file) {
  if (doc.is_object()) return;
  Ctx ctx;
  ctx.file = file;
  ctx.fail("", "the scenario must be a JSON object, got " + describe_value(doc),
           "a scenario is {\"cluster\": ..., \"model\": ..., \"training\": ...}; see "
           "scenarios/*.json and docs/scenario.md");
}

// A cluster file read as strict JSON: the "cluster" section of a scenario on its own
// (docs/scenario.md, "Cluster files").
json read_cluster_document(const std::string& path) {
  json doc = parse_json_strict(
      read_text_file(path, "cluster file",
                     "pass a cluster JSON file; the bundled ones are scenarios/clusters/*.json"),
      path);
  // A whole scenario where its "cluster" object alone is expected: say so, rather than
  // "cluster.cluster: unknown key" (docs/scenario.md, "Cluster files").
  if (doc.is_object() && doc.contains("cluster") &&
      (doc.contains("model") || doc.contains("training") || doc.contains("strategy")))
    throw InputError(path, "",
                     "this is a scenario, not a cluster file: a cluster file holds only the "
                     "keys of a scenario's \"cluster\" object (nodes, gpus_per_node, gpu, ...)",
                     "pass a cluster file, e.g. scenarios/clusters/dgx_a100.json; the bundled ones "
                     "are scenarios/clusters/*.json");
  return doc;
}

// "cluster": "FILE" in a scenario: the cluster file's object in its place, FILE relative to the
// scenario's directory (before the --set overrides, so --set cluster.nodes=N applies to it).
void inline_cluster_file(json& doc, const std::string& file, Ctx& ctx) {
  if (!doc.contains("cluster") || !doc["cluster"].is_string()) return;
  std::string path = doc["cluster"].get<std::string>();
  const std::size_t slash = file.find_last_of('/');
  if (!path.empty() && path.front() != '/' && slash != std::string::npos)
    path = file.substr(0, slash + 1) + path;
  json cluster = read_cluster_document(path);
  if (!cluster.is_object())
    throw InputError(path, "",
                     "a cluster file must be a JSON object, got " + describe_value(cluster),
                     "see scenarios/clusters/dgx_a100.json");
  doc["cluster"] = std::move(cluster);
  ctx.cluster_file = path;
}

Scenario parse_document(json doc, const std::string& file,
                        const std::vector<FileOverride>& file_overrides,
                        const std::vector<std::string>& overrides) {
  Ctx ctx;
  ctx.file = file;
  require_object(doc, file);
  inline_cluster_file(doc, file, ctx);
  for (const FileOverride& f : file_overrides) apply_file_override(doc, f, ctx);
  for (const std::string& ov : overrides) apply_override(doc, ov, ctx);
  ctx.doc = &doc;

  Obj top(ctx, doc, "",
          {"format_version", "name", "description", "cluster", "host", "model", "training",
           "strategy", "simulation", "nccl", "limits"});
  top.integer("format_version", kScenarioFormatVersion, kScenarioFormatVersion,
              kScenarioFormatVersion);
  parse_limits(ctx, top);
  Scenario sc;
  sc.file = file;
  sc.limits = ctx.limits;
  sc.name = top.string("name", file_stem(file));
  sc.description = top.string("description", "");
  sc.cluster = parse_cluster(ctx, top.require("cluster"));
  sc.host = parse_host(ctx, top.has("host") ? &top.raw("host") : nullptr);
  sc.training = parse_training(ctx, top.require("training"), sc.cluster.gpu);
  if (!top.raw("training").contains("framework") && top.has("model"))
    sc.training.framework =
        resolve_framework(top.has("strategy") ? &top.raw("strategy") : nullptr, top.raw("model"));
  if (sc.training.fused_rmsnorm && sc.training.framework != Framework::kTorchtitan &&
      sc.training.framework != Framework::kHf)
    ctx.warn("training.fused_rmsnorm", std::string("ignored: framework ") +
                                           to_string(sc.training.framework) +
                                           " runs RMSNorm as one kernel already");
  sc.model = parse_model(ctx, top.require("model"), sc.training, sc.cluster.gpu);
  const bool ga_given =
      top.raw("training").is_object() && top.raw("training").contains("gradient_accumulation");
  sc.strategy = parse_strategy(ctx, top.has("strategy") ? &top.raw("strategy") : nullptr,
                               sc.cluster, sc.training, sc.model, ga_given);
  pad_vocab_for_tensor_parallel(ctx, doc, sc);
  validate_fp8_scenario(ctx, sc);  // core/scenario/parse_fp8.cpp
  check_clip_grad_norm(ctx, sc);
  if (top.has("nccl")) {
    Obj n(ctx, top.raw("nccl"), "nccl", {"algo", "proto", "p2p_disable"});
    // NCCL_P2P_DISABLE=1: the cluster's GPUs stage through host memory (docs/scenario.md, "nccl").
    if (n.boolean("p2p_disable", false)) sc.cluster.p2p = false;
    // The index of the choice is the enum value (core/scenario/scenario.hpp).
    sc.nccl.algo = static_cast<CollectiveAlgo>(n.choice("algo", collective_algo_names(), 0));
    sc.nccl.proto = static_cast<NcclProto>(n.choice("proto", nccl_proto_names(), 0));
    parse::check_nccl_algo(ctx, n.at("algo"), sc);  // core/scenario/parse_nccl.cpp
  }
  if (top.has("simulation")) {
    Obj sim(ctx, top.raw("simulation"), "simulation", {"symmetry"});
    sc.simulation.symmetry = sim.choice("symmetry", {"off", "auto"}, 1) == 1;
  }
  check_sizes(ctx, sc);
  sc.warnings = std::move(ctx.warnings);
  return sc;
}

}  // namespace

Scenario parse_scenario_string(const std::string& json_text, const std::string& name_for_errors,
                               const std::vector<std::string>& overrides) {
  return parse_document(parse_json_strict(json_text, name_for_errors), name_for_errors, {},
                        overrides);
}

Scenario parse_scenario_document(const nlohmann::json& doc, const std::string& name_for_errors,
                                 const std::vector<std::string>& overrides) {
  require_object(doc, name_for_errors);
  return parse_document(doc, name_for_errors, {}, overrides);
}

Scenario parse_scenario_document(const nlohmann::json& doc, const std::string& name_for_errors,
                                 const std::vector<FileOverride>& file_overrides,
                                 const std::vector<std::string>& overrides) {
  require_object(doc, name_for_errors);
  return parse_document(doc, name_for_errors, file_overrides, overrides);
}

nlohmann::json read_scenario_document(const std::string& path) {
  return parse_json_strict(
      read_text_file(path, "scenario file",
                     "pass a scenario JSON file; the bundled ones are scenarios/*.json"),
      path);
}

void check_trace_limit(const Scenario& sc) {
  const double events = static_cast<double>(sc.estimated_trace_events);
  if (events <= static_cast<double>(sc.limits.max_trace_events)) return;
  const std::string lever = run_size_lever(sc);
  std::string hint = run_size_hint(sc, true);
  hint += sc.limits.max_trace_events < ScenarioLimits::kCeilingTraceEvents
              ? "; or raise the limit with --set limits.max_trace_events=N (at most " +
                    std::to_string(ScenarioLimits::kCeilingTraceEvents) +
                    "; writing it takes about " +
                    num_text(events * kBytesPerEventTraced / 1073741824.0) + " GiB of memory)"
              : "";
  throw InputError(sc.file, lever,
                   "the trace would hold " + describe_trace_events(sc) +
                       ", which exceeds the limit of " +
                       std::to_string(sc.limits.max_trace_events) + " (limits.max_trace_events)",
                   hint);
}

void check_program_memory(const Scenario& sc, double ops, int simulated_ranks) {
  const double memory =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (memory <= 0 || ops * kBytesPerEventSimulated <= memory) return;
  throw InputError(sc.file, run_size_lever(sc),
                   "the Program would hold about " + num_text(ops) + " ops for " +
                       std::to_string(simulated_ranks) +
                       " simulated ranks (rank symmetry cannot fold the others: docs/program.md, "
                       "\"Rank symmetry\"), about " +
                       num_text(ops * kBytesPerEventSimulated / 1073741824.0) +
                       " GiB to simulate, more than this machine's " +
                       std::to_string(std::llround(memory / 1073741824.0)) + " GiB",
                   run_size_hint(sc, false));
}

// JSON bytes on disk per estimated event: gpt_20b_64xa100_3d at 3 steps, every rank (simrun
// --per-rank), wrote 4.33 GB in 64 files for an estimate of 28.46 M events: 152 bytes each
// (21.3 M records of 203 bytes were written; the estimate is an upper bound; docs/limits.md).
constexpr double kFileBytesPerEvent = 150;

void check_per_rank_limit(const Scenario& sc) {
  double replicas = 1, micro = 1;
  const double events = estimate_trace_events(sc, &replicas, &micro, true);
  if (events <= static_cast<double>(sc.limits.max_per_rank_events)) return;
  double simulated = 1, ignored = 1;
  estimate_trace_events(sc, &simulated, &ignored);
  const double ranks = static_cast<double>(sc.strategy.device_ids.size());
  std::string hint;
  if (simulated < replicas)
    hint = "--per-rank-representatives writes the " +
           num_text(std::max(1.0, ranks * simulated / replicas)) +
           " simulated GPUs' files only, each naming the ranks it stands for; or ";
  if (sc.training.steps > 3) hint += "simulate fewer training.steps (HTA needs 3); or ";
  hint += "raise the limit with --set limits.max_per_rank_events=N (at most " +
          std::to_string(ScenarioLimits::kCeilingTraceEvents) + ")";
  const double bytes = events * kFileBytesPerEvent;
  char size[32];
  if (bytes < 1e9)
    std::snprintf(size, sizeof size, "%.0f MB", bytes / 1e6);
  else
    std::snprintf(size, sizeof size, "%.1f GB", bytes / 1e9);
  throw InputError(
      sc.file, "limits.max_per_rank_events",
      "--per-rank with every rank would write about " +
          std::to_string(static_cast<long long>(std::llround(events))) + " events (" +
          std::to_string(sc.training.steps) + " steps x " + num_text(micro) + " micro-batches x (" +
          std::to_string(sc.model.layers.size()) + " layers + 4) x " + num_text(replicas) +
          " model replicas x 16; about " + size + " of JSON in " + num_text(ranks) +
          " files), which exceeds the limit of " + std::to_string(sc.limits.max_per_rank_events) +
          " (limits.max_per_rank_events)",
      hint);
}

Scenario parse_scenario_file(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_document(read_scenario_document(path), path, {}, overrides);
}

// The cluster file as the "cluster" of an otherwise empty document: overrides and messages use
// the scenario's paths (cluster.nodes), so a cluster file reads exactly as a scenario's cluster.
ClusterSpec parse_cluster_file(const std::string& path, const std::vector<std::string>& overrides,
                               std::vector<std::string>* warnings) {
  return parse_cluster_document(read_cluster_document(path), path, overrides, warnings);
}

ClusterSpec parse_cluster_document(const json& cluster, const std::string& name,
                                   const std::vector<std::string>& overrides,
                                   std::vector<std::string>* warnings) {
  Ctx ctx;
  ctx.file = name;
  json doc = json::object();
  doc["cluster"] = cluster;
  for (const std::string& ov : overrides) {
    if (ov.rfind("cluster.", 0) != 0)
      throw InputError("--set " + ov.substr(0, ov.find('=')), "",
                       "a cluster file only has cluster.* keys",
                       "e.g. --set cluster.nodes=4 or --set cluster.nic.latency_us=12");
    apply_override(doc, ov, ctx);
  }
  ClusterSpec c = parse_cluster(ctx, doc["cluster"]);
  if (warnings != nullptr) *warnings = std::move(ctx.warnings);
  return c;
}

}  // namespace csim::core
