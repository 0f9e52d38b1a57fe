// Device profiles (docs/calibration.md, "Profile").
//
// Index: [SECTION] Helpers, [SECTION] Overrides, [SECTION] Document, [SECTION] Table,
//        [SECTION] Reading
#include "calibration/device_profile.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/json_diagnostics.hpp"
#include "core/scenario/scenario_parser.hpp"

namespace csim::calibration {

using nlohmann::json;

// [SECTION] Helpers ------------------------------------------------------------------------------

namespace {

const char* const kKindKeys[core::kNumComputeKinds] = {"gemm", "elementwise", "conv", "attention"};

// `v` to `digits` significant digits: profiles hold what was measured, not float noise.
// Through the decimal text, so the double is the one nearest that decimal (4.994e8, not
// 499399999.99999994).
double sig(double v, int digits) {
  if (!(std::fabs(v) > 0) || !std::isfinite(v)) return v;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  return std::strtod(buf, nullptr);
}

// ns precision, in us (the unit the scenario keys take).
double us3(double seconds) {
  return std::round(seconds * 1e9) / 1e3;
}

json num_or_null(double v, bool ok) {
  return ok && std::isfinite(v) ? json(v) : json(nullptr);
}

std::string source_text(const Calibration& c, const std::string& when) {
  std::string s = "simrun calibrate, " + when.substr(0, 10) + ", " + c.backend;
  if (!c.measured) s += " (not a measurement: the simulator's own durations)";
  return s;
}

const GemmDtypeFit* gemm_used(const Fits& f) {
  return f.gemm_for_overrides >= 0 ? &f.gemm[static_cast<std::size_t>(f.gemm_for_overrides)]
                                   : nullptr;
}

}  // namespace

std::string utc_now_iso8601() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// [SECTION] Overrides ----------------------------------------------------------------------------

namespace {

// The scenario's GPU as a cluster.gpu value: {"base": catalog name, the figures the scenario
// changed} for a catalog GPU, every figure for a custom one (docs/scenario.md, "cluster.gpu").
json gpu_value(const core::GpuSpec& g) {
  const core::GpuCatalogEntry* e = core::find_gpu(g.name);
  const bool catalog = e != nullptr && e->gpu.name == g.name;
  const core::GpuSpec* b = catalog ? &e->gpu : nullptr;
  json j = json::object();
  if (catalog)
    j["base"] = g.name;
  else
    j["name"] = g.name;
  auto put = [&](const char* key, double v, double base_v) {
    if (b == nullptr || v != base_v) j[key] = v;
  };
  put("memory_gib", static_cast<double>(g.memory_bytes) / static_cast<double>(kGiB),
      b ? static_cast<double>(b->memory_bytes) / static_cast<double>(kGiB) : 0);
  put("peak_fp32_tflops", g.peak_fp32_flops_per_s / 1e12, b ? b->peak_fp32_flops_per_s / 1e12 : 0);
  put("peak_tf32_tflops", g.peak_tf32_flops_per_s / 1e12, b ? b->peak_tf32_flops_per_s / 1e12 : 0);
  put("peak_fp16_tflops", g.peak_fp16_flops_per_s / 1e12, b ? b->peak_fp16_flops_per_s / 1e12 : 0);
  put("peak_bf16_tflops", g.peak_bf16_flops_per_s / 1e12, b ? b->peak_bf16_flops_per_s / 1e12 : 0);
  put("mem_bw_gbps", g.mem_bw_bytes_per_s / kGB, b ? b->mem_bw_bytes_per_s / kGB : 0);
  auto put_int = [&](const char* key, int v, int base_v) {  // integer keys stay JSON integers
    if (b == nullptr || v != base_v) j[key] = v;
  };
  put_int("sm_count", g.sm_count, b ? b->sm_count : 0);
  put_int("nccl_sms", g.nccl_sms, b ? b->nccl_sms : 0);
  put_int("compute_capability", g.compute_capability, b ? b->compute_capability : 0);
  put("kernel_overhead_us", static_cast<double>(g.kernel_overhead_ns) / 1e3,
      b ? static_cast<double>(b->kernel_overhead_ns) / 1e3 : 0);
  put("mem_bw_efficiency", g.mem_bw_efficiency, b ? b->mem_bw_efficiency : 0);
  for (int k = 0; k < core::kNumComputeKinds; ++k) {
    const core::EfficiencyCurve& c = g.efficiency[k];
    if (b != nullptr && c.max_efficiency == b->efficiency[k].max_efficiency &&
        c.half_flops == b->efficiency[k].half_flops && c.source == b->efficiency[k].source)
      continue;
    j["efficiency"][kKindKeys[k]] = {
        {"max_efficiency", c.max_efficiency}, {"half_flops", c.half_flops}, {"source", c.source}};
  }
  if (b == nullptr) j["source"] = g.source;
  return j;
}

}  // namespace

// docs/calibration.md, "Profile": the fitted constants in the scenario's own keys, clamped to the
// ranges the parser accepts (docs/scenario.md, "cluster.gpu", "host").
json profile_overrides(const core::Scenario& node, const Calibration& c, const Fits& f,
                       const std::string& when) {
  json o = json::object();
  json gpu = gpu_value(node.cluster.gpu);
  const std::string source = source_text(c, when);
  if (const GemmDtypeFit* gf = gemm_used(f)) {
    gpu["efficiency"]["gemm"] = {
        {"max_efficiency", std::clamp(sig(gf->fit.max_efficiency, 4), 0.001, 1.0)},
        {"half_flops", std::max(0.0, sig(gf->half_flops_at_peak_max, 4))},
        {"source", source + ", fitted on " + core::to_string(gf->dtype) + " GEMMs"}};
  }
  if (f.mem_bw_efficiency > 0)
    gpu["mem_bw_efficiency"] = std::clamp(sig(f.mem_bw_efficiency, 4), 0.01, 1.0);
  if (f.kernel_overhead_s >= 0)
    gpu["kernel_overhead_us"] = std::clamp(us3(f.kernel_overhead_s), 0.0, 1e4);
  o["cluster.gpu"] = gpu;
  // Launch latency is a host-side time: the stand-in's is its worker threads' wake-up, scaled by
  // the time scale, which says nothing about a GPU.
  if (c.measured && f.launch_latency_s >= 0)
    o["host.launch_latency_us"] = std::clamp(us3(f.launch_latency_s), 0.0, 1e6);
  return o;
}

// [SECTION] Document -----------------------------------------------------------------------------

json profile_json(const core::Scenario& node, const Calibration& c, const Fits& f,
                  const ProfileContext& ctx) {
  const core::GpuSpec& g = node.cluster.gpu;
  json doc = json::object();
  doc["format"] = kProfileFormat;
  doc["format_version"] = kProfileFormatVersion;

  json md = json::object();
  md["gpu"] = g.name;
  md["gpus_in_node"] = node.cluster.gpus_per_node;
  md["backend"] = c.backend;
  md["measured"] = c.measured;
  md["when"] = ctx.when;
  md["scenario"] = ctx.scenario_file;
  md["quick"] = ctx.quick;
  md["estimator"] = c.estimator;
  md["runtime"] = c.runtime;
  json notes = c.notes;
  if (!c.measured)
    notes.push_back(
        "the CPU stand-in's durations are the simulator's (x a time scale the "
        "calibration divides out): its fits recover the scenario's own constants");
  if (node.cluster.gpus_per_node < 2)
    notes.push_back(
        "one GPU in the node: peer copies and collectives were not measured; the "
        "simulator keeps their published sources (docs/cost-model.md, "
        "\"Calibration\")");
  md["notes"] = notes;
  doc["metadata"] = md;

  json series = json::array();
  for (const Series& s : c.series) {
    json js = {{"name", s.name}, {"kind", to_string(s.kind)}, {"gpus", s.gpus}};
    if (s.kind == SeriesKind::kGemm) js["dtype"] = core::to_string(s.dtype);
    if (s.kind == SeriesKind::kCopy) js["copy_kind"] = core::to_string(s.copy_kind);
    if (s.kind == SeriesKind::kCollective) js["collective"] = core::to_string(s.collective);
    if (!s.skipped.empty()) js["skipped"] = s.skipped;
    json pts = json::array();
    for (const Point& p : s.points) {
      json jp = {{"size", p.size}, {"seconds", p.seconds}, {"samples_s", p.samples_s}};
      if (p.flops > 0) jp["flops"] = p.flops;
      if (p.bytes > 0) jp["bytes"] = p.bytes;
      if (p.rate > 0) jp["rate"] = p.rate;
      if (p.algbw > 0) jp["algbw"] = p.algbw;
      if (s.kind == SeriesKind::kLaunchLatency) jp["enqueue_s"] = p.enqueue_s;
      pts.push_back(jp);
    }
    js["points"] = pts;
    series.push_back(js);
  }
  doc["series"] = series;

  json fits = json::object();
  fits["kernel_overhead_us"] = num_or_null(us3(f.kernel_overhead_s), f.kernel_overhead_s >= 0);
  fits["launch_latency_us"] = num_or_null(us3(f.launch_latency_s), f.launch_latency_s >= 0);
  fits["enqueue_us"] = num_or_null(us3(f.enqueue_s), f.enqueue_s >= 0);
  json gemm = json::object();
  for (const GemmDtypeFit& gf : f.gemm) {
    gemm[core::to_string(gf.dtype)] = {
        {"ok", gf.fit.ok},
        {"max_efficiency", num_or_null(gf.fit.max_efficiency, gf.fit.ok)},
        {"half_flops", num_or_null(gf.half_flops_at_peak_max, gf.fit.ok)},
        {"half_flops_at_dtype_peak", num_or_null(gf.fit.half_flops, gf.fit.ok)},
        {"residual_rms", gf.fit.residual_rms},
        {"points", gf.fit.points}};
  }
  fits["gemm"] = gemm;
  if (const GemmDtypeFit* gf = gemm_used(f)) fits["gemm_in_overrides"] = core::to_string(gf->dtype);
  fits["mem_bw_gbps"] = num_or_null(f.mem_bw_bytes_per_s / kGB, f.mem_bw_bytes_per_s > 0);
  fits["mem_bw_efficiency"] = num_or_null(f.mem_bw_efficiency, f.mem_bw_efficiency > 0);
  json copies = json::object();
  for (const CopyFit& cf : f.copies) {
    copies[cf.name] = {{"gbps", num_or_null(cf.measured.bytes_per_s / kGB, cf.measured.ok)},
                       {"latency_us", num_or_null(cf.measured.latency_s * 1e6, cf.measured.ok)},
                       {"residual_rms", cf.measured.residual_rms},
                       {"model_gbps", num_or_null(cf.model.bytes_per_s / kGB, cf.model.ok)},
                       {"model_latency_us", num_or_null(cf.model.latency_s * 1e6, cf.model.ok)}};
  }
  fits["copies"] = copies;
  json colls = json::object();
  for (const CollectiveFit& cf : f.collectives) {
    colls[cf.name] = {{"ranks", cf.ranks},
                      {"peak_busbw_gbps", cf.peak_busbw / kGB},
                      {"at_bytes", cf.at_bytes},
                      {"model_busbw_gbps", cf.model_busbw / kGB}};
  }
  fits["collectives"] = colls;
  doc["fits"] = fits;

  doc["scenario_values"] = {{"kernel_overhead_us", static_cast<double>(g.kernel_overhead_ns) / 1e3},
                            {"launch_latency_us", node.host.launch_latency_us},
                            {"mem_bw_efficiency", g.mem_bw_efficiency},
                            {"gemm",
                             {{"max_efficiency", g.efficiency[0].max_efficiency},
                              {"half_flops", g.efficiency[0].half_flops},
                              {"source", g.efficiency[0].source}}}};
  doc["overrides"] = profile_overrides(node, c, f, ctx.when);
  json left = json::array();
  left.push_back(
      "copy bandwidths: no scenario key (the simulator's routes: PCIe generation and "
      "lanes, docs/cost-model.md \"Copies\")");
  left.push_back(
      "collective bus bandwidths: no scenario key (link figures and NCCL constants, "
      "docs/cost-model.md \"Communication\")");
  if (!c.measured)
    left.push_back("launch latency: the stand-in does not model it (its worker threads' wake-up)");
  doc["not_in_overrides"] = left;
  return doc;
}

// [SECTION] Table --------------------------------------------------------------------------------

namespace {

std::string fmt(const char* f, double a) {
  char b[96];
  std::snprintf(b, sizeof b, f, a);
  return b;
}
std::string fmt2(const char* f, double a, double c) {
  char b[96];
  std::snprintf(b, sizeof b, f, a, c);
  return b;
}
std::string ratio(double measured, double ref) {
  return ref > 0 && measured > 0 ? fmt("%.2fx", measured / ref) : "-";
}
std::string size_text(double bytes) {
  if (bytes >= static_cast<double>(kGiB)) return fmt("%g GiB", bytes / static_cast<double>(kGiB));
  if (bytes >= static_cast<double>(kMiB)) return fmt("%g MiB", bytes / static_cast<double>(kMiB));
  return fmt("%g KiB", bytes / static_cast<double>(kKiB));
}

}  // namespace

void print_table(const core::Scenario& node, const Calibration& c, const Fits& f,
                 std::ostream& out) {
  const core::GpuSpec& g = node.cluster.gpu;
  out << "calibration of " << g.name << " (" << node.cluster.gpus_per_node << " GPU"
      << (node.cluster.gpus_per_node == 1 ? "" : "s") << " in the node), backend " << c.backend
      << (c.measured ? "" : " (CPU stand-in: not a measurement)") << "\n";
  const auto dev = c.runtime.find("gpu_name");
  if (dev != c.runtime.end()) {
    out << "device: " << dev->second;
    for (const char* k : {"driver_version", "runtime_version", "cublas_version", "nccl_version"}) {
      const auto it = c.runtime.find(k);
      if (it != c.runtime.end()) out << ", " << k << " " << it->second;
    }
    out << "\n";
  }
  char line[256];
  auto row = [&](const std::string& name, std::size_t points, const std::string& fitted,
                 const std::string& scen, const std::string& r) {
    std::snprintf(line, sizeof line, "%-24s %6zu  %-38s %-28s %s\n", name.c_str(), points,
                  fitted.c_str(), scen.c_str(), r.c_str());
    out << line;
  };
  std::snprintf(line, sizeof line, "%-24s %6s  %-38s %-28s %s\n", "series", "points", "fitted",
                "scenario", "ratio");
  out << line;
  auto points_of = [&](SeriesKind k, const std::string& name) {
    std::size_t n = 0;
    for (const Series& s : c.series)
      if (s.kind == k && (name.empty() || s.name == name)) n += s.points.size();
    return n;
  };
  const double cat_oh = static_cast<double>(g.kernel_overhead_ns) * 1e-9;
  row("kernel overhead", points_of(SeriesKind::kOverhead, ""),
      f.kernel_overhead_s >= 0 ? fmt("%.3f us", f.kernel_overhead_s * 1e6) : "-",
      fmt("%.3f us", cat_oh * 1e6), ratio(f.kernel_overhead_s, cat_oh));
  row("launch latency", points_of(SeriesKind::kLaunchLatency, ""),
      f.launch_latency_s >= 0
          ? fmt2("%.2f us (enqueue %.2f us)", f.launch_latency_s * 1e6, f.enqueue_s * 1e6) +
                (c.measured ? "" : " *")
          : "-",
      fmt("%.2f us", node.host.launch_latency_us),
      ratio(f.launch_latency_s * 1e6, node.host.launch_latency_us));
  const core::EfficiencyCurve& cat = g.efficiency[static_cast<int>(core::ComputeKind::kGemm)];
  for (const GemmDtypeFit& gf : f.gemm) {
    const std::string name = std::string("gemm ") + core::to_string(gf.dtype);
    row(name, points_of(SeriesKind::kGemm, name),
        gf.fit.ok ? fmt2("max %.4f, half %.4g", gf.fit.max_efficiency, gf.half_flops_at_peak_max) +
                        fmt(" (rms %.1f%%)", gf.fit.residual_rms * 100)
                  : "no fit",
        fmt2("max %.4f, half %.4g", cat.max_efficiency, cat.half_flops),
        gf.fit.ok ? ratio(gf.fit.max_efficiency, cat.max_efficiency) : "-");
  }
  row("memory bandwidth", points_of(SeriesKind::kElementwise, ""),
      f.mem_bw_efficiency > 0
          ? fmt2("eff %.4f (%.0f GB/s)", f.mem_bw_efficiency, f.mem_bw_bytes_per_s / kGB)
          : "-",
      fmt2("eff %.4f (%.0f GB/s)", g.mem_bw_efficiency,
           g.mem_bw_bytes_per_s * g.mem_bw_efficiency / kGB),
      ratio(f.mem_bw_efficiency, g.mem_bw_efficiency));
  for (const CopyFit& cf : f.copies) {
    row(cf.name, points_of(SeriesKind::kCopy, cf.name),
        cf.measured.ok
            ? fmt2("%.1f GB/s, %.2f us", cf.measured.bytes_per_s / kGB, cf.measured.latency_s * 1e6)
            : "no fit",
        cf.model.ok ? fmt("%.1f GB/s (model)", cf.model.bytes_per_s / kGB) : "-",
        cf.measured.ok && cf.model.ok ? ratio(cf.measured.bytes_per_s, cf.model.bytes_per_s) : "-");
  }
  for (const CollectiveFit& cf : f.collectives) {
    row(cf.name + " (" + std::to_string(cf.ranks) + " GPUs)",
        points_of(SeriesKind::kCollective, cf.name),
        fmt("busbw %.1f GB/s", cf.peak_busbw / kGB) + " @ " + size_text(cf.at_bytes),
        fmt("%.1f GB/s (model)", cf.model_busbw / kGB), ratio(cf.peak_busbw, cf.model_busbw));
  }
  for (const Series& s : c.series)
    if (!s.skipped.empty()) out << s.name << ": skipped (" << s.skipped << ")\n";
  if (node.cluster.gpus_per_node < 2)
    out << "peer copies and collectives: one GPU in the node, not measured (published sources "
           "kept)\n";
  if (!c.measured)
    out << "* the stand-in does not model launch latency: its value is not written to the "
           "profile's overrides\n";
}

}  // namespace csim::calibration
