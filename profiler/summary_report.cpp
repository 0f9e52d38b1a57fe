// Summary reporters: JSON (summary_to_json) and the console table (print_summary_table).
// Formulas of every printed figure: docs/summary.md.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "profiler/summary.hpp"

namespace csim::prof {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pad(std::string s, std::size_t w, bool right = true) {
  if (s.size() < w)
    s = right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
  return s;
}

double gib(Bytes b) {
  return static_cast<double>(b) / static_cast<double>(kGiB);
}

std::string backend_label(const std::string& backend) {
  if (backend == "sim") return "sim (simulated)";
  if (backend == "cpu-standin") return "cpu-standin (CPU stand-in for GPUs: not a measurement)";
  if (backend.empty()) return "unknown (imported trace: measured)";
  return backend + " (measured)";
}

std::string markers(const Summary& s, const GpuSummary& g) {
  std::string m;
  if (s.device_ids0 >= 0 && g.gpu == s.device_ids0) m += " device_ids[0]";
  if (s.output_device >= 0 && g.gpu == s.output_device)
    m += m.empty() ? " output_device" : " + output_device";
  return m;
}

nlohmann::json comm_by_group_json(const std::vector<GroupComm>& groups) {
  nlohmann::json out = nlohmann::json::array();
  for (const GroupComm& g : groups)
    out.push_back({{"group", g.group}, {"comm_s", g.comm_s}, {"exposed_s", g.exposed_s}});
  return out;
}

}  // namespace

nlohmann::json summary_to_json(const Summary& s) {
  nlohmann::json j;
  j["scenario"] = s.scenario;
  j["strategy"] = s.strategy;
  j["backend"] = s.backend;
  j["step_time_s"] = s.step_time_s;
  nlohmann::json steps = nlohmann::json::array();
  for (const TimeNs t : s.step_times_ns) steps.push_back(ns_to_s(t));
  j["step_times_s"] = steps;
  j["samples_per_step"] = s.samples_per_step;
  j["samples_per_s"] = s.samples_per_s;
  j["tflops_per_gpu"] = s.tflops_per_gpu;
  j["mfu"] = s.mfu;
  j["hfu"] = s.hfu;
  if (s.tokens_per_step > 0) {  // decoder transformers only (docs/summary.md)
    j["transformer"] = {{"params", s.model_params},
                        {"tokens_per_step", s.tokens_per_step},
                        {"tokens_per_s", s.tokens_per_s},
                        {"tokens_per_s_per_gpu", s.tokens_per_s_per_gpu},
                        {"flops_per_token",
                         {{"model", s.flops_per_token_model},
                          {"six_n_attention", s.flops_per_token_6n},
                          {"megatron", s.flops_per_token_megatron},
                          {"torchtitan", s.flops_per_token_torchtitan}}}};
    if (s.model_active_params > 0 && s.model_active_params != s.model_params)
      j["transformer"]["active_params"] = s.model_active_params;
    if (s.mtp_params > 0)
      j["transformer"]["mtp"] = {{"params", s.mtp_params}, {"active_params", s.mtp_active_params}};
    if (!s.moe_routing.empty()) {
      j["transformer"]["moe_routing"] = {
          {"kind", s.moe_routing},
          {"samples", s.moe_routing_samples},
          {"tokens_per_expert_max_over_mean", s.tokens_per_expert_max_over_mean},
          {"worst_tokens_per_expert_max_over_mean", s.worst_tokens_per_expert_max_over_mean},
          {"tokens_per_ep_rank_max_over_mean", s.tokens_per_ep_rank_max_over_mean},
          {"worst_tokens_per_ep_rank_max_over_mean", s.worst_tokens_per_ep_rank_max_over_mean},
          {"busiest_ep_rank", s.busiest_ep_rank},
          {"busiest_ep_rank_count", s.busiest_ep_rank_count}};
      if (s.moe_capacity_factor > 0) {
        j["transformer"]["moe_routing"]["capacity_factor"] = s.moe_capacity_factor;
        j["transformer"]["moe_routing"]["dropped_token_share"] = s.dropped_token_share;
        j["transformer"]["moe_routing"]["worst_dropped_token_share"] = s.worst_dropped_token_share;
      }
    }
  }
  j["window_s"] = s.window_s;
  j["window_steps"] = s.window_steps;
  j["imbalance"] = s.imbalance;
  j["has_memory_data"] = s.has_memory_data;
  if (s.oom) {
    j["oom"] = {{"gpu", s.oom->gpu},
                {"op", s.oom->op},
                {"shortfall_bytes", s.oom->shortfall_bytes},
                {"at_ns", s.oom->at_ns},
                {"would_be_peak_bytes", s.oom->would_be_peak_bytes},
                {"over_capacity_bytes", s.oom->over_capacity_bytes},
                {"steady_state", s.oom->steady_state},
                {"allocator", s.oom->allocator}};
    if (s.oom->allocator) {
      j["oom"]["expandable_segments"] = s.oom->expandable_segments;
      j["oom"]["reserved_bytes"] = s.oom->reserved_bytes;
      j["oom"]["segment_bytes"] = s.oom->segment_bytes;
      j["oom"]["allocated_bytes"] = s.oom->allocated_bytes;
    }
  } else {
    j["oom"] = nullptr;
  }
  // docs/summary.md, "Memory growth".
  nlohmann::json growth = nlohmann::json::array();
  for (const MemoryGrowth& g : s.memory_growth) {
    growth.push_back(
        {{"gpu", g.gpu},
         {"first_step", g.first_step},
         {"last_step", g.last_step},
         {"bytes_per_step", g.bytes_per_step},
         {"category", g.category},
         {"category_bytes_per_step", g.category_bytes_per_step},
         {"last_step_peak_bytes", g.last_step_peak_bytes},
         {"capacity_bytes", g.capacity_bytes},
         {"oom_step", g.oom_step >= 0 ? nlohmann::json(g.oom_step) : nlohmann::json(nullptr)}});
  }
  j["memory_growth"] = growth;
  j["device_ids0"] = s.device_ids0 >= 0 ? nlohmann::json(s.device_ids0) : nlohmann::json(nullptr);
  j["output_device"] =
      s.output_device >= 0 ? nlohmann::json(s.output_device) : nlohmann::json(nullptr);
  j["exposed_comm_s"] = s.exposed_comm_s;
  j["overlapped_comm_s"] = s.overlapped_comm_s;
  j["comm_by_group"] = comm_by_group_json(s.comm_by_group);
  if (s.bounding_gpu >= 0) {
    j["bounding"] = {{"gpu", s.bounding_gpu},
                     {"rank", s.bounding_rank},
                     {"busy_s", s.bounding_busy_s},
                     {"median_busy_s", s.median_busy_s}};
  }
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuSummary& g : s.per_gpu) {
    if (g.mirror_of >= 0) {
      // A mirrored GPU's figures are its representative's (docs/summary.md, "Rank symmetry").
      gpus.push_back({{"name", g.name},
                      {"rank", g.rank},
                      {"node", g.node},
                      {"gpu", g.gpu},
                      {"mirror_of", g.mirror_of}});
      continue;
    }
    gpus.push_back(
        {{"name", g.name},
         {"rank", g.rank},
         {"node", g.node},
         {"gpu", g.gpu},
         {"peak_bytes", g.peak_bytes},
         {"first_step_peak_bytes", g.first_step_peak_bytes},
         {"steady_state_peak_bytes", g.steady_peak_bytes},
         {"peak_by_category_bytes", g.peak_by_category.empty()
                                        ? nlohmann::json(nullptr)
                                        : nlohmann::json(g.peak_by_category)},
         {"peak_reserved_bytes",
          g.has_reserved_data ? nlohmann::json(g.peak_reserved_bytes) : nlohmann::json(nullptr)},
         {"capacity_bytes", g.capacity_bytes},
         {"has_memory_data", g.has_memory_data},
         {"busy_fraction", g.busy_fraction},
         {"compute_s", g.compute_s},
         {"comm_s", g.comm_s},
         {"copy_s", g.copy_s},
         {"host_wait_s", g.host_wait_s},
         {"idle_s", g.idle_s},
         {"exposed_comm_s", g.exposed_comm_s},
         {"overlapped_comm_s", g.overlapped_comm_s},
         {"comm_by_group", comm_by_group_json(g.comm_by_group)}});
    nlohmann::json steps = nlohmann::json::array();
    for (const StepUtilisation& u : g.by_step)
      steps.push_back({{"step", u.step},
                       {"busy_fraction", u.busy_fraction},
                       {"peak_bytes", g.has_memory_data ? nlohmann::json(u.peak_bytes)
                                                        : nlohmann::json(nullptr)}});
    gpus.back()["by_step"] = steps;
    if (s.symmetric) gpus.back()["stands_for"] = g.stands_for;
  }
  if (s.symmetric) j["gpus"] = s.gpus;
  j["per_gpu"] = gpus;
  j["notes"] = s.notes;
  return j;
}

namespace {

// "node 0 / GPU 1", with " xN" for a rank-symmetry representative standing for N GPUs.
std::string row_name(const GpuSummary& g) {
  return g.stands_for > 1 ? g.name + " x" + std::to_string(g.stands_for) : g.name;
}

std::string pad_left(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

// GPUtil's showUtilization for every step (docs/summary.md, "Utilisation over time"): per GPU,
// busy % and memory % of usable memory per step; at most 16 GPUs and 10 steps (evenly picked)
// are printed, the summary JSON has all of them.
void print_utilisation_by_step(const Summary& s, std::ostream& out) {
  std::vector<const GpuSummary*> rows;
  for (const GpuSummary& g : s.per_gpu)
    if (g.mirror_of < 0 && !g.by_step.empty()) rows.push_back(&g);
  if (rows.empty() || rows.front()->by_step.size() < 2) return;
  constexpr std::size_t kMaxRows = 16, kMaxSteps = 10;
  const std::size_t n_steps = rows.front()->by_step.size();
  std::vector<std::size_t> cols;
  for (std::size_t i = 0; i < std::min(n_steps, kMaxSteps); ++i)
    cols.push_back(n_steps <= kMaxSteps ? i : i * (n_steps - 1) / (kMaxSteps - 1));
  std::size_t name_w = 4;
  for (const GpuSummary* g : rows) name_w = std::max(name_w, row_name(*g).size());
  out << "\nutilisation per step (busy % / memory % of usable; GPUtil's showUtilization per "
         "step)\n";
  out << std::string(name_w, ' ');
  for (const std::size_t c : cols)
    out << pad_left("step " + std::to_string(rows.front()->by_step[c].step), 12);
  out << "\n";
  for (std::size_t r = 0; r < std::min(rows.size(), kMaxRows); ++r) {
    const GpuSummary& g = *rows[r];
    const std::string name = row_name(g);
    out << name << std::string(name_w - name.size(), ' ');
    for (const std::size_t c : cols) {
      if (c >= g.by_step.size()) break;
      const StepUtilisation& u = g.by_step[c];
      const std::string mem = g.has_memory_data && g.capacity_bytes > 0
                                  ? fmt("%.0f", 100.0 * static_cast<double>(u.peak_bytes) /
                                                    static_cast<double>(g.capacity_bytes))
                                  : std::string("-");
      out << pad_left(fmt("%.0f", 100 * u.busy_fraction) + " / " + mem, 12);
    }
    out << "\n";
  }
  if (rows.size() > kMaxRows)
    out << "(" << rows.size() - kMaxRows << " more GPUs in the summary JSON's per_gpu[].by_step)\n";
}

}  // namespace

void print_summary_table(const Summary& s, std::ostream& out) {
  out << "scenario:  " << (s.scenario.empty() ? "(unnamed)" : s.scenario) << "\n";
  out << "strategy:  " << (s.strategy.empty() ? "(unknown)" : s.strategy) << "\n";
  out << "backend:   " << backend_label(s.backend) << "\n";
  out << "step time: " << fmt("%.3f", s.step_time_s * 1e3) << " ms (median of "
      << (s.step_times_ns.size() > 1 ? "steps 2.." + std::to_string(s.step_times_ns.size())
                                     : std::string("step 1"))
      << ")\n";
  out << "samples/s: "
      << (s.samples_per_s > 0 ? fmt("%.1f", s.samples_per_s)
                              : std::string("(samples per step unknown)"))
      << "\n";
  if (s.tokens_per_step > 0) {
    out << "tokens/s:  " << fmt("%.0f", s.tokens_per_s) << " ("
        << fmt("%.1f", s.tokens_per_s_per_gpu) << " per GPU; " << s.tokens_per_step
        << " tokens per step)\n";
    out << "model:     " << s.model_params << " parameters"
        << (s.model_active_params > 0 && s.model_active_params != s.model_params
                ? " (" + std::to_string(s.model_active_params) + " active)"
                : std::string())
        << (s.mtp_params > 0 ? "; of them multi-token prediction " + std::to_string(s.mtp_params) +
                                   " (" + std::to_string(s.mtp_active_params) + " active)"
                             : std::string())
        << "; GFLOP per token: " << fmt("%.4g", s.flops_per_token_model / 1e9) << " model (MFU), "
        << fmt("%.4g", s.flops_per_token_6n / 1e9) << " 6N+attention, "
        << fmt("%.4g", s.flops_per_token_megatron / 1e9) << " Megatron, "
        << fmt("%.4g", s.flops_per_token_torchtitan / 1e9) << " torchtitan\n";
    // docs/summary.md, "Routing": under a capacity factor, the share of routed copies dropped.
    const std::string capacity = s.moe_capacity_factor > 0
                                     ? "; capacity factor " + fmt("%.3g", s.moe_capacity_factor) +
                                           ": " + fmt("%.2f", s.dropped_token_share * 100) +
                                           " % of routed copies dropped (worst " +
                                           fmt("%.2f", s.worst_dropped_token_share * 100) + " %)"
                                     : std::string();
    if (s.moe_routing == "balanced") {
      out << "routing:   balanced: every expert gets tokens x k / E, every EP rank the same"
          << capacity << "\n";
    } else if (!s.moe_routing.empty()) {
      // docs/summary.md, "Routing".
      out << "routing:   " << s.moe_routing << ", tokens max/mean per expert "
          << fmt("%.2f", s.tokens_per_expert_max_over_mean) << " (worst "
          << fmt("%.2f", s.worst_tokens_per_expert_max_over_mean) << "), per EP rank "
          << fmt("%.2f", s.tokens_per_ep_rank_max_over_mean) << " (worst "
          << fmt("%.2f", s.worst_tokens_per_ep_rank_max_over_mean) << ") over "
          << s.moe_routing_samples << " MoE layer passes; busiest EP rank " << s.busiest_ep_rank
          << " in " << s.busiest_ep_rank_count << capacity << "\n";
    }
  }
  if (s.mfu > 0) {
    out << "MFU:       " << fmt("%.1f", s.mfu * 100) << " % (HFU " << fmt("%.1f", s.hfu * 100)
        << " %, " << fmt("%.1f", s.tflops_per_gpu) << " model TFLOP/s per GPU)\n";
  }
  out << "\n";
  out << "per GPU, ms per step (window " << fmt("%.3f", s.window_s * 1e3)
      << " ms; exclusive: compute > comm > copy > host-wait > idle)\n";
  const char* heads[] = {"busy",      "compute", "comm",    "copy",
                         "host-wait", "idle",    "exposed", "peak / capacity GiB"};
  std::size_t name_w = 3;
  for (const GpuSummary& g : s.per_gpu) name_w = std::max(name_w, row_name(g).size());
  // Under rank symmetry a representative's row stands for its mirrors (" xN"), which are not
  // repeated here.
  out << pad("GPU", name_w, false);
  const std::size_t widths[] = {7, 10, 10, 10, 10, 10, 10, 22};
  for (int i = 0; i < 8; ++i) out << pad(heads[i], widths[i]);
  out << "\n";
  for (const GpuSummary& g : s.per_gpu) {
    if (g.mirror_of >= 0) continue;
    out << pad(row_name(g), name_w, false);
    out << pad(fmt("%.1f%%", g.busy_fraction * 100), widths[0]);
    out << pad(fmt("%.3f", g.compute_s * 1e3), widths[1]);
    out << pad(fmt("%.3f", g.comm_s * 1e3), widths[2]);
    out << pad(fmt("%.3f", g.copy_s * 1e3), widths[3]);
    out << pad(fmt("%.3f", g.host_wait_s * 1e3), widths[4]);
    out << pad(fmt("%.3f", g.idle_s * 1e3), widths[5]);
    out << pad(fmt("%.3f", g.exposed_comm_s * 1e3), widths[6]);
    std::string mem =
        !g.has_memory_data
            ? std::string("no memory data")
            : fmt("%.2f", gib(g.peak_bytes)) + " / " +
                  (g.capacity_bytes > 0 ? fmt("%.2f", gib(g.capacity_bytes)) : std::string("?"));
    out << pad(mem, widths[7]) << markers(s, g) << "\n";
  }
  out << "\ncommunication per step: exposed " << fmt("%.3f", s.exposed_comm_s * 1e3)
      << " ms, overlapped with compute " << fmt("%.3f", s.overlapped_comm_s * 1e3)
      << " ms (sums over GPUs)\n";
  if (!s.comm_by_group.empty()) {
    // Most exposed first (docs/summary.md, "Communication by group").
    std::vector<GroupComm> groups = s.comm_by_group;
    std::stable_sort(groups.begin(), groups.end(), [](const GroupComm& a, const GroupComm& b) {
      return a.exposed_s > b.exposed_s;
    });
    out << "  by group:";
    const char* sep = " ";
    for (const GroupComm& g : groups) {
      out << sep << g.group << " " << fmt("%.3f", g.comm_s * 1e3) << " ms (exposed "
          << fmt("%.3f", g.exposed_s * 1e3) << ")";
      sep = ", ";
    }
    out << "\n";
  }
  if (s.has_memory_data) {
    out << "imbalance (max/mean of peak memory): " << fmt("%.2f", s.imbalance) << "x";
    // Name the fullest GPU and its DataParallel roles.
    const GpuSummary* top = nullptr;
    for (const GpuSummary& g : s.per_gpu) {
      if (g.has_memory_data && (top == nullptr || g.peak_bytes > top->peak_bytes)) top = &g;
    }
    if (top != nullptr) {
      out << " — fullest: GPU " << top->gpu;
      const bool is_ids0 = s.device_ids0 >= 0 && top->gpu == s.device_ids0;
      const bool is_out = s.output_device >= 0 && top->gpu == s.output_device;
      if (is_ids0 && is_out) {
        out << " = device_ids[0] and output_device";
      } else if (is_ids0) {
        out << " = device_ids[0]";
      } else if (is_out) {
        out << " = output_device";
      }
    }
    out << "\n";
  } else {
    out << "no memory data\n";
  }
  // Caching allocator (docs/memory.md): peak reserved next to peak allocated.
  for (const GpuSummary& g : s.per_gpu) {
    if (g.mirror_of >= 0 || !g.has_reserved_data) continue;
    out << "memory " << row_name(g) << ": peak allocated " << fmt("%.3f", gib(g.peak_bytes))
        << " GiB, peak reserved " << fmt("%.3f", gib(g.peak_reserved_bytes))
        << " GiB (caching allocator)\n";
  }
  print_utilisation_by_step(s, out);
  // Memory growth (docs/summary.md, "Memory growth").
  for (const MemoryGrowth& g : s.memory_growth) {
    out << "memory grows on GPU " << g.gpu << ": " << fmt("%.0f", g.bytes_per_step) << " bytes ("
        << fmt("%.3f", g.bytes_per_step / static_cast<double>(kMiB)) << " MiB) per step over steps "
        << g.first_step << ".." << g.last_step;
    if (!g.category.empty())
      out << ", mostly " << g.category << " (" << fmt("%.0f", g.category_bytes_per_step)
          << " bytes/step)";
    if (g.oom_step >= 0) {
      out << "; at this rate it runs out of memory at step " << g.oom_step;
    } else {
      out << "; capacity unknown";
    }
    out << "\n";
  }
  // The bounding GPU, when it is busier than the median GPU by more than 1 %.
  if (s.bounding_gpu >= 0 && s.bounding_busy_s > 1.01 * s.median_busy_s) {
    out << "step bounded by GPU " << s.bounding_gpu << " (rank " << s.bounding_rank
        << "): compute + copy " << fmt("%.3f", s.bounding_busy_s * 1e3) << " ms per step, "
        << fmt("%.1f", (s.bounding_busy_s / s.median_busy_s - 1) * 100)
        << " % above the median GPU (" << fmt("%.3f", s.median_busy_s * 1e3) << " ms)\n";
  }
  // docs/memory.md, "First-step and steady-state peaks": a one-step run's table shows the steady
  // state; its first step (Adam's state not yet allocated) peaks lower.
  for (const GpuSummary& g : s.per_gpu) {
    if (g.stands_for == 0 || !g.steady_projected || g.first_step_peak_bytes >= g.peak_bytes)
      continue;
    out << "memory " << row_name(g) << ": steady-state peak " << fmt("%.2f", gib(g.peak_bytes))
        << " GiB (from step 2 on, with the optimizer state resident); this one-step run peaks at "
        << fmt("%.2f", gib(g.first_step_peak_bytes)) << " GiB in its first step\n";
  }
  if (s.oom && s.oom->allocator) {
    // docs/memory.md, "OOM verdict": fragmentation, not allocated bytes.
    out << "OOM: GPU " << s.oom->gpu << (s.oom->op.empty() ? "" : " at op " + s.oom->op)
        << ": the caching allocator cannot serve it (fragmentation): reserved "
        << fmt("%.3f", gib(s.oom->reserved_bytes)) << " GiB + "
        << (s.oom->expandable_segments ? "pages of " : "a segment of ")
        << fmt("%.3f", gib(s.oom->segment_bytes)) << " GiB > usable "
        << fmt("%.3f", gib(s.oom->reserved_bytes + s.oom->segment_bytes - s.oom->shortfall_bytes))
        << " GiB after releasing its cache, with " << fmt("%.3f", gib(s.oom->allocated_bytes))
        << " GiB allocated; the step would reserve " << fmt("%.2f", gib(s.oom->would_be_peak_bytes))
        << " GiB, " << fmt("%.2f", gib(s.oom->over_capacity_bytes)) << " GiB over capacity"
        << (s.oom->expandable_segments
                ? ""
                : " (with the default allocator; expandable segments run out too, "
                  "docs/memory.md \"OOM verdict\")")
        << "\n";
  } else if (s.oom) {
    out << "OOM: GPU " << s.oom->gpu << (s.oom->op.empty() ? "" : " at op " + s.oom->op)
        << (s.oom->steady_state ? " in the steady state (step 2 on)" : "")
        << ": the first allocation that does not fit is short by "
        << fmt("%.3f", gib(s.oom->shortfall_bytes)) << " GiB (" << s.oom->shortfall_bytes
        << " bytes)";
    if (s.oom->would_be_peak_bytes > 0)
      out << "; the step would peak at " << fmt("%.2f", gib(s.oom->would_be_peak_bytes)) << " GiB, "
          << fmt("%.2f", gib(s.oom->over_capacity_bytes)) << " GiB over capacity";
    out << "\n";
  }
  for (const std::string& n : s.notes) {
    if (n != "no memory data") out << "note: " << n << "\n";
  }
}

}  // namespace csim::prof
