// Chrome Trace Event JSON writer (docs/trace-format.md). Streams the trace with a space after
// every colon ("rank": 0), sorted deterministically, timestamps in µs relative to base_ns with
// exact ns fractions ("ts": 1234.567). Writes atomically: temporary file, then rename.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/progress.hpp"
#include "profiler/chrome_trace_lines.hpp"
#include "profiler/trace.hpp"

namespace csim::prof {

void write_chrome_trace(const Trace& trace, std::ostream& out);
// Writes to `path` through `path.tmp.<pid>` and rename; throws std::runtime_error on I/O failure
// (the temporary is removed).
// With `progress`, the phase "writing the trace", counting events and flows (docs/limits.md,
// "Progress").
void write_chrome_trace_file(const Trace& trace, const std::string& path,
                             core::Progress* progress = nullptr);
// One Kineto-style file per rank: profiler/per_rank_traces.hpp.

// A trace formatted while it is built (docs/trace-format.md, "Formatting while building"): each
// event and flow becomes its Chrome-trace line when it is added, through the writer's own
// per-line formatting (chrome_trace_lines.hpp), and is never held as a TraceEvent or FlowEvent.
// Writing it gives the same bytes as writing the Trace that has `rest` and these events and flows
// in the order they were added. Lines are kept per lane (pid, tid) in blocks, with each event's ts,
// so that the writer's order (lanes by (pid, tid), each by ts, stable; flows by id, stable) is
// made at the end without parsing them back.
//
// Streamed (stream_from, what build_formatted_trace makes; docs/trace-format.md, "Streaming the
// text"): the lines are only counted (detail::Count) and are not kept; writing the trace
// calls the producer again and formats each line straight into its place in the output, through
// a small buffer per lane, so that the text never exists in memory in full.
class FormattedTrace {
 public:
  // Everything but the events and flows: base_ns, rank, world_size, metadata, processes,
  // threads, counters. base_ns and the processes and threads that give an event its device and
  // stream args must be set before the first event; the writer checks it (std::logic_error).
  Trace rest;

  // Adds the events and flows of this trace to its argument (the same ones, in the same order,
  // every call); `rest` of its argument need only be filled when wants_rest() of it is true.
  using Producer = std::function<void(FormattedTrace&)>;
  // Streams the trace: calls PRODUCE(*this) now, keeping only each line's length (and `rest`).
  // The trace does not keep PRODUCE: it is written with a producer of the same events passed to
  // the writer (write_chrome_trace_file(trace, path, produce)), made then from data alive then,
  // so that a trace never refers to data that may have moved. STATE is kept for that producer
  // (what its first call computed and the second may reuse; producer_state()).
  void stream_from(const Producer& produce, std::shared_ptr<const void> state = {});
  bool streamed() const { return streamed_; }
  const std::shared_ptr<const void>& producer_state() const { return producer_state_; }
  // False while the producer is called again to write the lines: `rest` is not read then.
  bool wants_rest() const { return mode_ != Mode::kPlace; }

  // NAME: a std::string_view, escaped as it is written, a PlainStr, copied as it is, or a
  // FlaggedStr, either as its flag says (json_raw_format.hpp); CAT is always plain (a literal).
  template <class Name>
  void begin_event(std::int32_t pid, std::int32_t tid, TimeNs ts_ns, TimeNs dur_ns,
                   const Name& name_in, PlainStr cat, EventClass cls, std::int64_t op_id,
                   std::int64_t correlation) {
    const auto name = text(name_in);
    Lane& l = lane(pid, tid);
    cur_ = &l;
    ++events_;
    const PlainStr cls_name = detail::class_name(cls);
    if (mode_ == Mode::kPlace) {
      place_begin(l);
    } else {
      if (ts_ns < l.last_ts_ns) l.sorted = false;
      l.last_ts_ns = ts_ns;
      l.ts_ns.push_back(ts_ns);
      if (mode_ == Mode::kSize) {
        count_ = detail::put_event_head(detail::raw_lit(detail::Count{}, ",\n    {"), cat, name,
                                        pid, tid, ts_ns - base_ns_, dur_ns, l.args, correlation,
                                        op_id, cls_name);
        return;
      }
    }
    Text& t = l.text;
    cur_text_ = &t;
    char* p = room(t, detail::event_head_bound(name, cat, cls_name));
    p = detail::raw_lit(p, ",\n    {");
    p = detail::put_event_head(p, cat, name, pid, tid, ts_ns - base_ns_, dur_ns, l.args,
                               correlation, op_id, cls_name);
    t.cur = p;
  }
  // An arg of the event begun last: std::int64_t, double or a string (as NAME of begin_event).
  // Keys are plain (literals).
  template <class V>
  void arg(PlainStr key, const V& v) {
    if constexpr (std::is_same_v<V, std::int64_t> || std::is_same_v<V, double>) {
      if (mode_ == Mode::kSize) {
        count_ = detail::put_arg(count_, key, v);
        return;
      }
      Text& t = *cur_text_;
      t.cur = detail::put_arg(room(t, detail::arg_bound(key)), key, v);
    } else {
      const auto s = text(v);
      if (mode_ == Mode::kSize) {
        count_ = detail::put_arg(count_, key, s);
        return;
      }
      Text& t = *cur_text_;
      t.cur = detail::put_arg(room(t, detail::arg_bound(key, s)), key, s);
    }
  }
  void end_event() {
    if (mode_ == Mode::kSize) {
      add_size(*cur_, detail::put_event_end(count_).n);
      return;
    }
    Text& t = *cur_text_;
    t.cur = detail::put_event_end(room(t, 2));
    end_unit(*cur_, t);
  }
  void add_flow(std::int64_t id, PlainStr name, PlainStr cat, std::int32_t from_pid,
                std::int32_t from_tid, TimeNs from_ts_ns, std::int32_t to_pid, std::int32_t to_tid,
                TimeNs to_ts_ns) {
    if (!started_) start();
    Lane& l = flows_;
    cur_ = &l;
    ++flows_added_;
    if (mode_ == Mode::kPlace) {
      place_begin(l);
    } else {
      if (id < l.last_ts_ns) l.sorted = false;
      l.last_ts_ns = id;
      l.ts_ns.push_back(id);  // a flow's key is its id
      if (mode_ == Mode::kSize) {
        detail::Count c = detail::raw_lit(detail::Count{}, ",\n    {");
        c = detail::put_flow_end(c, 0, id, from_pid, from_tid, from_ts_ns - base_ns_, cat, name);
        c = detail::raw_lit(c, ",\n    {");
        c = detail::put_flow_end(c, 1, id, to_pid, to_tid, to_ts_ns - base_ns_, cat, name);
        add_size(l, c.n);
        return;
      }
    }
    Text& t = l.text;
    cur_text_ = &t;
    const std::size_t bound = detail::flow_end_bound(name, cat) + 8;
    char* p = room(t, 2 * bound);
    p = detail::raw_lit(p, ",\n    {");
    p = detail::put_flow_end(p, 0, id, from_pid, from_tid, from_ts_ns - base_ns_, cat, name);
    p = detail::raw_lit(p, ",\n    {");
    p = detail::put_flow_end(p, 1, id, to_pid, to_tid, to_ts_ns - base_ns_, cat, name);
    t.cur = p;
    end_unit(l, t);
  }
  std::size_t event_count() const { return events_; }
  std::size_t flow_count() const { return flows_added_; }

  // For the writer: EMIT gets the event lines (each ",\n    {…}") in the writer's order, in runs
  // of adjacent bytes; LANE_ARGS is the writer's device and stream args of a lane, which must be
  // those each lane's events were formatted with. Not streamed only.
  using Emit = std::function<void(const char*, std::size_t)>;
  using LaneArgsOf = std::function<detail::LaneArgs(std::int32_t, std::int32_t)>;
  void emit_events(const Emit& emit, const LaneArgsOf& lane_args) const;
  void emit_flows(const Emit& emit) const;
  TimeNs formatted_base_ns() const { return base_ns_; }

  // For the writer, streamed only: the bytes of the event lines and of the flow lines, each with
  // its leading comma.
  std::uint64_t event_bytes() const;
  std::uint64_t flow_bytes() const { return flows_.bytes; }
  // Where a run of lines goes: AT is its offset among its part's lines (events or flows), each
  // with its comma; the first line of traceEvents drops it.
  struct Region {
    std::uint64_t file_offset = 0;  // of the part's first byte
    bool drops_first = false;       // the part's first byte (a comma) is not written
  };
  // Writes N bytes at offset AT of the output.
  using WriteAt = std::function<void(const char*, std::size_t, std::uint64_t)>;
  // Calls PRODUCE (the producer of stream_from's events) and writes the event and flow lines into
  // their regions through WRITE_AT, in runs of at most a small buffer per lane.
  void place(const WriteAt& write_at, Region events, Region flows, const LaneArgsOf& lane_args,
             const Producer& produce) const;

 private:
  // A string argument as the line functions take it: a PlainStr as it is, anything else (a
  // std::string, a literal, a string_view) as a std::string_view.
  static PlainStr text(PlainStr s) { return s; }
  static FlaggedStr text(FlaggedStr s) { return s; }
  static std::string_view text(std::string_view s) { return s; }
  static std::string_view text(const char* s) { return s; }

  enum class Mode { kText, kSize, kPlace };
  // Lines in blocks that never move (a line never spans two); LINE is where the line being
  // formatted starts, CUR where it ends so far. Placing: one block, holding a run of whole lines
  // that goes to the output at RUN_AT (their offset in the part) and the line being formatted.
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
    void grow(std::size_t n);
    template <class F>
    void for_each_block(F&& f) const;
  };
  // A lane's lines: the events of one (pid, tid), or the flows (keyed by id instead of ts).
  struct Lane {
    std::int32_t pid = 0, tid = 0;
    detail::LaneArgs args;
    Text text;
    std::vector<TimeNs> ts_ns;  // each unit's key (an event's ts, a flow's id)
    TimeNs last_ts_ns = std::numeric_limits<TimeNs>::min();
    bool sorted = true;
    // Streamed: each unit's bytes (an event: one line, a flow: two) and their sum.
    std::vector<std::uint32_t> sizes;
    std::uint64_t bytes = 0;
    // Placing: this lane's offset in its part and how it is written.
    const Lane* sized = nullptr;     // the lane of the streamed trace
    const Region* region = nullptr;  // events' or flows'
    std::uint64_t base = 0;          // offset of the lane's first byte in its part
    std::vector<std::uint64_t> at;   // not sorted: each unit's offset in the lane
    std::size_t next = 0;            // units placed
    std::uint64_t fill = 0;          // sorted: bytes placed
    std::uint64_t run_at = 0;        // offset in the part of the buffer's first byte
    std::size_t buffer = 0;          // the buffer's size
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
  char* room(Text& t, std::size_t n) {
    if (static_cast<std::size_t>(t.lim - t.cur) < n) grow(t, n);
    return t.cur;
  }
  void grow(Text& t, std::size_t n);  // placing: writes the run out first
  // A unit (an event's line, a flow's two) ends at T.cur.
  void end_unit(Lane& l, Text& t) {
    if (mode_ == Mode::kPlace) place_end(l, static_cast<std::size_t>(t.cur - t.line));
    t.line = t.cur;
  }
  // Streamed, first build: a unit of N bytes, counted, not kept.
  void add_size(Lane& l, std::size_t n) {
    l.sizes.push_back(static_cast<std::uint32_t>(n));
    l.bytes += n;
  }
  void place_begin(Lane& l);
  void place_end(Lane& l, std::size_t n);
  void write_run(Lane& l);  // placing: the buffer's whole lines to the output

  Mode mode_ = Mode::kText;
  bool streamed_ = false;
  std::shared_ptr<const void> producer_state_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::unordered_map<std::uint64_t, Lane*> lane_of_;
  Lane* last_[2] = {nullptr, nullptr};
  std::uint64_t last_key_[2] = {0, 0};
  Lane* cur_ = nullptr;
  Text* cur_text_ = nullptr;
  bool started_ = false;
  TimeNs base_ns_ = 0;
  std::unordered_map<std::int32_t, int> gpu_of_pid_;
  std::unordered_map<std::uint64_t, bool> gpu_lane_;
  std::size_t events_ = 0, flows_added_ = 0;
  Lane flows_;
  detail::Count count_;  // streamed, first build: the bytes of the event being counted
  // Placing: the streamed trace, the output.
  const FormattedTrace* sized_ = nullptr;
  const WriteAt* write_at_ = nullptr;
  Region regions_[2];
};

// PRODUCE: for a streamed trace, the producer of its events (FormattedTrace::stream_from); a
// streamed trace without one is a std::logic_error. Ignored for a trace that is not streamed.
void write_chrome_trace(const FormattedTrace& trace, std::ostream& out,
                        const FormattedTrace::Producer& produce = {});
// Atomically, as write_chrome_trace_file of a Trace.
void write_chrome_trace_file(const FormattedTrace& trace, const std::string& path,
                             const FormattedTrace::Producer& produce = {});

}  // namespace csim::prof
