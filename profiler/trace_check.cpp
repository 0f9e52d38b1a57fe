// Trace checker (profiler/trace_check.hpp; docs/trace-format.md, "Checking a trace").
//
// Index:
//  [SECTION] Problems and event descriptions
//  [SECTION] One pass over traceEvents: phases, timestamps, ids, names, counters, slices, flows
//  [SECTION] Slices: nesting per thread, binding a point to a slice
//  [SECTION] Flows and launches
//  [SECTION] Files
#include "profiler/trace_check.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/input_file.hpp"

namespace csim::prof {

using json = nlohmann::json;

const char* to_string(CheckRule r) {
  switch (r) {
    case CheckRule::kJson:
      return "json";
    case CheckRule::kPhase:
      return "phase";
    case CheckRule::kTimestamp:
      return "timestamp";
    case CheckRule::kDuration:
      return "duration";
    case CheckRule::kPidTid:
      return "pid/tid";
    case CheckRule::kNaming:
      return "naming";
    case CheckRule::kCounter:
      return "counter";
    case CheckRule::kFlowPairing:
      return "flow pairing";
    case CheckRule::kFlowBinding:
      return "flow binding";
    case CheckRule::kFlowOrder:
      return "flow order";
    case CheckRule::kNesting:
      return "nesting";
    case CheckRule::kCausality:
      return "causality";
    case CheckRule::kLaunchMissing:
      return "launch elsewhere";
  }
  return "?";
}

std::size_t TraceCheckResult::problems() const {
  std::size_t n = 0;
  for (std::size_t c : count) n += c;
  return n;
}

std::string TraceCheckResult::report() const {
  std::ostringstream o;
  if (ok()) {
    o << "ok: " << events << " events, " << slices << " slices, " << flows << " flows, "
      << device_events << " device events (" << launches_checked << " with their launch)\n";
    return o.str();
  }
  o << problems() << " problems:";
  for (std::size_t r = 0; r < kNumCheckRules; ++r)
    if (count[r]) o << " " << to_string(static_cast<CheckRule>(r)) << " " << count[r] << ";";
  o << "\n";
  for (const std::string& m : messages) o << "  " << m << "\n";
  if (messages.size() < problems()) o << "  ... and " << problems() - messages.size() << " more\n";
  return o.str();
}

namespace {

// [SECTION] Problems and event descriptions ---------------------------------------------------

// "'name' (pid 1, tid 4, ts 14699.000)": ts in µs as written.
std::string describe(const json& e) {
  std::string s = "'";
  if (const auto it = e.find("name"); it != e.end() && it->is_string())
    s += it->get_ref<const std::string&>();
  s += "' (pid ";
  const auto id = [&](const char* k) {
    const auto it = e.find(k);
    return it == e.end() ? std::string("-") : it->dump();
  };
  s += id("pid") + ", tid " + id("tid") + ", ts ";
  const auto it = e.find("ts");
  if (it != e.end() && it->is_number()) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.3f", it->get<double>());
    s += buf;
  } else {
    s += it == e.end() ? "-" : it->dump();
  }
  return s + ")";
}

bool is_int(const json& v) {
  return v.is_number_integer() || v.is_number_unsigned();
}

std::int64_t to_ns(double us) {
  return static_cast<std::int64_t>(std::llround(us * 1000.0));
}

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

bool is_device_cat(const std::string& cat) {
  const std::string c = lower(cat);
  return c == "kernel" || c == "gpu_memcpy" || c == "gpu_memset" || c == "memcpy" || c == "memset";
}
bool is_launch_cat(const std::string& cat) {
  const std::string c = lower(cat);
  return c == "cuda_runtime" || c == "cuda_driver";
}

constexpr std::string_view kPhases = "BEXiICbneNODMPsftSTpFRcVv()";

struct Slice {
  std::int64_t ts = 0, end = 0;
  std::size_t index = 0;  // in traceEvents
  int parent = -1;        // the enclosing slice on the thread (in the thread's sorted order)
};

struct FlowPoint {
  char ph = 's';
  std::string name;
  std::int64_t pid = 0, tid = 0, ts = 0;
  bool bind_enclosing = false;
  std::size_t index = 0;
};

using ThreadKey = std::pair<std::int64_t, std::int64_t>;

class Checker {
 public:
  Checker(const json& events, const TraceCheckOptions& o, TraceCheckResult* r)
      : ev_(events), opt_(o), r_(*r) {}

  // Correlation ids of the launches in this file, and device events with their correlation.
  std::set<std::int64_t> launch_corr;
  std::vector<std::pair<std::int64_t, std::size_t>> device_corr;  // (correlation, event index)

  void problem(CheckRule rule, const std::string& msg) {
    ++r_.count[static_cast<std::size_t>(rule)];
    if (r_.messages.size() < opt_.max_messages)
      r_.messages.push_back(std::string(to_string(rule)) + ": " + msg);
  }
  const json& event(std::size_t i) const { return ev_[i]; }

  void run() {
    r_.events = ev_.size();
    for (std::size_t i = 0; i < ev_.size(); ++i) scan(i);
    for (const auto& [key, open] : open_) {
      for (std::size_t i : open)
        problem(CheckRule::kNesting, describe(ev_[i]) + ": B without a matching E");
    }
    check_names();
    nest();
    check_flows();
    check_launches();
  }

 private:
  // [SECTION] One pass over traceEvents -------------------------------------------------------

  void scan(std::size_t i) {
    const json& e = ev_[i];
    if (!e.is_object()) {
      problem(CheckRule::kJson, "traceEvents[" + std::to_string(i) + "] is not an object");
      return;
    }
    const auto ph_it = e.find("ph");
    if (ph_it == e.end() || !ph_it->is_string() ||
        ph_it->get_ref<const std::string&>().size() != 1 ||
        kPhases.find(ph_it->get_ref<const std::string&>()[0]) == std::string_view::npos) {
      problem(CheckRule::kPhase, describe(e) + ": ph " +
                                     (ph_it == e.end() ? "missing" : ph_it->dump()) +
                                     " is not a Chrome trace phase");
      return;
    }
    const char ph = ph_it->get_ref<const std::string&>()[0];
    if (ph == 'M') return metadata(e);
    const auto ts_it = e.find("ts");
    if (ts_it == e.end() || !ts_it->is_number() || !std::isfinite(ts_it->get<double>())) {
      problem(CheckRule::kTimestamp, describe(e) + ": ts is not a finite number");
      return;
    }
    const std::int64_t ts = to_ns(ts_it->get<double>());
    const bool thread_scoped = ph != 'C' && ph != 'b' && ph != 'n' && ph != 'e' && ph != 'N' &&
                               ph != 'O' && ph != 'D' && ph != 'R' && ph != 'c' && ph != 'V' &&
                               ph != 'v';
    const auto pid_it = e.find("pid"), tid_it = e.find("tid");
    if (pid_it == e.end() || !is_int(*pid_it) ||
        (thread_scoped && (tid_it == e.end() || !is_int(*tid_it)))) {
      problem(CheckRule::kPidTid,
              describe(e) + ": pid" + (thread_scoped ? "/tid" : "") + " is not an integer");
      return;
    }
    const std::int64_t pid = pid_it->get<std::int64_t>();
    const std::int64_t tid = thread_scoped ? tid_it->get<std::int64_t>() : 0;
    used_pids_.try_emplace(pid, i);
    if (thread_scoped) used_threads_.try_emplace({pid, tid}, i);
    switch (ph) {
      case 'X': {
        const auto dur = e.find("dur");
        if (dur == e.end() || !dur->is_number() || !std::isfinite(dur->get<double>()) ||
            dur->get<double>() < 0) {
          problem(CheckRule::kDuration, describe(e) + ": dur " +
                                            (dur == e.end() ? "missing" : dur->dump()) +
                                            " is not a number >= 0");
          return;
        }
        add_slice(pid, tid, ts, ts + to_ns(dur->get<double>()), i);
        break;
      }
      case 'B':
        open_[{pid, tid}].push_back(i);
        break;
      case 'E': {
        auto& st = open_[{pid, tid}];
        if (st.empty()) {
          problem(CheckRule::kNesting, describe(e) + ": E without a matching B");
          return;
        }
        const std::size_t b = st.back();
        st.pop_back();
        const std::int64_t bts = to_ns(ev_[b]["ts"].get<double>());
        if (ts < bts) problem(CheckRule::kDuration, describe(e) + ": E before its B");
        add_slice(pid, tid, bts, std::max(ts, bts), b);
        break;
      }
      case 'C': {
        const auto args = e.find("args");
        if (args == e.end() || !args->is_object()) {
          problem(CheckRule::kCounter, describe(e) + ": counter without an args object");
          return;
        }
        for (auto it = args->begin(); it != args->end(); ++it) {
          if (!it->is_number())
            problem(CheckRule::kCounter, describe(e) + ": series '" + it.key() + "' is " +
                                             it->dump() + ", not a number");
        }
        break;
      }
      case 's':
      case 't':
      case 'f':
        flow_point(i, e, ph, pid, tid, ts);
        break;
      default:
        break;
    }
  }

  void metadata(const json& e) {
    const auto name = e.find("name");
    if (name == e.end() || !name->is_string()) return;
    const std::string& n = name->get_ref<const std::string&>();
    const bool process = n == "process_name", thread = n == "thread_name";
    if (!process && !thread) return;
    const auto pid = e.find("pid"), tid = e.find("tid");
    if (pid == e.end() || !is_int(*pid) || (thread && (tid == e.end() || !is_int(*tid)))) {
      problem(CheckRule::kPidTid, describe(e) + ": pid/tid is not an integer");
      return;
    }
    const auto args = e.find("args");
    if (args == e.end() || !args->is_object() || !args->contains("name") ||
        !(*args)["name"].is_string()) {
      problem(CheckRule::kNaming, describe(e) + ": " + n + " without a string args.name");
      return;
    }
    if (process)
      named_pids_.insert(pid->get<std::int64_t>());
    else
      named_threads_.insert({pid->get<std::int64_t>(), tid->get<std::int64_t>()});
  }

  void check_names() {
    for (const auto& [pid, i] : used_pids_)
      if (!named_pids_.count(pid))
        problem(CheckRule::kNaming, describe(ev_[i]) + ": pid " + std::to_string(pid) +
                                        " has no process_name metadata");
    for (const auto& [key, i] : used_threads_)
      if (!named_threads_.count(key))
        problem(CheckRule::kNaming,
                describe(ev_[i]) + ": thread (pid " + std::to_string(key.first) + ", tid " +
                    std::to_string(key.second) + ") has no thread_name metadata");
  }

  // [SECTION] Slices: nesting per thread, binding a point to a slice --------------------------

  void add_slice(std::int64_t pid, std::int64_t tid, std::int64_t ts, std::int64_t end,
                 std::size_t i) {
    slices_[{pid, tid}].push_back({ts, end, i, -1});
    ++r_.slices;
    const json& e = ev_[i];
    const std::string cat = e.value("cat", std::string());
    const auto args = e.find("args");
    std::int64_t corr = -1;
    if (args != e.end() && args->is_object()) {
      const auto c = args->find("correlation");
      if (c != args->end() && is_int(*c)) corr = c->get<std::int64_t>();
    }
    if (is_device_cat(cat)) {
      ++r_.device_events;
      if (corr >= 0) device_corr.push_back({corr, i});
    } else if (is_launch_cat(cat) && corr >= 0) {
      if (!launch_of_.try_emplace(corr, i).second)
        problem(CheckRule::kFlowPairing, describe(e) + ": correlation " + std::to_string(corr) +
                                             " also names the launch " +
                                             describe(ev_[launch_of_[corr]]));
      launch_corr.insert(corr);
    }
  }

  // Sorted by (ts, longer first, file order); a stack of open slices gives each its parent, and
  // a slice ending after its parent's end overlaps it without nesting.
  void nest() {
    for (auto& [key, v] : slices_) {
      std::sort(v.begin(), v.end(), [](const Slice& a, const Slice& b) {
        if (a.ts != b.ts) return a.ts < b.ts;
        if (a.end != b.end) return a.end > b.end;
        return a.index < b.index;
      });
      std::vector<int> stack;
      for (std::size_t k = 0; k < v.size(); ++k) {
        while (!stack.empty() && v[static_cast<std::size_t>(stack.back())].end <= v[k].ts)
          stack.pop_back();
        if (!stack.empty()) {
          const Slice& p = v[static_cast<std::size_t>(stack.back())];
          if (v[k].end > p.end)
            problem(CheckRule::kNesting, describe(ev_[v[k].index]) + " overlaps " +
                                             describe(ev_[p.index]) + " without nesting");
          v[k].parent = stack.back();
        }
        stack.push_back(static_cast<int>(k));
      }
    }
  }

  // The innermost slice of the thread enclosing t (ts <= t < end, or t == ts for a slice of zero
  // duration), as Perfetto's slice stack has it at t; -1 when none. Index into traceEvents.
  long enclosing(const ThreadKey& key, std::int64_t t) const {
    const auto it = slices_.find(key);
    if (it == slices_.end()) return -1;
    const std::vector<Slice>& v = it->second;
    auto up = std::upper_bound(v.begin(), v.end(), t,
                               [](std::int64_t x, const Slice& s) { return x < s.ts; });
    if (up == v.begin()) return -1;
    int k = static_cast<int>(up - v.begin()) - 1;
    while (k >= 0) {
      const Slice& s = v[static_cast<std::size_t>(k)];
      if (t < s.end || (s.ts == s.end && t == s.ts)) return static_cast<long>(s.index);
      k = s.parent;
    }
    return -1;
  }
  // The first slice of the thread starting at or after t (a flow end without "bp": "e").
  long next_slice(const ThreadKey& key, std::int64_t t) const {
    const auto it = slices_.find(key);
    if (it == slices_.end()) return -1;
    const std::vector<Slice>& v = it->second;
    auto lb = std::lower_bound(v.begin(), v.end(), t,
                               [](const Slice& s, std::int64_t x) { return s.ts < x; });
    return lb == v.end() ? -1 : static_cast<long>(lb->index);
  }

  // [SECTION] Flows and launches --------------------------------------------------------------

  void flow_point(std::size_t i, const json& e, char ph, std::int64_t pid, std::int64_t tid,
                  std::int64_t ts) {
    const auto id = e.find("id");
    if (id == e.end() || !(is_int(*id) || id->is_string())) {
      problem(CheckRule::kFlowPairing,
              describe(e) + ": flow event without an integer or string id");
      return;
    }
    const std::string cat = e.value("cat", std::string());
    FlowPoint f{ph, e.value("name", std::string()), pid, tid, ts, false, i};
    f.bind_enclosing = ph == 's' || ph == 't' || e.value("bp", std::string()) == "e";
    flows_[{cat, id->dump()}].push_back(std::move(f));
  }

  void check_flows() {
    for (const auto& [key, points] : flows_) {
      ++r_.flows;
      const FlowPoint* s = nullptr;
      const FlowPoint* f = nullptr;
      int ns = 0, nf = 0;
      for (const FlowPoint& p : points) {
        if (p.ph == 's') s = (++ns == 1) ? &p : s;
        if (p.ph == 'f') f = (++nf == 1) ? &p : f;
      }
      const std::string what = "flow " + key.second + " (cat '" + key.first + "') at " +
                               describe(ev_[points.front().index]);
      if (ns != 1 || nf != 1) {
        problem(CheckRule::kFlowPairing, what + ": " + std::to_string(ns) + " starts and " +
                                             std::to_string(nf) + " ends, not one of each");
      }
      if (s && f && s->name != f->name)
        problem(CheckRule::kFlowPairing,
                what + ": start named '" + s->name + "', end '" + f->name + "'");
      long bs = -1, bf = -1;
      if (s) {
        bs = enclosing({s->pid, s->tid}, s->ts);
        if (bs < 0)
          problem(CheckRule::kFlowBinding,
                  "start of " + what + ": no slice encloses it on its thread");
      }
      for (const FlowPoint& p : points) {
        if (p.ph != 't') continue;
        if (enclosing({p.pid, p.tid}, p.ts) < 0)
          problem(CheckRule::kFlowBinding, "step of " + what + ": no slice encloses it");
      }
      if (f) {
        bf = f->bind_enclosing ? enclosing({f->pid, f->tid}, f->ts)
                               : next_slice({f->pid, f->tid}, f->ts);
        if (bf < 0)
          problem(CheckRule::kFlowBinding,
                  "end of " + what +
                      (f->bind_enclosing ? ": no slice encloses it on its thread"
                                         : ": no slice starts at or after it"));
      }
      if (s && f) {
        if (f->ts < s->ts) {
          problem(CheckRule::kFlowOrder,
                  "end of " + what + " " + describe(ev_[f->index]) + " is before its start");
        } else if (bs >= 0 && bf >= 0 && slice_ts(bf) < slice_ts(bs)) {
          // Perfetto orders a flow by its slices' starts: it would draw this one backwards.
          problem(CheckRule::kFlowOrder, what + ": its end binds to " + describe(ev_[bf]) +
                                             ", which starts before its start's slice " +
                                             describe(ev_[bs]));
        }
      }
    }
  }

  std::int64_t slice_ts(long i) const {
    return to_ns(ev_[static_cast<std::size_t>(i)]["ts"].get<double>());
  }

  void check_launches() {
    for (const auto& [corr, i] : device_corr) {
      const auto it = launch_of_.find(corr);
      if (it == launch_of_.end()) {
        if (opt_.require_launch_in_file)
          problem(CheckRule::kLaunchMissing, describe(ev_[i]) + ": correlation " +
                                                 std::to_string(corr) +
                                                 " has no launch in this file");
        continue;
      }
      ++r_.launches_checked;
      const std::int64_t dev = slice_ts(static_cast<long>(i));
      const std::int64_t launch = slice_ts(static_cast<long>(it->second));
      if (dev < launch)
        problem(CheckRule::kCausality, describe(ev_[i]) + " starts " +
                                           std::to_string(launch - dev) + " ns before its launch " +
                                           describe(ev_[it->second]));
    }
  }

  const json& ev_;
  const TraceCheckOptions& opt_;
  TraceCheckResult& r_;
  std::set<std::int64_t> named_pids_;
  std::set<ThreadKey> named_threads_;
  std::map<std::int64_t, std::size_t> used_pids_;       // pid -> first event using it
  std::map<ThreadKey, std::size_t> used_threads_;       // (pid, tid) -> first event using it
  std::map<ThreadKey, std::vector<std::size_t>> open_;  // B events waiting for their E
  std::map<ThreadKey, std::vector<Slice>> slices_;
  std::map<std::pair<std::string, std::string>, std::vector<FlowPoint>> flows_;  // (cat, id)
  std::unordered_map<std::int64_t, std::size_t> launch_of_;  // correlation -> launch event
};

// [SECTION] Files ---------------------------------------------------------------------------------

struct Parsed {
  json doc;
  const json* events = nullptr;
};

bool parse(std::string_view text, Parsed* p, TraceCheckResult* r) {
  auto fail = [&](const std::string& m) {
    ++r->count[static_cast<std::size_t>(CheckRule::kJson)];
    r->messages.push_back(std::string(to_string(CheckRule::kJson)) + ": " + m);
    return false;
  };
  // Checked before the parser builds a DOM level by level (docs/limits.md, "JSON nesting").
  if (core::json_depth(text).depth > core::kMaxJsonDepth)
    return fail("nested deeper than the limit of " + std::to_string(core::kMaxJsonDepth) +
                " levels");
  p->doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (p->doc.is_discarded()) return fail("not valid JSON");
  if (p->doc.is_array()) {
    p->events = &p->doc;
  } else if (p->doc.is_object() && p->doc.contains("traceEvents") &&
             p->doc["traceEvents"].is_array()) {
    p->events = &p->doc["traceEvents"];
  } else {
    return fail("no traceEvents array");
  }
  return true;
}

// A file that cannot be checked at all (missing, a directory, binary, nested past the limit) is
// bad input, not a problem of its content: csim::InputError (trace_check exits 2).
std::string read_text(const std::string& path) {
  std::string text = core::read_text_file(
      path, "trace file", "pass a Chrome trace JSON written by simrun -o or --per-rank");
  core::check_json_depth(text, path);
  return text;
}

}  // namespace

TraceCheckResult check_chrome_trace_string(std::string_view text, const TraceCheckOptions& o) {
  TraceCheckResult r;
  Parsed p;
  if (!parse(text, &p, &r)) return r;
  Checker(*p.events, o, &r).run();
  return r;
}

TraceCheckResult check_chrome_trace_file(const std::string& path, const TraceCheckOptions& o) {
  return check_chrome_trace_string(read_text(path), o);
}

TraceCheckResult check_per_rank_files(const std::vector<std::string>& paths,
                                      const TraceCheckOptions& o) {
  TraceCheckResult all;
  auto merge = [&](const std::string& file, const TraceCheckResult& r) {
    for (std::size_t k = 0; k < kNumCheckRules; ++k) all.count[k] += r.count[k];
    for (const std::string& m : r.messages)
      if (all.messages.size() < o.max_messages) all.messages.push_back(file + ": " + m);
    all.events += r.events;
    all.slices += r.slices;
    all.flows += r.flows;
    all.device_events += r.device_events;
    all.launches_checked += r.launches_checked;
  };
  std::vector<Parsed> docs(paths.size());
  std::map<std::int64_t, std::size_t> launch_file;  // correlation -> file index
  std::vector<std::vector<std::pair<std::int64_t, std::string>>> devices(paths.size());
  for (std::size_t k = 0; k < paths.size(); ++k) {
    TraceCheckResult r;
    const std::string text = read_text(paths[k]);
    if (parse(text, &docs[k], &r)) {
      Checker c(*docs[k].events, o, &r);
      c.run();
      for (std::int64_t corr : c.launch_corr) launch_file.emplace(corr, k);
      for (const auto& [corr, i] : c.device_corr)
        devices[k].push_back({corr, describe(c.event(i))});
    }
    merge(paths[k], r);
  }
  TraceCheckResult cross;
  for (std::size_t k = 0; k < paths.size(); ++k) {
    for (const auto& [corr, what] : devices[k]) {
      const auto it = launch_file.find(corr);
      if (it == launch_file.end() || it->second == k) continue;
      ++cross.count[static_cast<std::size_t>(CheckRule::kLaunchMissing)];
      if (cross.messages.size() < o.max_messages)
        cross.messages.push_back(std::string(to_string(CheckRule::kLaunchMissing)) + ": " + what +
                                 ": its launch (correlation " + std::to_string(corr) + ") is in " +
                                 paths[it->second]);
    }
    merge(paths[k], cross);
    cross = {};
  }
  return all;
}

}  // namespace csim::prof
