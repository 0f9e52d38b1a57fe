// Chrome Trace Event JSON writer (docs/trace-format.md). Streams the trace with a space after
// every colon ("rank": 0), sorted deterministically, timestamps in µs relative to base_ns with
// exact ns fractions ("ts": 1234.567). Writes atomically: temporary file, then rename.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "profiler/chrome_trace_lines.hpp"
#include "profiler/trace.hpp"

namespace csim::prof {

void write_chrome_trace(const Trace& trace, std::ostream& out);
// Writes to `path` through `path.tmp.<pid>` and rename; throws std::runtime_error on I/O failure
// (the temporary is removed).
void write_chrome_trace_file(const Trace& trace, const std::string& path);
// One Kineto-style file per rank (GPU process): DIR/rank-<r>.json, each with distributedInfo.
void write_per_rank_traces(const Trace& trace, const std::string& dir);

// A trace formatted while it is built (docs/trace-format.md, "Formatting while building"): each
// event and flow becomes its Chrome-trace line when it is added, through the writer's own
// per-line formatting (chrome_trace_lines.hpp), and is never held as a TraceEvent or FlowEvent.
// Writing it gives the same bytes as writing the Trace that has `rest` and these events and flows
// in the order they were added. Lines are kept per lane (pid, tid) in blocks, with each event's ts,
// so that the writer's order (lanes by (pid, tid), each by ts, stable; flows by id, stable) is
// made at the end without parsing them back.
class FormattedTrace {
 public:
  // Everything but the events and flows: base_ns, rank, world_size, metadata, processes,
  // threads, counters. base_ns and the processes and threads that give an event its device and
  // stream args must be set before the first event; the writer checks it (std::logic_error).
  Trace rest;

  void begin_event(std::int32_t pid, std::int32_t tid, TimeNs ts_ns, TimeNs dur_ns,
                   std::string_view name, std::string_view cat, EventClass cls, std::int64_t op_id,
                   std::int64_t correlation) {
    Lane& l = lane(pid, tid);
    if (ts_ns < l.last_ts_ns) l.sorted = false;
    l.last_ts_ns = ts_ns;
    l.ts_ns.push_back(ts_ns);
    const std::string_view cls_name = detail::class_name(cls);
    char* p = l.text.room(detail::event_head_bound(name, cat, cls_name));
    p = detail::raw_lit(p, ",\n    {");
    p = detail::put_event_head(p, cat, name, pid, tid, ts_ns - base_ns_, dur_ns, l.args,
                               correlation, op_id, cls_name);
    l.text.cur = p;
    cur_ = &l;
    ++events_;
  }
  // An arg of the event begun last: std::int64_t, double or a string.
  template <class V>
  void arg(std::string_view key, const V& v) {
    Text& t = cur_->text;
    if constexpr (std::is_same_v<V, std::int64_t> || std::is_same_v<V, double>) {
      t.cur = detail::put_arg(t.room(detail::arg_bound(key)), key, v);
    } else {
      const std::string_view sv(v);
      t.cur = detail::put_arg(t.room(detail::arg_bound(key, sv)), key, sv);
    }
  }
  void end_event() {
    Text& t = cur_->text;
    t.cur = detail::put_event_end(t.room(2));
    t.line = t.cur;
  }
  void add_flow(std::int64_t id, std::string_view name, std::string_view cat, std::int32_t from_pid,
                std::int32_t from_tid, TimeNs from_ts_ns, std::int32_t to_pid, std::int32_t to_tid,
                TimeNs to_ts_ns) {
    if (!flow_ids_.empty() && id < flow_ids_.back()) flows_sorted_ = false;
    flow_ids_.push_back(id);
    if (!started_) start();
    const std::size_t bound = detail::flow_end_bound(name, cat) + 8;
    char* p = flows_.room(2 * bound);
    p = detail::raw_lit(p, ",\n    {");
    p = detail::put_flow_end(p, 0, id, from_pid, from_tid, from_ts_ns - base_ns_, cat, name);
    p = detail::raw_lit(p, ",\n    {");
    p = detail::put_flow_end(p, 1, id, to_pid, to_tid, to_ts_ns - base_ns_, cat, name);
    flows_.cur = p;
    flows_.line = p;
  }
  std::size_t event_count() const { return events_; }
  std::size_t flow_count() const { return flow_ids_.size(); }

  // For the writer: EMIT gets the event lines (each ",\n    {…}") in the writer's order, in runs
  // of adjacent bytes; LANE_ARGS is the writer's device and stream args of a lane, which must be
  // those each lane's events were formatted with.
  using Emit = std::function<void(const char*, std::size_t)>;
  void emit_events(
      const Emit& emit,
      const std::function<detail::LaneArgs(std::int32_t, std::int32_t)>& lane_args) const;
  void emit_flows(const Emit& emit) const;
  TimeNs formatted_base_ns() const { return base_ns_; }

 private:
  // Lines in blocks that never move (a line never spans two); LINE is where the line being
  // formatted starts, CUR where it ends so far.
  struct Free {
    void operator()(char* p) const noexcept { std::free(p); }
  };
  struct Block {
    std::unique_ptr<char[], Free> data;  // malloc'd
    std::size_t used = 0, cap = 0;       // bytes of whole lines
  };
  struct Text {
    std::vector<Block> blocks;
    char* line = nullptr;
    char* cur = nullptr;
    char* lim = nullptr;
    char* room(std::size_t n) {
      if (static_cast<std::size_t>(lim - cur) < n) grow(n);
      return cur;
    }
    void grow(std::size_t n);
    template <class F>
    void for_each_block(F&& f) const;
  };
  struct Lane {
    std::int32_t pid = 0, tid = 0;
    detail::LaneArgs args;
    Text text;
    std::vector<TimeNs> ts_ns;
    TimeNs last_ts_ns = 0;
    bool sorted = true;
  };
  static std::uint64_t key(std::int32_t pid, std::int32_t tid) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 32) |
           static_cast<std::uint32_t>(tid);
  }
  Lane& lane(std::int32_t pid, std::int32_t tid) {
    const std::uint64_t k = key(pid, tid);
    if (last_[0] && last_key_[0] == k) return *last_[0];
    if (last_[1] && last_key_[1] == k) {
      std::swap(last_[0], last_[1]);
      std::swap(last_key_[0], last_key_[1]);
      return *last_[0];
    }
    Lane* l = find_lane(k, pid, tid);
    last_[1] = last_[0];
    last_key_[1] = last_key_[0];
    last_[0] = l;
    last_key_[0] = k;
    return *l;
  }
  Lane* find_lane(std::uint64_t k, std::int32_t pid, std::int32_t tid);
  void start();  // at the first event or flow: base_ns and the lanes' args from `rest`

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::unordered_map<std::uint64_t, Lane*> lane_of_;
  Lane* last_[2] = {nullptr, nullptr};
  std::uint64_t last_key_[2] = {0, 0};
  Lane* cur_ = nullptr;
  bool started_ = false;
  TimeNs base_ns_ = 0;
  std::unordered_map<std::int32_t, int> gpu_of_pid_;
  std::unordered_map<std::uint64_t, bool> gpu_lane_;
  std::size_t events_ = 0;
  Text flows_;
  std::vector<std::int64_t> flow_ids_;
  bool flows_sorted_ = true;
};

void write_chrome_trace(const FormattedTrace& trace, std::ostream& out);
// Atomically, as write_chrome_trace_file of a Trace.
void write_chrome_trace_file(const FormattedTrace& trace, const std::string& path);

}  // namespace csim::prof
