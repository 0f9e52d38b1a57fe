// The Chrome-trace writer's per-line formatting (docs/trace-format.md, "Formatting while
// building"): a complete event's line in three parts (head, args, end) and a flow's two lines.
// Both paths call these: write_chrome_trace of a Trace (chrome_trace_writer.cpp) and a
// FormattedTrace made while the trace is built (chrome_trace_writer.hpp), so their files are the
// same bytes. Each writes at P, which has room for the bound its caller reserved, or counts the
// bytes it would write when P is a detail::Count (json_raw_format.hpp, "Counting").
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "profiler/json_raw_format.hpp"
#include "profiler/trace.hpp"

namespace csim::prof::detail {

// The args every event of a lane gets from the lane's process and thread.
struct LaneArgs {
  int gpu = -1;           // the pid's GPU index, -1 when the process has none
  bool gpu_lane = false;  // the (pid, tid) lane is a CUDA stream
  bool operator==(const LaneArgs&) const = default;
};

// to_string(EventClass) of each class, its length known (no strlen per event) and checked plain
// once (PlainStr::checked; the spellings are ASCII words, so value() never throws).
inline PlainStr class_name(EventClass c) {
  static const std::array<PlainStr, kEventClassCount> names = [] {
    std::array<PlainStr, kEventClassCount> n;
    for (int k = 0; k < kEventClassCount; ++k)
      n[k] = PlainStr::checked(to_string(static_cast<EventClass>(k))).value();
    return n;
  }();
  return names[static_cast<std::size_t>(c)];
}

// Every string parameter below (a category, a name, a key, a value) is a std::string_view,
// escaped as it is written, a PlainStr, copied as it is, or a FlaggedStr, either as its flag says
// (json_raw_format.hpp).

// Room for an event's head and end ("}}"), with the line's opening.
template <class Name, class Cat>
inline std::size_t event_head_bound(const Name& name, const Cat& cat, PlainStr cls) {
  return 400 + raw_string_bound(cat) + raw_string_bound(name) + raw_string_bound(cls);
}
template <class Key, class Value>
inline std::size_t arg_bound(const Key& key, const Value& value) {
  return 4 + raw_string_bound(key) + raw_string_bound(value);
}
template <class Key>
inline std::size_t arg_bound(const Key& key) {
  return 4 + raw_string_bound(key) + kRawNumberBound;
}

// The lane and start shared by complete events and flow ends: , "pid": …, "tid": …, "ts": ….
template <class P>
inline P put_lane_ts(P p, std::int32_t pid, std::int32_t tid, TimeNs rel_ts_ns) {
  p = raw_lit(p, ", \"pid\": ");
  p = raw_int(p, pid);
  p = raw_lit(p, ", \"tid\": ");
  p = raw_int(p, tid);
  p = raw_lit(p, ", \"ts\": ");
  return raw_us(p, rel_ts_ns);
}

// The event's line after its opening, up to the class arg: "ph" … "args": {…, "class": "…".
template <class P, class Cat, class Name>
inline P put_event_head(P p, const Cat& cat, const Name& name, std::int32_t pid, std::int32_t tid,
                        TimeNs rel_ts_ns, TimeNs dur_ns, LaneArgs lane, std::int64_t correlation,
                        std::int64_t op_id, PlainStr cls) {
  p = raw_lit(p, "\"ph\": \"X\", \"cat\": ");
  p = raw_string(p, cat);
  p = raw_lit(p, ", \"name\": ");
  p = raw_string(p, name);
  p = put_lane_ts(p, pid, tid, rel_ts_ns);
  p = raw_lit(p, ", \"dur\": ");
  p = raw_us(p, dur_ns);
  p = raw_lit(p, ", \"args\": {");
  if (lane.gpu >= 0) {
    p = raw_lit(p, "\"device\": ");
    p = raw_int(p, lane.gpu);
    p = raw_lit(p, ", ");
  }
  if (lane.gpu_lane) {
    p = raw_lit(p, "\"stream\": ");
    p = raw_int(p, tid);
    p = raw_lit(p, ", ");
  }
  if (correlation >= 0) {
    p = raw_lit(p, "\"correlation\": ");
    p = raw_int(p, correlation);
    p = raw_lit(p, ", ");
  }
  if (op_id >= 0) {
    p = raw_lit(p, "\"op_id\": ");
    p = raw_int(p, op_id);
    p = raw_lit(p, ", ");
  }
  p = raw_lit(p, "\"class\": ");
  return raw_string(p, cls);
}

// One further arg: , "key": value.
template <class P, class Key>
inline P put_arg_key(P p, const Key& key) {
  p = raw_lit(p, ", ");
  p = raw_string(p, key);
  return raw_lit(p, ": ");
}
template <class P, class Key>
inline P put_arg(P p, const Key& key, std::int64_t v) {
  return raw_int(put_arg_key(p, key), v);
}
template <class P, class Key>
inline P put_arg(P p, const Key& key, double v) {
  return raw_double_arg(put_arg_key(p, key), v);
}
// A string value: a std::string_view, a PlainStr or a FlaggedStr (as a name, above).
template <class P, class Key, class S>
requires(!std::is_arithmetic_v<S>) inline P put_arg(P p, const Key& key, const S& v) {
  return raw_string(put_arg_key(p, key), v);
}
template <class P>
inline P put_event_end(P p) {
  return raw_lit(p, "}}");
}

// Room for one end of a flow, with the line's opening.
template <class Name, class Cat>
inline std::size_t flow_end_bound(const Name& name, const Cat& cat) {
  return 200 + raw_string_bound(cat) + raw_string_bound(name);
}
// One end of a flow after its line's opening: "s" (END 0) or "f" (END 1, bound to the enclosing
// slice with "bp": "e", as Kineto does).
template <class P, class Cat, class Name>
inline P put_flow_end(P p, int end, std::int64_t id, std::int32_t pid, std::int32_t tid,
                      TimeNs rel_ts_ns, const Cat& cat, const Name& name) {
  p = end == 0 ? raw_lit(p, "\"ph\": \"s\", \"id\": ") : raw_lit(p, "\"ph\": \"f\", \"id\": ");
  p = raw_int(p, id);
  p = put_lane_ts(p, pid, tid, rel_ts_ns);
  p = raw_lit(p, ", \"cat\": ");
  p = raw_string(p, cat);
  p = raw_lit(p, ", \"name\": ");
  p = raw_string(p, name);
  return end == 0 ? raw_lit(p, "}") : raw_lit(p, ", \"bp\": \"e\"}");
}

}  // namespace csim::prof::detail
