// Per-rank files (per_rank_traces.hpp; docs/trace-format.md, "Per-rank files").
#include "profiler/per_rank_traces.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "profiler/chrome_trace_writer.hpp"
#include "profiler/library_kernel_names.hpp"
#include "profiler/rank_symmetry.hpp"

namespace csim::prof {
namespace {

std::uint64_t lane_key(std::int32_t pid, std::int32_t tid) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 32) |
         static_cast<std::uint32_t>(tid);
}

// Which per-rank file each event goes to (docs/trace-format.md, "Per-rank files"): its own
// process's, except a host event of an op whose device event is on another GPU (DataParallel's
// main thread launching on every GPU): it goes with the device event, so that every launch is in
// the file of the GPU it launches on. A process without a file gets the file count.
std::vector<std::size_t> file_of_events(
    const Trace& trace, const std::unordered_map<std::int32_t, std::size_t>& file_of_pid) {
  std::unordered_map<std::uint64_t, bool> gpu_lane;
  for (const ThreadInfo& th : trace.threads)
    gpu_lane[lane_key(th.pid, th.tid)] = is_gpu_lane(th.role);
  auto on_gpu_lane = [&](const TraceEvent& e) {
    const auto it = gpu_lane.find(lane_key(e.pid, e.tid));
    return it != gpu_lane.end() && it->second;
  };
  std::unordered_map<std::int64_t, std::int32_t> device_pid_of_op, device_pid_of_corr;
  std::set<std::pair<std::int64_t, std::int32_t>>
      device_op_on_pid;  // (op, pid) with a device event
  for (const TraceEvent& e : trace.events) {
    if (!on_gpu_lane(e)) continue;
    if (e.op_id >= 0) {
      device_pid_of_op.try_emplace(e.op_id, e.pid);
      device_op_on_pid.insert({e.op_id, e.pid});
    }
    if (e.correlation >= 0) device_pid_of_corr.try_emplace(e.correlation, e.pid);
  }
  // A launch goes with the device event of its correlation; another host event of an op stays in
  // its own process when the op has a device event there (rank symmetry's expanded mirrors share
  // op ids, each on its own GPU), else goes with the op's device event.
  std::vector<std::size_t> file(trace.events.size());
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    std::int32_t pid = e.pid;
    if (!on_gpu_lane(e)) {
      if (const auto c = device_pid_of_corr.find(e.correlation);
          e.correlation >= 0 && c != device_pid_of_corr.end())
        pid = c->second;
      else if (e.op_id >= 0 && device_op_on_pid.count({e.op_id, e.pid}))
        pid = e.pid;
      else if (const auto it = device_pid_of_op.find(e.op_id);
               e.op_id >= 0 && it != device_pid_of_op.end())
        pid = it->second;
    }
    auto f = file_of_pid.find(pid);
    if (f == file_of_pid.end()) f = file_of_pid.find(e.pid);
    file[i] = f != file_of_pid.end() ? f->second : file_of_pid.size();
  }
  return file;
}

// The file of a mirrored GPU: its representative's file REP (whose process is REP_PID) with the
// mirror's process, rank, pid and ids, as expand_mirrored_gpus gives them (correlation and flow
// ids moved up by one block per mirror: CORR_OFF, FLOW_OFF). A symmetric strategy's GPU launches
// only on itself, so everything of its file is on its own pid.
// docs/trace-format.md, "Library kernel names": in a per-rank file a simulated compute kernel is
// named as its library names it, its layer path kept in arg "op", as Kineto names a real kernel
// by its symbol. Names are cached per (name, kind, dtype, phase): a run repeats them every step.
class LibraryNamer {
 public:
  explicit LibraryNamer(const nlohmann::json& metadata)
      : ctx_(KernelNameContext::from_metadata(metadata)) {}
  TraceEvent operator()(const TraceEvent& e) {
    TraceEvent out = e;
    if (!ctx_ || e.cls != EventClass::kCompute || e.cat != "kernel") return out;
    const std::string* kind = string_arg(e, "kind");
    const std::string* dtype = string_arg(e, "dtype");
    const std::string* phase = string_arg(e, "phase");
    if (kind == nullptr || dtype == nullptr) return out;
    const bool backward = phase != nullptr && *phase == "backward";
    std::string key = e.name;
    key.append(1, '\0').append(*kind).append(1, '\0').append(*dtype).append(backward ? "b" : "f");
    auto it = cache_.find(key);
    // Bounded: a run whose names carry micro-batch or stage fields has as many keys as ops, and
    // the cache must not hold a copy of them all (docs/limits.md, "Measured").
    if (it == cache_.end() && cache_.size() >= kMaxCached) cache_.clear();
    if (it == cache_.end())
      it = cache_
               .emplace(std::move(key), library_kernel_name(*ctx_, *kind, *dtype, backward, e.name))
               .first;
    out.args.push_back(Arg{"op", ArgValue(std::in_place_type<std::string>, e.name)});
    out.name = it->second;
    return out;
  }

 private:
  static constexpr std::size_t kMaxCached = 4096;
  std::optional<KernelNameContext> ctx_;
  std::unordered_map<std::string, std::string> cache_;
};

Trace mirror_file(const Trace& rep, std::int32_t rep_pid, const ProcessInfo& process,
                  const MirroredGpu& m, std::int64_t corr_off, std::int64_t flow_off) {
  Trace r;
  r.base_ns = rep.base_ns;
  r.rank = m.rank;
  r.world_size = rep.world_size;
  r.metadata = rep.metadata;
  r.processes.push_back(process);
  for (const ThreadInfo& th : rep.threads) {
    if (th.pid != rep_pid) continue;
    r.threads.push_back(th);
    r.threads.back().pid = m.gpu;
  }
  r.events.reserve(rep.events.size());
  for (const TraceEvent& e : rep.events) {
    if (e.pid != rep_pid) continue;
    r.events.push_back(e);
    r.events.back().pid = m.gpu;
    if (e.correlation >= 0) r.events.back().correlation += corr_off;
  }
  for (const CounterSample& c : rep.counters) {
    if (c.pid != rep_pid) continue;
    r.counters.push_back(c);
    r.counters.back().pid = m.gpu;
  }
  for (const FlowEvent& f : rep.flows) {
    if (f.from_pid != rep_pid || f.to_pid != rep_pid) continue;
    r.flows.push_back(f);
    r.flows.back().id += flow_off;
    r.flows.back().from_pid = r.flows.back().to_pid = m.gpu;
  }
  return r;
}

}  // namespace

PerRankResult write_per_rank_traces(const Trace& trace, const std::string& dir, PerRankMirrors mode,
                                    core::Progress* progress) {
  if (progress) progress->begin("writing per-rank traces", 0, "");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create directory: " + ec.message());

  // A rank is a GPU process. Processes without a rank (rank < 0) take their position among the
  // processes sorted by pid, so every GPU gets a file.
  std::vector<const ProcessInfo*> procs;
  for (const ProcessInfo& p : trace.processes) procs.push_back(&p);
  std::stable_sort(procs.begin(), procs.end(),
                   [](const ProcessInfo* a, const ProcessInfo* b) { return a->pid < b->pid; });
  std::unordered_map<std::int32_t, std::size_t> file_of_pid;
  for (std::size_t i = 0; i < procs.size(); ++i) file_of_pid.emplace(procs[i]->pid, i);

  // Mirrored GPUs of a symmetric run, by representative pid, each with its block number among
  // the mirrors whose representative is in the trace (expand_mirrored_gpus' order).
  const std::vector<MirroredGpu> mirrors = read_mirrored_gpus(trace.metadata);
  std::map<std::int32_t, std::vector<std::pair<MirroredGpu, std::int64_t>>> mirrors_of;
  std::int64_t block = 0;
  for (const MirroredGpu& m : mirrors)
    if (file_of_pid.count(m.rep)) mirrors_of[m.rep].push_back({m, ++block});
  const bool expand = mode == PerRankMirrors::kEveryRank && block > 0;
  const int world = std::max<int>(
      trace.world_size, static_cast<int>(procs.size()) + (expand ? static_cast<int>(block) : 0));
  std::int64_t max_corr = 0, max_flow = 0;
  for (const TraceEvent& e : trace.events) max_corr = std::max(max_corr, e.correlation);
  for (const FlowEvent& f : trace.flows) max_flow = std::max(max_flow, f.id);
  const int per_node = gpus_per_node_of(trace.metadata);

  // Every event, counter and flow bucketed by file once (O(trace), not O(files x trace)).
  const std::vector<std::size_t> file = file_of_events(trace, file_of_pid);
  std::vector<std::vector<std::size_t>> events_of(procs.size()), counters_of(procs.size()),
      flows_of(procs.size());
  for (std::size_t k = 0; k < trace.events.size(); ++k)
    if (file[k] < procs.size()) events_of[file[k]].push_back(k);
  for (std::size_t k = 0; k < trace.counters.size(); ++k)
    if (const auto it = file_of_pid.find(trace.counters[k].pid); it != file_of_pid.end())
      counters_of[it->second].push_back(k);
  // A flow end's file is that of the event it binds to: the event starting at the end's ts on its
  // lane (the launch for a start, the device event for an end, preferring the one whose
  // correlation is the flow's id), else its process's. A flow is kept in a file only when both
  // ends are in it; a cross-rank flow would dangle in a one-rank file.
  std::map<std::tuple<std::int32_t, std::int32_t, TimeNs>, std::vector<std::size_t>> at;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    at[{e.pid, e.tid, e.ts_ns}].push_back(i);
  }
  auto end_file = [&](std::int64_t id, std::int32_t pid, std::int32_t tid, TimeNs ts) {
    const auto it = at.find({pid, tid, ts});
    if (it == at.end()) return file_of_pid.count(pid) ? file_of_pid.at(pid) : procs.size();
    for (std::size_t i : it->second)
      if (trace.events[i].correlation == id) return file[i];
    return file[it->second.front()];
  };
  for (std::size_t k = 0; k < trace.flows.size(); ++k) {
    const FlowEvent& f = trace.flows[k];
    const std::size_t a = end_file(f.id, f.from_pid, f.from_tid, f.from_ts_ns);
    if (a < procs.size() && end_file(f.id, f.to_pid, f.to_tid, f.to_ts_ns) == a)
      flows_of[a].push_back(k);
  }

  // The metadata every file carries: with every rank written, the mirrors list is dropped and
  // rank_symmetry.expanded set, as in an expanded trace (rank_symmetry.hpp).
  nlohmann::json metadata = trace.metadata;
  if (expand) {
    nlohmann::json& rs = metadata["rank_symmetry"];
    rs.erase("mirrors");
    rs["expanded"] = true;
  }
  auto path_of = [&](int rank) {
    return (std::filesystem::path(dir) / ("rank-" + std::to_string(rank) + ".json")).string();
  };

  PerRankResult out;
  out.world_size = world;
  LibraryNamer namer(trace.metadata);
  core::ProgressCount count(progress, "writing per-rank traces",
                            static_cast<std::int64_t>(procs.size()) + (expand ? block : 0), "files",
                            1);
  for (std::size_t i = 0; i < procs.size(); ++i) {
    const ProcessInfo& p = *procs[i];
    const int rank = p.rank >= 0 ? p.rank : static_cast<int>(i);
    const auto mine = mirrors_of.find(p.pid);
    PerRankFile info;
    info.rank = rank;
    info.stands_for.push_back(rank);
    if (!expand && mine != mirrors_of.end())
      for (const auto& [m, b] : mine->second) info.stands_for.push_back(m.rank);
    Trace r;
    r.base_ns = trace.base_ns;
    r.rank = rank;
    r.world_size = world;
    r.metadata = metadata;
    if (info.stands_for.size() > 1) r.metadata["rank_symmetry"]["stands_for"] = info.stands_for;
    std::set<std::int32_t> pids{p.pid};
    std::set<std::pair<std::int32_t, std::int32_t>> lanes;
    r.events.reserve(events_of[i].size());
    for (std::size_t k : events_of[i]) {
      const TraceEvent& e = trace.events[k];
      r.events.push_back(namer(e));
      pids.insert(e.pid);
      lanes.insert({e.pid, e.tid});
    }
    // This GPU's process first, then those whose host threads launched on it.
    r.processes.push_back(p);
    for (const ProcessInfo& q : trace.processes)
      if (q.pid != p.pid && pids.count(q.pid)) r.processes.push_back(q);
    for (const ThreadInfo& th : trace.threads)
      if (th.pid == p.pid || lanes.count({th.pid, th.tid})) r.threads.push_back(th);
    for (std::size_t k : counters_of[i]) r.counters.push_back(trace.counters[k]);
    for (std::size_t k : flows_of[i]) r.flows.push_back(trace.flows[k]);
    write_chrome_trace_file(r, path_of(rank));
    count.add();
    out.files.push_back(std::move(info));
    if (!expand || mine == mirrors_of.end()) continue;
    for (const auto& [m, b] : mine->second) {
      const Trace mr = mirror_file(r, p.pid, mirror_process(p, m, per_node), m, (max_corr + 1) * b,
                                   (max_flow + 1) * b);
      write_chrome_trace_file(mr, path_of(m.rank));
      count.add();
      out.files.push_back(PerRankFile{m.rank, {m.rank}, true});
    }
  }
  count.finish();
  return out;
}

std::string rank_ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string s;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += std::to_string(ranks[i]);
    if (j > i) s += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace csim::prof
