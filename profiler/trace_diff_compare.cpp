// Comparison of runs for tracediff (medians, spread, tolerances, verdicts) and its reporters:
// the console table and JSON. Rules: docs/tracediff.md "Several runs", "Comparison", "Output".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "profiler/trace_diff.hpp"

namespace csim::prof {
namespace {

SideStats stats_of(std::vector<double> v) {
  SideStats s;
  s.runs = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  s.median = v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2.0;
  s.min = v.front();
  s.max = v.back();
  return s;
}

std::string join_sources(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string percent(double rel) {
  if (std::isinf(rel)) return rel > 0 ? "+inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", rel * 100.0);
  return buf;
}

std::string pad(std::string s, std::size_t w, bool right) {
  if (s.size() < w)
    s = right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
  return s;
}

std::set<std::string> families_of(const std::vector<RunMetrics>& runs) {
  std::set<std::string> f;
  for (const RunMetrics& r : runs) f.insert(r.families.begin(), r.families.end());
  return f;
}

// GPU count of a side, or -1 when its runs disagree.
int gpu_count(const std::vector<RunMetrics>& runs) {
  int n = static_cast<int>(runs.front().gpus.size());
  for (const RunMetrics& r : runs) {
    if (static_cast<int>(r.gpus.size()) != n) return -1;
  }
  return n;
}

std::string describe_gpus(const RunMetrics& r) {
  return std::to_string(r.gpus.size()) + " GPU" + (r.gpus.size() == 1 ? "" : "s") +
         (r.world_size > 0 ? " (world size " + std::to_string(r.world_size) + ")" : "");
}

}  // namespace

const char* to_string(Status s) {
  switch (s) {
    case Status::kUnchanged:
      return "unchanged";
    case Status::kWithin:
      return "within";
    case Status::kImproved:
      return "improved";
    case Status::kRegressed:
      return "REGRESSION";
  }
  return "?";
}

double SideStats::spread() const {
  if (runs < 2 || median == 0) return 0;
  return (max - min) / std::fabs(median);
}

std::string format_value(double v, Unit u) {
  char buf[64];
  switch (u) {
    case Unit::kSeconds: {
      const double a = std::fabs(v);
      if (a >= 1.0) {
        std::snprintf(buf, sizeof buf, "%.3f s", v);
      } else if (a >= 1e-3 || a == 0) {
        std::snprintf(buf, sizeof buf, "%.3f ms", v * 1e3);
      } else {
        std::snprintf(buf, sizeof buf, "%.3f us", v * 1e6);
      }
      break;
    }
    case Unit::kBytes: {
      const double a = std::fabs(v);
      if (a >= static_cast<double>(kGiB)) {
        std::snprintf(buf, sizeof buf, "%.3f GiB", v / static_cast<double>(kGiB));
      } else if (a >= static_cast<double>(kMiB) || a == 0) {
        std::snprintf(buf, sizeof buf, "%.2f MiB", v / static_cast<double>(kMiB));
      } else {
        std::snprintf(buf, sizeof buf, "%.0f B", v);
      }
      break;
    }
    case Unit::kRatio:
      std::snprintf(buf, sizeof buf, "%.4fx", v);
      break;
    case Unit::kFraction:
      std::snprintf(buf, sizeof buf, "%.1f%%", v * 100.0);
      break;
    case Unit::kPerSecond:
      std::snprintf(buf, sizeof buf, "%.1f/s", v);
      break;
  }
  return buf;
}

// docs/tracediff.md "Comparison".
DiffResult diff_runs(const std::vector<RunMetrics>& base, const std::vector<RunMetrics>& next,
                     const Tolerances& tolerances) {
  DiffResult d;
  d.default_rel = tolerances.default_rel;
  if (base.empty() || next.empty()) {
    d.notes.push_back("nothing to compare: a side has no runs");
    return d;
  }
  for (const RunMetrics& r : base) d.base_sources.push_back(r.source);
  for (const RunMetrics& r : next) d.new_sources.push_back(r.source);
  for (const auto* side : {&base, &next}) {
    const char* name = side == &base ? "base" : "new";
    for (const RunMetrics& r : *side) {
      for (const std::string& n : r.notes)
        d.notes.push_back(std::string(name) + " " + r.source + ": " + n);
    }
  }

  // Families both sides provide.
  const std::set<std::string> fb = families_of(base), fn = families_of(next);
  std::set<std::string> common;
  for (const std::string& f : fb) {
    if (fn.count(f) != 0) {
      common.insert(f);
    } else {
      d.notes.push_back("'" + f + "' metrics only in base: not compared");
    }
  }
  for (const std::string& f : fn) {
    if (fb.count(f) == 0) d.notes.push_back("'" + f + "' metrics only in new: not compared");
  }

  // GPU counts: per-GPU metrics pair GPUs by position, so they need equal counts.
  const int nb = gpu_count(base), nn = gpu_count(next);
  const bool per_gpu_ok = nb >= 0 && nb == nn;
  if (nb < 0 || nn < 0) {
    d.notes.push_back(std::string("the runs of the ") + (nb < 0 ? "base" : "new") +
                      " side have different GPU counts: per-GPU metrics are not compared");
  } else if (nb != nn) {
    d.notes.push_back("different rank counts: base has " + describe_gpus(base.front()) +
                      ", new has " + describe_gpus(next.front()) +
                      "; per-GPU metrics (peak_memory/gpuN, split/gpuN/*, time/gpuN/*) are not "
                      "compared; step_time, throughput, exposed_comm, comm_overlap, "
                      "peak_memory/max, imbalance, time/mean/* and critical_path/* are");
  } else {
    const RunMetrics& b0 = base.front();
    const RunMetrics& n0 = next.front();
    for (std::size_t i = 0; i < b0.gpus.size(); ++i) {
      if (b0.gpus[i].rank != n0.gpus[i].rank || b0.gpus[i].gpu != n0.gpus[i].gpu) {
        d.notes.push_back("GPUs matched by position: gpu" + std::to_string(i) + " = base '" +
                          b0.gpus[i].name + "', new '" + n0.gpus[i].name + "'");
      }
    }
  }

  // Every key of either side.
  std::map<std::string, Metric> shapes;
  for (const auto* side : {&base, &next}) {
    for (const RunMetrics& r : *side) {
      for (const auto& [k, m] : r.metrics) shapes.emplace(k, m);
    }
  }
  auto values = [](const std::vector<RunMetrics>& runs, const std::string& key, bool zero_fill) {
    std::vector<double> v;
    for (const RunMetrics& r : runs) {
      const auto it = r.metrics.find(key);
      if (it != r.metrics.end()) {
        v.push_back(it->second.value);
      } else if (zero_fill && r.families.count(kFamilyTime) != 0) {
        v.push_back(0.0);  // an op class absent from a run took no time in it
      }
    }
    return v;
  };
  for (const auto& [key, shape] : shapes) {
    if (common.count(shape.family) == 0) continue;
    if (shape.per_gpu && !per_gpu_ok) continue;
    const bool additive = shape.family == kFamilyTime;
    MetricDiff m;
    m.key = key;
    m.shape = shape;
    m.base = stats_of(values(base, key, additive));
    m.next = stats_of(values(next, key, additive));
    if (m.base.runs == 0 || m.next.runs == 0) {
      d.notes.push_back("'" + key + "' only in " + (m.base.runs == 0 ? "new" : "base") +
                        ": not compared");
      continue;
    }
    m.change_abs = m.next.median - m.base.median;
    if (m.base.median != 0) {
      m.change_rel = m.change_abs / std::fabs(m.base.median);
    } else if (m.change_abs != 0) {
      m.change_rel = std::copysign(std::numeric_limits<double>::infinity(), m.change_abs);
    }
    if (additive) {
      m.appeared = m.base.median == 0 && m.next.median > 0;
      m.vanished = m.base.median > 0 && m.next.median == 0;
    }
    m.tol = tolerances.for_metric(key, shape.unit);
    if (m.change_abs == 0) {
      m.status = Status::kUnchanged;
    } else {
      const bool worse = shape.better == Better::kLower ? m.change_abs > 0 : m.change_abs < 0;
      const bool beyond =
          std::fabs(m.change_abs) > m.tol.min_abs && std::fabs(m.change_rel) > m.tol.rel;
      if (m.tol.ignore || !beyond) {
        m.status = Status::kWithin;
      } else {
        m.status = worse ? Status::kRegressed : Status::kImproved;
      }
    }
    if (m.status == Status::kRegressed) ++d.regressions;
    if (m.status == Status::kImproved) ++d.improvements;
    d.rows.push_back(std::move(m));
  }
  std::sort(d.rows.begin(), d.rows.end(), [](const MetricDiff& a, const MetricDiff& b) {
    const double ra = std::fabs(a.change_rel), rb = std::fabs(b.change_rel);
    if (ra != rb) return ra > rb;
    return a.key < b.key;
  });

  // Op names on one side only (docs/tracediff.md "Appeared and vanished ops").
  if (common.count(kFamilyTime) != 0) {
    std::set<std::string> names;
    for (const auto* side : {&base, &next}) {
      for (const RunMetrics& r : *side) {
        for (const auto& [n, s] : r.op_names) names.insert(n);
      }
    }
    auto median_of = [](const std::vector<RunMetrics>& runs, const std::string& n) {
      std::vector<double> v;
      for (const RunMetrics& r : runs) {
        const auto it = r.op_names.find(n);
        v.push_back(it == r.op_names.end() ? 0.0 : it->second);
      }
      return stats_of(v).median;
    };
    for (const std::string& n : names) {
      const double b = median_of(base, n), x = median_of(next, n);
      if (b == 0 && x > 0) d.appeared_ops.push_back({n, x});
      if (b > 0 && x == 0) d.vanished_ops.push_back({n, b});
    }
    auto by_time = [](const OpChange& a, const OpChange& b) {
      return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
    };
    std::sort(d.appeared_ops.begin(), d.appeared_ops.end(), by_time);
    std::sort(d.vanished_ops.begin(), d.vanished_ops.end(), by_time);
  }
  return d;
}

void print_diff_table(const DiffResult& d, std::ostream& out, int top) {
  out << "base: " << join_sources(d.base_sources) << "\n";
  out << "new:  " << join_sources(d.new_sources) << "\n";
  const bool several = d.base_sources.size() > 1 || d.new_sources.size() > 1;
  out << "tolerance: " << percent(d.default_rel).substr(1)
      << " by default (docs/tracediff.md \"Tolerances\")";
  if (several) {
    out << "; medians of " << d.base_sources.size() << " base and " << d.new_sources.size()
        << " new runs, spread = (max - min) / median of the wider side";
  }
  out << "\n\n";
  std::vector<const MetricDiff*> shown;
  int changed = 0;
  for (const MetricDiff& m : d.rows) {
    if (m.status == Status::kUnchanged) continue;
    ++changed;
    if (top <= 0 || static_cast<int>(shown.size()) < top || m.status == Status::kRegressed) {
      shown.push_back(&m);
    }
  }
  if (shown.empty()) {
    out << "no metric changed (" << d.rows.size() << " compared)\n";
  } else {
    std::size_t key_w = 6;
    for (const MetricDiff* m : shown) key_w = std::max(key_w, m->key.size());
    out << pad("change", 9, true) << "  " << pad("metric", key_w, false) << pad("base", 14, true)
        << pad("new", 14, true) << pad("tol", 7, true);
    if (several) out << pad("spread", 8, true);
    out << "  status\n";
    for (const MetricDiff* m : shown) {
      out << pad(percent(m->change_rel), 9, true) << "  " << pad(m->key, key_w, false)
          << pad(format_value(m->base.median, m->shape.unit), 14, true)
          << pad(format_value(m->next.median, m->shape.unit), 14, true)
          << pad(m->tol.ignore ? "ignore" : percent(m->tol.rel).substr(1), 7, true);
      if (several) {
        out << pad(percent(std::max(m->base.spread(), m->next.spread())).substr(1), 8, true);
      }
      out << "  " << to_string(m->status);
      if (m->appeared) out << " (appeared)";
      if (m->vanished) out << " (vanished)";
      if (m->shape.better == Better::kHigher) out << " [higher is better]";
      out << "\n";
    }
    if (static_cast<int>(shown.size()) < changed) {
      out << "(" << changed - static_cast<int>(shown.size())
          << " smaller changes not shown; --top 0 shows all, --json writes all)\n";
    }
  }
  auto list_ops = [&](const char* title, const std::vector<OpChange>& ops) {
    if (ops.empty()) return;
    out << "\n" << title << " (" << ops.size() << ", per step, largest first):\n";
    const std::size_t n = std::min<std::size_t>(ops.size(), 10);
    for (std::size_t i = 0; i < n; ++i) {
      // Kineto's templated kernel names run to kilobytes: the first 100 characters identify them.
      const std::string& name = ops[i].name;
      out << "  " << pad(format_value(ops[i].seconds, Unit::kSeconds), 12, true) << "  "
          << (name.size() > 100 ? name.substr(0, 97) + "..." : name) << "\n";
    }
    if (ops.size() > n) out << "  ... and " << ops.size() - n << " more\n";
  };
  list_ops("ops only in new", d.appeared_ops);
  list_ops("ops only in base", d.vanished_ops);
  if (!d.notes.empty()) {
    out << "\nnotes:\n";
    for (const std::string& n : d.notes) out << "  " << n << "\n";
  }
  out << "\n";
  if (d.regressed()) {
    out << "verdict: REGRESSION: " << d.regressions << " metric" << (d.regressions == 1 ? "" : "s")
        << " worse beyond tolerance";
  } else {
    out << "verdict: OK: within tolerance";
  }
  out << "; " << d.improvements << " improved; " << d.rows.size() << " metrics compared\n";
}

nlohmann::json diff_to_json(const DiffResult& d) {
  auto side = [](const SideStats& s) {
    return nlohmann::json{{"median", s.median},
                          {"min", s.min},
                          {"max", s.max},
                          {"runs", s.runs},
                          {"spread", s.spread()}};
  };
  auto unit_name = [](Unit u) {
    switch (u) {
      case Unit::kSeconds:
        return "s";
      case Unit::kBytes:
        return "bytes";
      case Unit::kRatio:
        return "ratio";
      case Unit::kFraction:
        return "fraction";
      case Unit::kPerSecond:
        return "per_s";
    }
    return "?";
  };
  nlohmann::json j;
  j["verdict"] = d.regressed() ? "regression" : "ok";
  j["regressions"] = d.regressions;
  j["improvements"] = d.improvements;
  j["default_tolerance"] = d.default_rel;
  j["base"] = d.base_sources;
  j["new"] = d.new_sources;
  nlohmann::json rows = nlohmann::json::array();
  for (const MetricDiff& m : d.rows) {
    rows.push_back(
        {{"metric", m.key},
         {"unit", unit_name(m.shape.unit)},
         {"better", m.shape.better == Better::kLower ? "lower" : "higher"},
         {"base", side(m.base)},
         {"new", side(m.next)},
         {"change_abs", m.change_abs},
         {"change_rel",
          std::isinf(m.change_rel) ? nlohmann::json(nullptr) : nlohmann::json(m.change_rel)},
         {"appeared", m.appeared},
         {"vanished", m.vanished},
         {"tolerance", {{"rel", m.tol.rel}, {"min_abs", m.tol.min_abs}, {"ignore", m.tol.ignore}}},
         {"status", m.status == Status::kRegressed ? "regression" : to_string(m.status)}});
  }
  j["rows"] = rows;
  auto ops = [](const std::vector<OpChange>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const OpChange& o : v) a.push_back({{"name", o.name}, {"seconds_per_step", o.seconds}});
    return a;
  };
  j["ops_only_in_new"] = ops(d.appeared_ops);
  j["ops_only_in_base"] = ops(d.vanished_ops);
  j["notes"] = d.notes;
  return j;
}

}  // namespace csim::prof
