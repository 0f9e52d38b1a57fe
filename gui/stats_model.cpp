// Statistics and the comparison table (stats_model.hpp); formulas in docs/simview.md.
#include "gui/stats_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>

#include "core/hardware/gpu_catalog.hpp"
#include "gui/time_axis.hpp"

namespace csim::gui {
namespace {

std::string json_string(const nlohmann::json& j, const char* a, const char* b = nullptr) {
  if (!j.is_object() || !j.contains(a)) return {};
  const nlohmann::json& x = j.at(a);
  if (b == nullptr) return x.is_string() ? x.get<std::string>() : std::string();
  return x.is_object() && x.contains(b) && x.at(b).is_string() ? x.at(b).get<std::string>()
                                                               : std::string();
}

// Dense peak of the trace's GPU for the dtype its precision recipe computes in (docs/simview.md).
double peak_flops(const prof::Trace& t) {
  const std::string gpu = json_string(t.metadata, "cluster", "gpu");
  if (gpu.empty()) return 0;
  const core::GpuCatalogEntry* e = core::find_gpu(gpu);
  if (e == nullptr) return 0;
  const std::string p = json_string(t.metadata, "precision");
  core::Dtype d = core::Dtype::kFp32;
  if (p == "bf16" || p == "fp8") d = core::Dtype::kBf16;  // fp8: MFU against the bf16 peak
  if (p == "fp16" || p == "amp") d = core::Dtype::kFp16;
  if (p == "amp" && json_string(t.metadata, "amp_dtype") == "bf16") d = core::Dtype::kBf16;
  return e->gpu.peak_flops_per_s(d);
}

double flops_arg(const prof::TraceEvent& e) {
  for (const prof::Arg& a : e.args) {
    if (a.key != "flops") continue;
    if (const auto* d = std::get_if<double>(&a.value)) return *d;
    if (const auto* i = std::get_if<std::int64_t>(&a.value)) return static_cast<double>(*i);
  }
  return 0;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Window {
  TimeNs start = 0, end = 0;
};

// The summary's averaging window (docs/summary.md, "Steps"; profiler/summary.cpp): step N =
// [min start, max end] of every ProfilerStep#N (cat user_annotation), taken from the previous
// step's end when step N−1 exists; the window is every step but the first found, or the one step;
// the whole trace when there are no steps. Recomputed here because the Summary keeps only its
// length, and the host GIL wait must be averaged over the same steps as the GPU figures.
std::vector<Window> summary_window(const prof::Trace& t) {
  std::map<std::int64_t, Window> by_n;
  for (const prof::TraceEvent& e : t.events) {
    std::int64_t n = 0;
    if (e.cat != "user_annotation" || !profiler_step_number(e.name, &n)) continue;
    auto [it, fresh] = by_n.try_emplace(n, Window{e.ts_ns, e.ts_ns + e.dur_ns});
    if (!fresh) {
      it->second.start = std::min(it->second.start, e.ts_ns);
      it->second.end = std::max(it->second.end, e.ts_ns + e.dur_ns);
    }
  }
  std::vector<Window> w;
  if (by_n.empty()) {
    bool any = false;
    Window all;
    for (const prof::TraceEvent& e : t.events) {
      all.start = any ? std::min(all.start, e.ts_ns) : e.ts_ns;
      all.end = any ? std::max(all.end, e.ts_ns + e.dur_ns) : e.ts_ns + e.dur_ns;
      any = true;
    }
    if (any) w.push_back(all);
    return w;
  }
  const Window* prev = nullptr;
  std::int64_t prev_n = 0;
  for (const auto& [n, step] : by_n) {
    const bool chained = prev != nullptr && n == prev_n + 1;
    if (by_n.size() == 1 || prev != nullptr)
      w.push_back(Window{chained ? prev->end : step.start, step.end});
    prev = &step;
    prev_n = n;
  }
  return w;
}

std::string thread_name(const prof::Trace& t, std::int32_t pid, std::int32_t tid) {
  const prof::ProcessInfo* pi = t.process(pid);
  const prof::ThreadInfo* ti = t.thread(pid, tid);
  std::string s = pi != nullptr && !pi->name.empty() ? pi->name : "pid " + std::to_string(pid);
  s += " / ";
  s += ti != nullptr && !ti->name.empty() ? ti->name : "tid " + std::to_string(tid);
  return s;
}

}  // namespace

double exposed_group_comm_s(const prof::Summary& s, std::string_view group) {
  for (const prof::GroupComm& g : s.comm_by_group)
    if (g.group == group) return g.exposed_s;
  return 0;
}

StatsModel build_stats(const prof::Trace& trace, const prof::Summary& s) {
  StatsModel m;
  m.summary = s;
  m.label = s.scenario;
  if (trace.metadata.is_object() && trace.metadata.contains("strategy")) {
    const std::string l = json_string(trace.metadata, "strategy", "label");
    if (!l.empty()) m.label = l;
  }
  // Where the timings come from, always in view: a stand-in run must never pass for a measurement.
  if (s.backend == "sim")
    m.label += " [simulated]";
  else if (s.backend == "cpu-standin")
    m.label += " [CPU stand-in: not a measurement]";
  else if (!s.backend.empty())
    m.label += " [measured: " + s.backend + "]";
  for (const prof::GpuSummary& g : s.per_gpu) {
    GpuStats x;
    x.name = g.name;
    x.part_s[static_cast<int>(Part::kCompute)] = g.compute_s;
    x.part_s[static_cast<int>(Part::kCommunication)] = g.comm_s;
    x.part_s[static_cast<int>(Part::kCopy)] = g.copy_s;
    x.part_s[static_cast<int>(Part::kGilWait)] = g.host_wait_s;
    x.part_s[static_cast<int>(Part::kIdle)] = g.idle_s;
    for (const double v : x.part_s) x.window_s += v;
    x.bubble_fraction = x.window_s > 0 ? g.idle_s / x.window_s : 0;
    const bool d0 = s.device_ids0 >= 0 && g.gpu == s.device_ids0;
    const bool od = s.output_device >= 0 && g.gpu == s.output_device;
    x.role = d0 && od ? "device_ids[0] + output_device"
                      : (d0 ? "device_ids[0]" : (od ? "output_device" : ""));
    m.bubble_fraction += x.bubble_fraction;
    m.gpu_gil_wait_s += g.host_wait_s;
    m.gpus.push_back(std::move(x));
  }
  if (!m.gpus.empty()) m.bubble_fraction /= static_cast<double>(m.gpus.size());

  // Host threads' GIL waits: their "GIL wait" events clipped to the window, per step.
  const std::vector<Window> window = summary_window(trace);
  std::map<std::pair<std::int32_t, std::int32_t>, TimeNs> waited;
  for (const prof::TraceEvent& e : trace.events) {
    if (e.cls != prof::EventClass::kGilWait || e.dur_ns <= 0) continue;
    TimeNs in = 0;
    for (const Window& w : window)
      in += std::max<TimeNs>(0, std::min(w.end, e.ts_ns + e.dur_ns) - std::max(w.start, e.ts_ns));
    if (in > 0) waited[{e.pid, e.tid}] += in;
  }
  const double per_step = window.empty() ? 0.0 : 1.0 / static_cast<double>(window.size());
  for (const auto& [lane, ns] : waited) {
    const double s_per_step = ns_to_s(ns) * per_step;
    m.host_gil_wait_s += s_per_step;
    m.gil_wait_by_thread.push_back({thread_name(trace, lane.first, lane.second), s_per_step});
  }
  std::stable_sort(m.gil_wait_by_thread.begin(), m.gil_wait_by_thread.end(),
                   [](const StatsModel::ThreadWait& a, const StatsModel::ThreadWait& b) {
                     return a.wait_s > b.wait_s;
                   });

  // Under rank symmetry a simulated GPU's kernels stand for its mirrors' too (docs/summary.md,
  // "Rank symmetry"): count them stands_for times.
  std::map<std::int32_t, double> weight;
  for (const prof::GpuSummary& g : s.per_gpu) {
    if (g.mirror_of < 0) weight[g.pid] = std::max(1, g.stands_for);
  }
  double flops = 0;
  for (const prof::TraceEvent& e : trace.events) {
    if (e.cls != prof::EventClass::kCompute) continue;
    const auto w = weight.find(e.pid);
    flops += flops_arg(e) * (w == weight.end() ? 1.0 : w->second);
  }
  const double steps = std::max<double>(1.0, static_cast<double>(s.step_times_ns.size()));
  m.executed_flops_per_step = flops / steps;
  if (s.step_time_s > 0) m.achieved_flops_per_s = m.executed_flops_per_step / s.step_time_s;
  m.peak_flops_per_gpu = peak_flops(trace);
  if (m.peak_flops_per_gpu > 0 && !s.per_gpu.empty() && m.executed_flops_per_step > 0) {
    m.mfu = m.achieved_flops_per_s / (static_cast<double>(s.per_gpu.size()) * m.peak_flops_per_gpu);
  }
  // The summary's MFU (model FLOPs from the executor's metadata, docs/summary.md "MFU and HFU")
  // takes precedence: it excludes recomputation, which the executed-FLOPs estimate above counts.
  if (s.mfu > 0) m.mfu = s.mfu;
  return m;
}

// [SECTION] Compare
// ---------------------------------------------------------------------------------

std::vector<CompareRow> compare_table(const std::vector<const StatsModel*>& runs) {
  std::vector<CompareRow> rows;
  auto add = [&](const char* metric, bool lower_better, auto value, auto format) {
    CompareRow r;
    r.metric = metric;
    r.lower_is_better = lower_better;
    for (const StatsModel* s : runs) {
      const double v = value(*s);
      r.raw.push_back(v);
      r.values.push_back(format(v));
    }
    if (r.raw.size() >= 2 && r.raw.front() != 0 && std::isfinite(r.raw.back())) {
      const double pct = (r.raw.back() - r.raw.front()) / std::fabs(r.raw.front()) * 100.0;
      r.delta = fmt("%+.1f %%", pct);
    }
    rows.push_back(std::move(r));
  };
  auto time_fmt = [](double s) { return format_time(s * 1e9); };
  auto pct_fmt = [](double f) { return f < 0 ? std::string("n/a") : fmt("%.1f %%", f * 100); };
  add(
      "step time", true, [](const StatsModel& s) { return s.summary.step_time_s; }, time_fmt);
  add(
      "samples/s", false, [](const StatsModel& s) { return s.summary.samples_per_s; },
      [](double v) { return fmt("%.1f", v); });
  add(
      "mean GPU busy", false,
      [](const StatsModel& s) {
        double b = 0;
        for (const auto& g : s.summary.per_gpu) b += g.busy_fraction;
        return s.summary.per_gpu.empty() ? 0.0 : b / static_cast<double>(s.summary.per_gpu.size());
      },
      pct_fmt);
  add(
      "exposed comm (sum of GPUs)", true,
      [](const StatsModel& s) { return s.summary.exposed_comm_s; }, time_fmt);
  add(
      "GIL wait, host threads (sum)", true, [](const StatsModel& s) { return s.host_gil_wait_s; },
      time_fmt);
  add(
      "GPU idle on GIL wait (sum)", true, [](const StatsModel& s) { return s.gpu_gil_wait_s; },
      time_fmt);
  add(
      "bubble (idle)", true, [](const StatsModel& s) { return s.bubble_fraction; }, pct_fmt);
  add(
      "MFU", false, [](const StatsModel& s) { return s.mfu; }, pct_fmt);
  add(
      "peak memory (max GPU)", true,
      [](const StatsModel& s) {
        double p = 0;
        for (const auto& g : s.summary.per_gpu) p = std::max(p, static_cast<double>(g.peak_bytes));
        return p;
      },
      [](double v) { return format_bytes(v); });
  add(
      "memory imbalance", true, [](const StatsModel& s) { return s.summary.imbalance; },
      [](double v) { return v > 0 ? fmt("%.2fx", v) : std::string("n/a"); });
  // Expert parallelism (docs/summary.md, "Routing"): only when some run has it.
  const bool moe = std::any_of(runs.begin(), runs.end(),
                               [](const StatsModel* s) { return !s->summary.moe_routing.empty(); });
  if (!moe) return rows;
  add(
      "tokens/s per GPU", false, [](const StatsModel& s) { return s.summary.tokens_per_s_per_gpu; },
      [](double v) { return fmt("%.0f", v); });
  add(
      "tokens max/mean per EP rank", true,
      [](const StatsModel& s) { return s.summary.tokens_per_ep_rank_max_over_mean; },
      [](double v) { return v > 0 ? fmt("%.2fx", v) : std::string("n/a"); });
  add(
      "exposed ep comm (sum of GPUs)", true,
      [](const StatsModel& s) { return exposed_group_comm_s(s.summary, "ep"); }, time_fmt);
  return rows;
}

std::vector<std::int64_t> common_steps(const std::vector<const TimelineModel*>& traces) {
  std::vector<std::int64_t> common;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    std::vector<std::int64_t> mine;
    for (const StepMark& st : traces[i]->steps) mine.push_back(st.n);
    std::sort(mine.begin(), mine.end());
    if (i == 0) {
      common = mine;
      continue;
    }
    std::vector<std::int64_t> both;
    std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(),
                          std::back_inserter(both));
    common = std::move(both);
  }
  return common;
}

std::vector<double> align_offsets_ns(const std::vector<const TimelineModel*>& traces,
                                     std::int64_t step) {
  std::vector<double> off(traces.size(), 0.0);
  if (step <= 0) return off;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const auto it = std::find_if(traces[i]->steps.begin(), traces[i]->steps.end(),
                                 [step](const StepMark& st) { return st.n == step; });
    if (it == traces[i]->steps.end()) return std::vector<double>(traces.size(), 0.0);
    off[i] = static_cast<double>(it->start - traces[i]->t_min);
  }
  return off;
}

}  // namespace csim::gui
