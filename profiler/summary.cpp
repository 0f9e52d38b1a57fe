// summarize(): step times, the per-GPU exclusive time split, communication overlap, memory peaks,
// imbalance and the OOM verdict, from a Trace alone. Formulas: docs/summary.md, cited per section.
//
// Index:
//  [SECTION] Metadata keys
//  [SECTION] Steps (docs/summary.md "Steps")
//  [SECTION] Time split (docs/summary.md "Time split" and "Communication overlap")
//  [SECTION] Memory (docs/summary.md "Memory", "Imbalance", "OOM")
//  [SECTION] summarize
#include "profiler/summary.hpp"
#include "profiler/rank_symmetry.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>

namespace csim::prof {
namespace {

// [SECTION] Metadata keys ------------------------------------------------------------------------

std::string string_at(const nlohmann::json& j, const char* a, const char* b = nullptr) {
  if (!j.is_object()) return {};
  const auto it = j.find(a);
  if (it == j.end()) return {};
  if (b == nullptr) return it->is_string() ? it->get<std::string>() : std::string();
  if (!it->is_object()) return {};
  const auto jt = it->find(b);
  return jt != it->end() && jt->is_string() ? jt->get<std::string>() : std::string();
}

// [SECTION] Steps --------------------------------------------------------------------------------

struct Step {
  std::int64_t n = 0;  // N of ProfilerStep#N
  TimeNs start = 0, end = 0;
};

// "ProfilerStep#12" → 12; false for other names.
bool step_number(const std::string& name, std::int64_t* n) {
  static constexpr std::string_view kPrefix = "ProfilerStep#";
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  const char* first = name.data() + kPrefix.size();
  const char* last = name.data() + name.size();
  const auto r = std::from_chars(first, last, *n);
  return r.ec == std::errc() && r.ptr == last;
}

// Step N's interval is [min start, max end] over every event named ProfilerStep#N (cat
// user_annotation) in all processes.
std::vector<Step> find_steps(const Trace& t) {
  std::map<std::int64_t, Step> by_n;
  // A string_view compares lengths first: most events are rejected without reading their category.
  constexpr std::string_view kAnnotation = "user_annotation";
  for (const TraceEvent& e : t.events) {
    std::int64_t n = 0;
    if (std::string_view(e.cat) != kAnnotation || !step_number(e.name, &n)) continue;
    auto [it, fresh] = by_n.try_emplace(n, Step{n, e.ts_ns, e.ts_ns + e.dur_ns});
    if (!fresh) {
      it->second.start = std::min(it->second.start, e.ts_ns);
      it->second.end = std::max(it->second.end, e.ts_ns + e.dur_ns);
    }
  }
  std::vector<Step> steps;
  for (const auto& [n, s] : by_n) steps.push_back(s);
  return steps;
}

double median_s(std::vector<TimeNs> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  if (v.size() % 2 == 1) return ns_to_s(v[m]);
  return (ns_to_s(v[m - 1]) + ns_to_s(v[m])) / 2.0;
}

// [SECTION] Time split ---------------------------------------------------------------------------

struct Interval {
  TimeNs start, end;
};

struct Split {
  TimeNs compute = 0, comm = 0, copy = 0, host_wait = 0, idle = 0, overlapped = 0;
};

// docs/summary.md "Time split", "Communication overlap". Sweep over the boundaries of this pid's
// intervals: each elementary segment inside the window goes to the first active class of
// compute > comm > copy > host-wait, else idle; so the five sum to the window's length exactly.
// Overlapped communication = segments where comm and compute are both active.
//
// The boundaries of a pid's events are sorted once (Boundaries) and swept once for the whole
// window and every step together (the utilisation over time): the sweep merges the windows' own
// boundaries in, so the segments are those of one sort of all points together.
enum : int { kCompute = 0, kComm = 1, kCopy = 2, kHostWait = 3, kWindow = 4, kKinds = 5 };
struct Point {
  TimeNs t;
  int kind;
  int delta;
};
using Boundaries = std::vector<Point>;  // sorted by t

int boundary_kind(EventClass c) {
  switch (c) {
    case EventClass::kCompute:
      return kCompute;
    case EventClass::kCommunication:
      return kComm;
    case EventClass::kCopy:
      return kCopy;
    case EventClass::kGilWait:
      return kHostWait;
    default:
      return -1;
  }
}

// Per lane (tid), its starts and then its ends: a lane's events come in time order and do not
// overlap, so each of these segments is sorted already (one that is not is sorted), and the
// segments are merged pairwise instead of sorting every point of the GPU (its lanes interleave in
// the trace, so the points in trace order form many short runs).
Boundaries boundaries(const std::vector<const TraceEvent*>& events) {
  std::vector<std::int32_t> lanes;  // tids in first-seen order
  std::vector<std::vector<const TraceEvent*>> of_lane;
  std::int32_t last_tid = 0;
  std::size_t last = 0, total = 0;
  for (const TraceEvent* ep : events) {
    if (ep->dur_ns <= 0 || boundary_kind(ep->cls) < 0) continue;
    if (lanes.empty() || ep->tid != last_tid) {
      last = std::find(lanes.begin(), lanes.end(), ep->tid) - lanes.begin();
      if (last == lanes.size()) {
        lanes.push_back(ep->tid);
        of_lane.emplace_back();
      }
      last_tid = ep->tid;
    }
    of_lane[last].push_back(ep);
    ++total;
  }
  // The order among equal times does not matter: a sweep applies them all before measuring.
  const auto by_t = [](const Point& a, const Point& b) { return a.t < b.t; };
  Boundaries pts;
  pts.reserve(2 * total);
  std::vector<std::size_t> runs{0};
  for (const std::vector<const TraceEvent*>& lane : of_lane) {
    for (const bool start : {true, false}) {
      for (const TraceEvent* ep : lane) {
        const int kind = boundary_kind(ep->cls);
        pts.push_back(start ? Point{ep->ts_ns, kind, +1} : Point{ep->ts_ns + ep->dur_ns, kind, -1});
      }
      const auto from = pts.begin() + static_cast<std::ptrdiff_t>(runs.back());
      if (!std::is_sorted(from, pts.end(), by_t)) std::sort(from, pts.end(), by_t);
      runs.push_back(pts.size());
    }
  }
  while (runs.size() > 2) {  // merge neighbouring runs pairwise
    std::vector<std::size_t> next{0};
    for (std::size_t k = 0; k + 2 < runs.size(); k += 2) {
      const auto at = [&](std::size_t r) { return pts.begin() + static_cast<std::ptrdiff_t>(r); };
      std::inplace_merge(at(runs[k]), at(runs[k + 1]), at(runs[k + 2]), by_t);
      next.push_back(runs[k + 2]);
    }
    if (runs.size() % 2 == 0) next.push_back(runs.back());  // an odd run left over
    runs = std::move(next);
  }
  return pts;
}

// The split of `window` (a union of intervals) and of each of `steps` alone, in one sweep: the
// points of the windows and of the steps are merged with the events' (Boundaries), and each
// elementary segment between consecutive points goes to the union window when it is inside one of
// its intervals and to every step that contains it. A window's segments in this sweep are its
// segments in a sweep of its own points alone, cut further only where no class and no window
// changes, so its integer sums are the same.
struct Splits {
  Split window;
  std::vector<Split> steps;
};
Splits split_time(const Boundaries& pts, const std::vector<Interval>& window,
                  const std::vector<Interval>& steps) {
  struct WindowPoint {
    TimeNs t;
    int window;  // -1: `window`, else the step's index
    int delta;
  };
  std::vector<WindowPoint> win;
  win.reserve(2 * (window.size() + steps.size()));
  for (const Interval& w : window) {
    if (w.end <= w.start) continue;
    win.push_back({w.start, -1, +1});
    win.push_back({w.end, -1, -1});
  }
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const Interval& w = steps[k];
    if (w.end <= w.start) continue;
    win.push_back({w.start, static_cast<int>(k), +1});
    win.push_back({w.end, static_cast<int>(k), -1});
  }
  std::sort(win.begin(), win.end(),
            [](const WindowPoint& a, const WindowPoint& b) { return a.t < b.t; });
  std::array<int, kKinds> active{};
  int in_window = 0;
  std::vector<int> step_count(steps.size(), 0);
  std::vector<int> open;  // the steps with step_count > 0
  Splits out;
  out.steps.resize(steps.size());
  std::size_t i = 0, j = 0;  // next point of pts, of win
  const auto next_t = [&] {
    if (i == pts.size()) return win[j].t;
    if (j == win.size()) return pts[i].t;
    return std::min(pts[i].t, win[j].t);
  };
  const auto add = [&](Split& s, TimeNs len) {
    if (active[kCompute] > 0) {
      s.compute += len;
      if (active[kComm] > 0) s.overlapped += len;
    } else if (active[kComm] > 0) {
      s.comm += len;
    } else if (active[kCopy] > 0) {
      s.copy += len;
    } else if (active[kHostWait] > 0) {
      s.host_wait += len;
    } else {
      s.idle += len;
    }
  };
  while (i < pts.size() || j < win.size()) {
    const TimeNs now = next_t();
    for (; i < pts.size() && pts[i].t == now; ++i) active[pts[i].kind] += pts[i].delta;
    for (; j < win.size() && win[j].t == now; ++j) {
      const WindowPoint& w = win[j];
      if (w.window < 0) {
        in_window += w.delta;
        continue;
      }
      int& c = step_count[static_cast<std::size_t>(w.window)];
      const bool was_open = c > 0;
      c += w.delta;
      if (!was_open && c > 0) open.push_back(w.window);
      if (was_open && c <= 0) open.erase(std::find(open.begin(), open.end(), w.window));
    }
    if (i == pts.size() && j == win.size()) break;
    if (in_window <= 0 && open.empty()) {
      if (j == win.size()) break;  // no window left: the remaining segments count for nothing
      continue;
    }
    const TimeNs len = next_t() - now;
    if (len <= 0) continue;
    if (in_window > 0) add(out.window, len);
    for (const int k : open) add(out.steps[static_cast<std::size_t>(k)], len);
  }
  return out;
}

// [SECTION] Memory -------------------------------------------------------------------------------

struct MemoryPeak {
  bool any = false;
  Bytes peak = 0;
  TimeNs first_over_capacity = -1;       // first sample above capacity (-1: never)
  std::map<std::string, Bytes> at_peak;  // the other series of the first sample at the peak
};

// docs/summary.md "Memory", "OOM". Counters named "memory…" on this pid: the "allocated" series, or
// the sum of all series when a sample has no "allocated" (per-category counters only).
MemoryPeak memory_peak(std::vector<const CounterSample*> samples, Bytes capacity) {
  MemoryPeak m;
  std::stable_sort(
      samples.begin(), samples.end(),
      [](const CounterSample* a, const CounterSample* b) { return a->ts_ns < b->ts_ns; });
  for (const CounterSample* c : samples) {
    double v = 0;
    bool found = false;
    for (const auto& [series, value] : c->values) {
      if (series == "allocated") {
        v = value;
        found = true;
      }
    }
    if (!found) {
      for (const auto& [series, value] : c->values) v += value;
    }
    const auto bytes = static_cast<Bytes>(v);
    if (!m.any || bytes > m.peak) {
      m.at_peak.clear();
      if (found) {
        for (const auto& [series, value] : c->values)
          if (series != "allocated") m.at_peak[series] = static_cast<Bytes>(value);
      }
    }
    m.any = true;
    m.peak = std::max(m.peak, bytes);
    if (capacity > 0 && bytes > capacity && m.first_over_capacity < 0) {
      m.first_over_capacity = c->ts_ns;
    }
  }
  return m;
}

// Per step (docs/summary.md, "Utilisation over time"): busy = (compute + comm + copy) / |step|,
// with the time split of "Time split" on the step alone; peak = the largest allocated total of the
// samples inside the step, starting from the level the last earlier sample left.
std::vector<StepUtilisation> utilisation_by_step(const std::vector<Split>& splits,
                                                 std::vector<const CounterSample*> memory,
                                                 const std::vector<std::int64_t>& step_ns,
                                                 const std::vector<Interval>& intervals) {
  std::stable_sort(
      memory.begin(), memory.end(),
      [](const CounterSample* a, const CounterSample* b) { return a->ts_ns < b->ts_ns; });
  std::vector<StepUtilisation> out;
  std::size_t m = 0;
  const CounterSample* before = nullptr;
  for (std::size_t k = 0; k < intervals.size(); ++k) {
    const Interval& w = intervals[k];
    StepUtilisation u;
    u.step = step_ns[k];
    const Split& sp = splits[k];
    const TimeNs len = w.end - w.start;
    u.busy_fraction =
        len > 0 ? static_cast<double>(sp.compute + sp.comm + sp.copy) / static_cast<double>(len)
                : 0.0;
    std::vector<const CounterSample*> inside;
    while (m < memory.size() && memory[m]->ts_ns < w.start) before = memory[m++];
    if (before) inside.push_back(before);
    for (std::size_t i = m; i < memory.size() && memory[i]->ts_ns <= w.end; ++i)
      inside.push_back(memory[i]);
    u.peak_bytes = memory_peak(inside, 0).peak;
    out.push_back(u);
  }
  return out;
}

// Reserved bytes of the caching-allocator counter (docs/summary.md, "Memory"): its "reserved"
// series.
Bytes reserved_peak(const std::vector<const CounterSample*>& samples) {
  double peak = 0;
  for (const CounterSample* c : samples) {
    for (const auto& [series, value] : c->values) {
      if (series == "reserved") peak = std::max(peak, value);
    }
  }
  return static_cast<Bytes>(peak);
}

// docs/summary.md, "Memory growth". E_k = allocated (and each category) at the end of step k: the
// last sample at or before end_k. The trace's last step is left out (a run's final step frees
// what a next step would have kept, such as a prefetched batch). Memory grows when E_k > E_{k-1}
// for every compared step after the first (at least two such steps); growth = (E_M - E_1) /
// (M - 1) over the compared steps 1..M. The peak of step M is the largest sample in
// (end_{M-1}, end_M] or E_{M-1}; at the same rate step M + j peaks at P_M + j * growth, so the
// first step above capacity C is M + floor((C - P_M) / growth) + 1.
std::optional<MemoryGrowth> memory_growth(std::vector<const CounterSample*> samples,
                                          const std::vector<Step>& steps, Bytes capacity) {
  if (steps.size() < 4 || samples.empty()) return std::nullopt;
  const std::size_t compared = steps.size() - 1;
  std::stable_sort(
      samples.begin(), samples.end(),
      [](const CounterSample* a, const CounterSample* b) { return a->ts_ns < b->ts_ns; });
  auto total_of = [](const CounterSample* c) {
    double v = 0;
    for (const auto& [series, value] : c->values) {
      if (series == "allocated") return value;
      v += value;
    }
    return v;
  };
  // Each category's level, by series name, in first-seen order: a sample's series usually come
  // in the order of the previous sample's, so series j is looked for at slot j first (the trace
  // builder writes every "memory" sample with the same series in the same order).
  std::vector<std::string> cat_names;
  std::vector<double> cat_level;
  auto slot_of = [&](std::size_t j, const std::string& series) {
    if (j < cat_names.size() && cat_names[j] == series) return j;
    for (std::size_t k = 0; k < cat_names.size(); ++k) {
      if (cat_names[k] == series) return k;
    }
    cat_names.push_back(series);
    cat_level.push_back(0);
    return cat_names.size() - 1;
  };
  std::vector<double> ends;                   // E_k
  std::vector<double> first_cats, last_cats;  // the levels at the first and last compared ends
  std::size_t i = 0;
  double level = 0, peak_last = 0;
  for (std::size_t k = 0; k < compared; ++k) {
    const bool last = k + 1 == compared;
    if (last) peak_last = level;
    for (; i < samples.size() && samples[i]->ts_ns <= steps[k].end; ++i) {
      level = total_of(samples[i]);
      std::size_t j = 0;
      for (const auto& [series, value] : samples[i]->values) {
        if (series != "allocated") cat_level[slot_of(j, series)] = value;
        ++j;
      }
      if (last) peak_last = std::max(peak_last, level);
    }
    ends.push_back(level);
    if (k == 0) first_cats = cat_level;
  }
  last_cats = cat_level;
  for (std::size_t k = 1; k < ends.size(); ++k) {
    if (!(ends[k] > ends[k - 1])) return std::nullopt;
  }
  MemoryGrowth g;
  const double n = static_cast<double>(ends.size() - 1);
  g.first_step = static_cast<int>(steps.front().n);
  g.last_step = static_cast<int>(steps[compared - 1].n);
  g.bytes_per_step = (ends.back() - ends.front()) / n;
  // The categories in name order, as the fastest-growing one is chosen (the first of equal rates).
  std::vector<std::size_t> by_name(cat_names.size());
  for (std::size_t k = 0; k < by_name.size(); ++k) by_name[k] = k;
  std::sort(by_name.begin(), by_name.end(),
            [&](std::size_t a, std::size_t b) { return cat_names[a] < cat_names[b]; });
  for (const std::size_t c : by_name) {
    const std::string& series = cat_names[c];
    const double value = last_cats[c];
    const double rate = (value - (c < first_cats.size() ? first_cats[c] : 0.0)) / n;
    if (rate > g.category_bytes_per_step) {
      g.category_bytes_per_step = rate;
      g.category = series;
    }
  }
  g.last_step_peak_bytes = static_cast<Bytes>(peak_last);
  g.capacity_bytes = capacity;
  if (capacity > 0 && g.bytes_per_step > 0) {
    const double room = static_cast<double>(capacity) - peak_last;
    g.oom_step =
        room < 0 ? g.last_step
                 : g.last_step + static_cast<std::int64_t>(std::floor(room / g.bytes_per_step)) + 1;
  }
  return g;
}

std::string gpu_name(const ProcessInfo& p) {
  if (p.name.rfind("node ", 0) == 0) return p.name;
  if (p.node >= 0) return "node " + std::to_string(p.node) + " / GPU " + std::to_string(p.gpu);
  return "rank " + std::to_string(p.rank) + " / GPU " + std::to_string(p.gpu);
}

// [SECTION] Rank symmetry -------------------------------------------------------------------

// A row per mirrored GPU repeating its representative's figures (counted once already, through
// the representative's stands_for), then all rows in GPU order.
void add_mirror_rows(Summary& s, const std::vector<MirroredGpu>& mirrors,
                     const nlohmann::json& md) {
  std::map<int, std::size_t> row_of_gpu;
  for (std::size_t i = 0; i < s.per_gpu.size(); ++i) row_of_gpu[s.per_gpu[i].gpu] = i;
  const int per_node = gpus_per_node_of(md);
  const std::size_t own = s.per_gpu.size();
  for (const MirroredGpu& m : mirrors) {
    const auto it = row_of_gpu.find(m.rep);
    if (it == row_of_gpu.end() || it->second >= own) continue;
    GpuSummary g = s.per_gpu[it->second];
    ProcessInfo rep;
    rep.capacity_bytes = g.capacity_bytes;
    const ProcessInfo pi = mirror_process(rep, m, per_node);
    g.gpu = pi.gpu;
    g.pid = pi.pid;
    g.rank = pi.rank;
    g.node = pi.node;
    g.name = pi.name;
    g.stands_for = 0;
    g.mirror_of = m.rep;
    s.per_gpu.push_back(std::move(g));
  }
  std::stable_sort(s.per_gpu.begin(), s.per_gpu.end(),
                   [](const GpuSummary& a, const GpuSummary& b) { return a.gpu < b.gpu; });
}

// docs/memory.md, "First-step and steady-state peaks": the simulator's per-GPU peaks from the
// metadata, by GPU (read once); the GPU's peak is the larger of the counters' and the steady
// state's.
struct MemoryPeaks {
  Bytes first_step = 0, steady = 0;
  bool projected = false;
};
std::map<int, MemoryPeaks> memory_peaks_by_gpu(const nlohmann::json& md) {
  std::map<int, MemoryPeaks> out;
  if (!md.is_object() || !md.contains("memory_peaks") || !md["memory_peaks"].is_array()) return out;
  for (const nlohmann::json& e : md["memory_peaks"]) {
    if (!e.is_object()) continue;
    out[e.value("gpu", -1)] = {e.value("first_step_peak_bytes", Bytes{0}),
                               e.value("steady_state_peak_bytes", Bytes{0}),
                               e.value("projected", false)};
  }
  return out;
}

void apply_memory_peaks(const std::map<int, MemoryPeaks>& peaks, GpuSummary* g) {
  const auto it = peaks.find(g->gpu);
  if (it == peaks.end()) return;
  g->first_step_peak_bytes = it->second.first_step;
  g->steady_peak_bytes = it->second.steady;
  g->steady_projected = it->second.projected;
  g->peak_bytes = std::max(g->peak_bytes, g->steady_peak_bytes);
}

}  // namespace

// [SECTION] summarize ----------------------------------------------------------------------------

namespace {

// Decoder transformers (metadata "transformer", written for model.transformer and
// model.hf_config): tokens/s and the per-token FLOPs counts (docs/summary.md, "Tokens and FLOPs
// per token"). `gpus` is the MFU denominator's GPU count.
void read_transformer_figures(const nlohmann::json& md, double gpus, Summary& s) {
  const auto t = md.find("transformer");
  if (t == md.end() || !t->is_object()) return;
  s.model_params = t->value("params", std::int64_t{0});
  s.model_active_params = t->value("active_params", s.model_params);
  if (const auto m = t->find("mtp"); m != t->end() && m->is_object()) {
    s.mtp_params = m->value("params", std::int64_t{0});
    s.mtp_active_params = m->value("active_params", s.mtp_params);
  }
  if (const auto r = t->find("moe_routing"); r != t->end() && r->is_object()) {
    s.moe_routing = r->value("kind", std::string());
    s.moe_routing_samples = r->value("samples", 0);
    s.tokens_per_expert_max_over_mean = r->value("tokens_per_expert_max_over_mean", 0.0);
    s.worst_tokens_per_expert_max_over_mean =
        r->value("worst_tokens_per_expert_max_over_mean", 0.0);
    s.tokens_per_ep_rank_max_over_mean = r->value("tokens_per_ep_rank_max_over_mean", 0.0);
    s.worst_tokens_per_ep_rank_max_over_mean =
        r->value("worst_tokens_per_ep_rank_max_over_mean", 0.0);
    s.moe_capacity_factor = r->value("capacity_factor", 0.0);
    s.dropped_token_share = r->value("dropped_token_share", 0.0);
    s.worst_dropped_token_share = r->value("worst_dropped_token_share", 0.0);
    if (const auto c = r->find("busiest_ep_rank_count"); c != r->end() && c->is_array()) {
      for (std::size_t i = 0; i < c->size(); ++i) {
        const int n = (*c)[i].is_number_integer() ? (*c)[i].get<int>() : 0;
        if (n > s.busiest_ep_rank_count) {
          s.busiest_ep_rank_count = n;
          s.busiest_ep_rank = static_cast<int>(i);
        }
      }
    }
  }
  s.tokens_per_step = t->value("tokens_per_step", std::int64_t{0});
  if (s.tokens_per_step > 0 && s.step_time_s > 0) {
    s.tokens_per_s = static_cast<double>(s.tokens_per_step) / s.step_time_s;
    if (gpus > 0) s.tokens_per_s_per_gpu = s.tokens_per_s / gpus;
  }
  if (const auto f = t->find("flops_per_token"); f != t->end() && f->is_object()) {
    s.flops_per_token_model = f->value("model", 0.0);
    s.flops_per_token_6n = f->value("six_n_attention", 0.0);
    s.flops_per_token_megatron = f->value("megatron", 0.0);
    s.flops_per_token_torchtitan = f->value("torchtitan", 0.0);
  }
}

}  // namespace

Summary summarize(const Trace& trace, core::Progress* progress) {
  Summary s;
  const nlohmann::json& md = trace.metadata;
  // Rank symmetry (docs/summary.md, "Rank symmetry"): a simulated GPU stands for itself and its
  // mirror images; sums over GPUs count it that many times, and every mirror gets its row.
  const std::vector<MirroredGpu> mirrors = read_mirrored_gpus(md);
  std::map<int, int> stands_for_gpu;
  for (const MirroredGpu& m : mirrors) stands_for_gpu.emplace(m.rep, 1).first->second += 1;
  s.symmetric = !mirrors.empty();
  if (s.symmetric) {
    s.notes.push_back("rank symmetry: " + std::to_string(stands_for_gpu.size() + mirrors.size()) +
                      " GPUs simulated as " + std::to_string(stands_for_gpu.size()) +
                      " representatives; a mirrored GPU's row repeats its representative's");
  }
  auto stands_for = [&](int gpu) {
    const auto it = stands_for_gpu.find(gpu);
    return it == stands_for_gpu.end() ? 1 : it->second;
  };
  s.scenario = string_at(md, "scenario", "name");
  if (s.scenario.empty()) s.scenario = string_at(md, "scenario");
  s.strategy = string_at(md, "strategy", "label");
  if (s.strategy.empty()) s.strategy = string_at(md, "strategy", "kind");
  s.backend = string_at(md, "backend");
  if (md.is_object()) {
    if (const auto it = md.find("samples_per_step"); it != md.end() && it->is_number_integer()) {
      s.samples_per_step = it->get<std::int64_t>();
    }
    if (const auto st = md.find("strategy"); st != md.end() && st->is_object()) {
      const std::string kind = string_at(*st, "kind");
      if (kind.empty() || kind == "data_parallel") {
        const auto ids = st->find("device_ids");
        if (ids != st->end() && ids->is_array() && !ids->empty() && (*ids)[0].is_number_integer()) {
          s.device_ids0 = (*ids)[0].get<int>();
          s.output_device = s.device_ids0;  // torch default: output_device = device_ids[0]
        }
        const auto od = st->find("output_device");
        if (od != st->end() && od->is_number_integer()) s.output_device = od->get<int>();
      }
    }
  }

  // Steps and the window (docs/summary.md "Steps").
  const std::vector<Step> steps = find_steps(trace);
  std::vector<Interval> window;
  std::vector<Interval> every_step;  // all steps, the first included (utilisation over time)
  std::vector<std::int64_t> step_numbers;
  if (steps.empty()) {
    TimeNs lo = 0, hi = 0;
    bool any = false;
    for (const TraceEvent& e : trace.events) {
      lo = any ? std::min(lo, e.ts_ns) : e.ts_ns;
      hi = any ? std::max(hi, e.ts_ns + e.dur_ns) : e.ts_ns + e.dur_ns;
      any = true;
    }
    if (any) {
      s.step_times_ns.push_back(hi - lo);
      window.push_back({lo, hi});
      every_step.push_back({lo, hi});
      step_numbers.push_back(1);
    }
    s.notes.push_back("no ProfilerStep#N annotations: the whole trace is taken as one step");
  } else {
    for (std::size_t k = 0; k < steps.size(); ++k) {
      const bool chained = k > 0 && steps[k].n == steps[k - 1].n + 1;
      const TimeNs from = chained ? steps[k - 1].end : steps[k].start;
      s.step_times_ns.push_back(steps[k].end - from);
      if (steps.size() == 1 || k > 0) window.push_back({from, steps[k].end});
      every_step.push_back({from, steps[k].end});
      step_numbers.push_back(steps[k].n);
    }
  }
  if (s.step_times_ns.size() == 1) {
    s.step_time_s = ns_to_s(s.step_times_ns[0]);
  } else if (!s.step_times_ns.empty()) {
    s.step_time_s = median_s({s.step_times_ns.begin() + 1, s.step_times_ns.end()});
  }
  if (s.samples_per_step > 0 && s.step_time_s > 0) {
    s.samples_per_s = static_cast<double>(s.samples_per_step) / s.step_time_s;
  }
  // MFU = model FLOPs per step / (step time x GPUs x dense peak); HFU with hardware FLOPs
  // (docs/summary.md, "MFU and HFU"). Needs the metadata the executors write.
  if (md.is_object() && s.step_time_s > 0) {
    const double model = md.value("model_flops_per_step", 0.0);
    const double hardware = md.value("hardware_flops_per_step", 0.0);
    const double peak = md.value("peak_flops_per_gpu", 0.0);
    double gpus = 0;
    for (const ProcessInfo& p : trace.processes) gpus += stands_for(p.gpu);
    if (model > 0 && gpus > 0) s.tflops_per_gpu = model / (s.step_time_s * gpus) / 1e12;
    if (model > 0 && peak > 0 && gpus > 0) {
      s.mfu = model / (s.step_time_s * gpus * peak);
      s.hfu = hardware / (s.step_time_s * gpus * peak);
    }
    read_transformer_figures(md, gpus, s);
  }
  s.window_steps = static_cast<int>(window.size());
  TimeNs window_ns = 0;
  for (const Interval& w : window) window_ns += std::max<TimeNs>(0, w.end - w.start);
  const double per_step = s.window_steps > 0 ? 1.0 / s.window_steps : 0.0;
  s.window_s = ns_to_s(window_ns) * per_step;
  std::vector<std::pair<TimeNs, TimeNs>> window_pairs;
  for (const Interval& w : window) window_pairs.emplace_back(w.start, w.end);

  // GPUs: processes with a GPU index or with GPU work, in pid order.
  std::set<std::int32_t> gpu_pids;
  for (const ProcessInfo& p : trace.processes) {
    if (p.gpu >= 0) gpu_pids.insert(p.pid);
  }
  // Events and memory counters indexed by pid once: every GPU's figures below read only its own.
  std::set<std::int32_t> with_work;
  std::map<std::int32_t, std::vector<const TraceEvent*>> events_of;
  std::map<std::int32_t, std::vector<const CounterSample*>> memory_of;
  std::map<std::int32_t, std::vector<const CounterSample*>> reserved_of;  // caching allocator
  // A trace's events come in runs of one pid: the last pid's entries are kept at hand.
  std::vector<const TraceEvent*>* last_events = nullptr;
  std::int32_t last_pid = 0;
  bool last_has_work = false;
  // Counted by event, then by GPU (docs/limits.md, "Progress").
  core::ProgressCount indexed(progress, "summarising",
                              static_cast<std::int64_t>(trace.events.size()), "events");
  for (const TraceEvent& e : trace.events) {
    indexed.add();
    if (last_events == nullptr || e.pid != last_pid) {
      last_events = &events_of[e.pid];
      last_pid = e.pid;
      last_has_work = with_work.count(e.pid) > 0;
    }
    if (!last_has_work && is_gpu_work(e.cls)) {
      with_work.insert(e.pid);
      last_has_work = true;
    }
    last_events->push_back(&e);
  }
  for (const CounterSample& c : trace.counters) {
    if (c.name.compare(0, 6, "memory") != 0) continue;
    with_work.insert(c.pid);
    if (c.name == kReservedMemoryCounter) {
      reserved_of[c.pid].push_back(&c);
    } else {
      memory_of[c.pid].push_back(&c);
    }
  }
  indexed.finish();
  double peak_sum = 0, peak_max = 0;
  const std::map<int, MemoryPeaks> peaks = memory_peaks_by_gpu(md);
  int with_memory = 0;
  core::ProgressCount gpus_done(progress, "summarising GPUs",
                                static_cast<std::int64_t>(with_work.size()), "GPUs", 1);
  for (const std::int32_t pid : with_work) {
    gpus_done.add();
    const ProcessInfo* info = trace.process(pid);
    // A process that names no GPU counts as one only if the trace names no GPUs at all.
    if (info != nullptr && info->gpu < 0 && !gpu_pids.empty()) continue;
    if (info == nullptr && !gpu_pids.empty()) continue;
    ProcessInfo p = info != nullptr ? *info : ProcessInfo{};
    if (info == nullptr) p.pid = pid;
    if (p.gpu < 0) p.gpu = pid;
    GpuSummary g;
    g.pid = pid;
    g.name = gpu_name(p);
    g.rank = p.rank;
    g.node = p.node;
    g.gpu = p.gpu;
    g.capacity_bytes = p.capacity_bytes;
    g.stands_for = stands_for(p.gpu);
    const Boundaries bounds = boundaries(events_of[pid]);
    const Splits splits = split_time(bounds, window, every_step);
    const Split& sp = splits.window;
    g.compute_s = ns_to_s(sp.compute) * per_step;
    g.comm_s = ns_to_s(sp.comm) * per_step;
    g.copy_s = ns_to_s(sp.copy) * per_step;
    g.host_wait_s = ns_to_s(sp.host_wait) * per_step;
    g.idle_s = ns_to_s(sp.idle) * per_step;
    g.exposed_comm_s = g.comm_s;
    g.overlapped_comm_s = ns_to_s(sp.overlapped) * per_step;
    g.comm_by_group = comm_by_group(events_of[pid], window_pairs, per_step);
    // busy_fraction = (compute + comm + copy) / |W| (docs/summary.md "Time split")
    g.busy_fraction = window_ns > 0 ? static_cast<double>(sp.compute + sp.comm + sp.copy) /
                                          static_cast<double>(window_ns)
                                    : 0.0;
    const MemoryPeak m = memory_peak(memory_of[pid], p.capacity_bytes);
    g.has_memory_data = m.any;
    g.peak_bytes = m.peak;
    g.peak_by_category = m.at_peak;
    apply_memory_peaks(peaks, &g);
    g.by_step = utilisation_by_step(splits.steps, memory_of[pid], step_numbers, every_step);
    g.has_reserved_data = !reserved_of[pid].empty();
    g.peak_reserved_bytes = reserved_peak(reserved_of[pid]);
    if (m.any) {
      if (auto growth = memory_growth(memory_of[pid], steps, p.capacity_bytes)) {
        growth->gpu = g.gpu;
        s.memory_growth.push_back(*growth);
      }
    }
    if (m.any) {
      s.has_memory_data = true;
      with_memory += g.stands_for;
      peak_sum += static_cast<double>(g.peak_bytes) * g.stands_for;
      peak_max = std::max(peak_max, static_cast<double>(g.peak_bytes));
      if (m.first_over_capacity >= 0 && (!s.oom || m.first_over_capacity < s.oom->at_ns)) {
        s.oom = OomVerdict{g.gpu, "", m.peak - p.capacity_bytes, m.first_over_capacity};
      }
    }
    s.exposed_comm_s += g.exposed_comm_s * g.stands_for;
    s.overlapped_comm_s += g.overlapped_comm_s * g.stands_for;
    add_comm_by_group(s.comm_by_group, g.comm_by_group, g.stands_for);
    s.gpus += g.stands_for;
    s.per_gpu.push_back(std::move(g));
  }
  if (s.symmetric) add_mirror_rows(s, mirrors, md);
  // Bounding GPU = argmax over GPUs of compute + copy per step, the first in GPU order on ties
  // (docs/summary.md, "Bounding GPU").
  std::vector<double> busy;
  for (const GpuSummary& g : s.per_gpu) {
    const double b = g.compute_s + g.copy_s;
    busy.push_back(b);
    if (s.bounding_gpu < 0 || b > s.bounding_busy_s) {
      s.bounding_gpu = g.gpu;
      s.bounding_rank = g.rank;
      s.bounding_busy_s = b;
    }
  }
  if (!busy.empty()) {
    std::sort(busy.begin(), busy.end());
    const std::size_t n = busy.size();
    s.median_busy_s = n % 2 == 1 ? busy[n / 2] : 0.5 * (busy[n / 2 - 1] + busy[n / 2]);
  }
  // Imbalance = max / mean of the GPUs' peaks (docs/summary.md "Imbalance").
  if (with_memory > 0 && peak_sum > 0) s.imbalance = peak_max / (peak_sum / with_memory);
  if (!s.has_memory_data) s.notes.push_back("no memory data");
  // What the scenario parser changed or ignored (e.g. a padded vocabulary) is part of the result.
  if (md.is_object() && md.contains("warnings") && md["warnings"].is_array()) {
    for (const nlohmann::json& w : md["warnings"])
      if (w.is_string()) s.notes.push_back("scenario: " + w.get<std::string>());
  }
  // A board power cap: what it did to every kernel's compute term (docs/cost-model.md, "Power
  // limit"); a cap the catalog cannot model also has the parser's warning above.
  if (md.is_object() && md.contains("cluster") && md["cluster"].is_object()) {
    const nlohmann::json& c = md["cluster"];
    const auto cap = c.find("gpu_power_limit_w"), factor = c.find("compute_clock_factor");
    if (cap != c.end() && cap->is_number() && factor != c.end() && factor->is_number()) {
      char line[160];
      std::snprintf(line, sizeof line,
                    "GPU power cap %.0f W: compute throughput x %.3f (docs/cost-model.md, "
                    "\"Power limit\")",
                    cap->get<double>(), factor->get<double>());
      s.notes.push_back(line);
    }
  }
  // The simulator's host synchronizations on pending frees (docs/memory.md, "Allocation
  // backpressure"), from the executor's notes.
  if (md.is_object() && md.contains("notes") && md["notes"].is_array()) {
    for (const nlohmann::json& n : md["notes"])
      if (n.is_string() && n.get<std::string>().rfind("allocator backpressure:", 0) == 0)
        s.notes.push_back(n.get<std::string>());
  }

  // OOM: the executor's verdict when the metadata has one, else the counters' (docs "OOM").
  if (md.is_object() && md.contains("oom")) {
    const nlohmann::json& o = md["oom"];
    s.oom.reset();
    if (o.is_object()) {
      OomVerdict v;
      v.gpu = o.value("gpu", -1);
      v.op = o.value("op", std::string());
      v.shortfall_bytes = o.value("shortfall_bytes", Bytes{0});
      v.at_ns = o.value("at_ns", TimeNs{0});
      v.would_be_peak_bytes = o.value("would_be_peak_bytes", Bytes{0});
      v.over_capacity_bytes = o.value("over_capacity_bytes", Bytes{0});
      v.steady_state = o.value("steady_state", false);
      v.allocator = o.value("allocator", false);
      v.expandable_segments = o.value("expandable_segments", false);
      v.reserved_bytes = o.value("reserved_bytes", Bytes{0});
      v.segment_bytes = o.value("segment_bytes", Bytes{0});
      v.allocated_bytes = o.value("allocated_bytes", Bytes{0});
      s.oom = v;
    }
  } else if (s.oom) {
    s.notes.push_back("OOM derived from the memory counters (op unknown)");
  }
  // The caching allocator's own OOM (docs/memory.md, "OOM verdict"): reserved + the segment (or
  // pages) a request needs exceed the usable memory even after releasing the cache. When it is
  // the verdict the OOM line says so; else a note: with an allocation already over capacity, what
  // the allocator hit first; with the default allocator and no such allocation, why its reserved
  // peak above the usable memory is not an OOM verdict, and what expandable segments reserve.
  if (md.is_object() && md.contains("allocator_oom") && md["allocator_oom"].is_object() &&
      !(s.oom && s.oom->allocator)) {
    const nlohmann::json& o = md["allocator_oom"];
    const auto mib = [](Bytes b) { return std::to_string(b / kMiB); };
    std::string note =
        "caching allocator out of memory on GPU " + std::to_string(o.value("gpu", -1)) + " at op " +
        o.value("op", std::string()) + ": reserved " + mib(o.value("reserved_bytes", Bytes{0})) +
        " MiB + a " + mib(o.value("segment_bytes", Bytes{0})) + " MiB " +
        (o.value("expandable_segments", false) ? "mapping" : "segment") + " > usable " +
        mib(o.value("capacity_bytes", Bytes{0})) + " MiB, with " +
        mib(o.value("allocated_bytes", Bytes{0})) + " MiB allocated";
    const Bytes pages = o.value("expandable_peak_reserved_bytes", Bytes{-1});
    if (!s.oom && pages >= 0) {
      note +=
          "; not the OOM verdict: fragmentation of the default allocator, which the "
          "simulated allocations (a pipeline segment's saved activations per micro-batch "
          "and Adam's state each one block; PyTorch allocates tensor by tensor) overstate; "
          "with expandable segments (training.allocator.expandable_segments: true) the same "
          "run reserves at most " +
          mib(pages) + " MiB and fits (docs/memory.md, \"OOM verdict\")";
    }
    s.notes.push_back(note);
  }
  return s;
}

}  // namespace csim::prof
