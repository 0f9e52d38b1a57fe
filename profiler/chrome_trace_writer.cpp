// Chrome Trace Event JSON writer (docs/trace-format.md).
//
// Index:
//  [SECTION] Formatting primitives: the output chunk; JSON strings and integers for the header
//            (the per-line primitives are in json_raw_format.hpp)
//  [SECTION] Top-level object and metadata
//  [SECTION] Events, counters, flows
//  [SECTION] Formatting while building (FormattedTrace: the lines' blocks, the writer's order)
//  [SECTION] Streaming the text (a streamed FormattedTrace: lines counted, then written in place)
//  [SECTION] Files (per-rank files: per_rank_traces.cpp)
//
// The output is built in a 1 MiB chunk flushed to the stream when full. An event, counter or flow
// line reserves a bound on its length and is formatted in place (no allocation, no capacity
// check per field); events are ordered by lane buckets, each sorted only when out of order.
#include "profiler/chrome_trace_writer.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "profiler/atomic_file.hpp"
#include "profiler/json_raw_format.hpp"

namespace csim::prof {
namespace {

using detail::kRawNumberBound;
using detail::raw_counter_value;
using detail::raw_double_arg;
using detail::raw_int;
using detail::raw_lit;
using detail::raw_string;
using detail::raw_string_bound;
using detail::raw_us;

// [SECTION] Formatting primitives ------------------------------------------------------------

// Output in 1 MiB chunks written to the stream, or at their offsets (a streamed FormattedTrace:
// its event and flow lines are written at their places later, skip() leaves room for them). Event,
// counter and flow lines are formatted in place (detail::raw_*, after reserve() of a bound on the
// line's length); the few other lines are built in a staging string (buf()) that the next
// reserve() or flush() moves in.
class Sink {
 public:
  explicit Sink(std::ostream& out) : out_(&out), data_(new char[kChunk]), cap_(kChunk) {}
  explicit Sink(const FormattedTrace::WriteAt& at)
      : at_(&at), data_(new char[kChunk]), cap_(kChunk) {}
  std::string& buf() { return text_; }
  void maybe_flush() {
    if (text_.size() >= kChunk) move_text();
  }
  char* reserve(std::size_t n) {
    if (!text_.empty()) move_text();
    return room(n);
  }
  void commit(char* end) { size_ = static_cast<std::size_t>(end - data_.get()); }
  // N bytes at D: copied into the chunk when they fit, else written directly after it.
  void write_through(const char* d, std::size_t n) {
    if (!text_.empty()) move_text();
    if (size_ + n <= cap_) {
      std::memcpy(data_.get() + size_, d, n);
      size_ += n;
      return;
    }
    write_out();
    if (n <= cap_) {
      std::memcpy(data_.get(), d, n);
      size_ = n;
      return;
    }
    put(d, n);
  }
  void flush() {
    move_text();
    write_out();
  }
  // Offset of the next byte (everything before it flushed: after flush()).
  std::uint64_t pos() const { return pos_; }
  // Leaves N bytes for lines written later at their offsets (offset output only).
  void skip(std::uint64_t n) {
    flush();
    pos_ += n;
  }

 private:
  static constexpr std::size_t kChunk = 1 << 20;
  char* room(std::size_t n) {
    if (size_ + n > cap_) {
      write_out();
      if (n > cap_) {
        data_.reset(new char[n]);
        cap_ = n;
      }
    }
    return data_.get() + size_;
  }
  void move_text() {
    char* p = room(text_.size());
    std::memcpy(p, text_.data(), text_.size());
    size_ += text_.size();
    text_.clear();
  }
  void put(const char* d, std::size_t n) {
    if (at_) {
      (*at_)(d, n, pos_);
    } else {
      out_->write(d, static_cast<std::streamsize>(n));
    }
    pos_ += n;
  }
  void write_out() {
    put(data_.get(), size_);
    size_ = 0;
  }
  std::ostream* out_ = nullptr;
  const FormattedTrace::WriteAt* at_ = nullptr;
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0, cap_ = 0;
  std::string text_;
  std::uint64_t pos_ = 0;
};

// Appends a string literal with its length known at compile time (no strlen per call).
template <std::size_t N>
void put_lit(std::string& b, const char (&s)[N]) {
  b.append(s, N - 1);
}

// Bytes that need escaping in a JSON string: '"', '\\' and control characters.
constexpr std::array<bool, 256> kNeedsEscape = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  t['"'] = true;
  t['\\'] = true;
  return t;
}();

void put_string(std::string& b, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  b += '"';
  std::size_t run = 0;  // start of the current run of bytes that need no escaping
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!kNeedsEscape[c]) continue;
    b.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        put_lit(b, "\\\"");
        break;
      case '\\':
        put_lit(b, "\\\\");
        break;
      case '\n':
        put_lit(b, "\\n");
        break;
      case '\r':
        put_lit(b, "\\r");
        break;
      case '\t':
        put_lit(b, "\\t");
        break;
      case '\b':
        put_lit(b, "\\b");
        break;
      case '\f':
        put_lit(b, "\\f");
        break;
      default:
        put_lit(b, "\\u00");
        b += kHex[c >> 4];
        b += kHex[c & 15];
    }
  }
  b.append(s.data() + run, s.size() - run);
  b += '"';
}

void put_int(std::string& b, std::int64_t v) {
  char tmp[24];
  const auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  b.append(tmp, r.ptr);
}

// nlohmann JSON on one line with ": " and ", " separators (nlohmann's compact dump has no spaces).
void put_json_inline(std::string& b, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      b += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) put_lit(b, ", ");
        first = false;
        put_string(b, it.key());
        put_lit(b, ": ");
        put_json_inline(b, it.value());
      }
      b += '}';
      break;
    }
    case nlohmann::json::value_t::array: {
      b += '[';
      bool first = true;
      for (const auto& v : j) {
        if (!first) put_lit(b, ", ");
        first = false;
        put_json_inline(b, v);
      }
      b += ']';
      break;
    }
    case nlohmann::json::value_t::string:
      put_string(b, j.get_ref<const std::string&>());
      break;
    default:
      b += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

// [SECTION] Top-level object and metadata ------------------------------------------------------

using LaneInfo = detail::LaneArgs;

// The order events are written in: by (pid, tid, ts), then by position in the trace. Events are
// first grouped by lane (pid, tid), keeping their positions in order, and a lane is sorted by ts
// only when it is not in order already (executors and our reader emit each lane in time order):
// the same order as one sort of all events by that key, in about linear time.
std::vector<std::uint32_t> event_order(const std::vector<TraceEvent>& ev) {
  const auto lane_of = [](const TraceEvent& e) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(e.pid)) << 32) |
           static_cast<std::uint32_t>(e.tid);
  };
  // Lane ids in first-seen order; the previous event's lane is the usual answer.
  std::unordered_map<std::uint64_t, std::uint32_t> lane_index;
  std::vector<std::pair<std::int32_t, std::int32_t>> lanes;
  std::vector<std::uint32_t> lane_of_event(ev.size()), count;
  std::uint64_t last_key = 0;
  std::uint32_t last = 0;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const std::uint64_t k = lane_of(ev[i]);
    if (lanes.empty() || k != last_key) {
      const auto [it, fresh] = lane_index.try_emplace(k, static_cast<std::uint32_t>(lanes.size()));
      if (fresh) {
        lanes.emplace_back(ev[i].pid, ev[i].tid);
        count.push_back(0);
      }
      last_key = k;
      last = it->second;
    }
    lane_of_event[i] = last;
    ++count[last];
  }
  // Lanes by (pid, tid) (signed, as the key compares them); each lane's slice of ORDER.
  std::vector<std::uint32_t> by_key(lanes.size());
  std::iota(by_key.begin(), by_key.end(), 0u);
  std::sort(by_key.begin(), by_key.end(),
            [&](std::uint32_t a, std::uint32_t b) { return lanes[a] < lanes[b]; });
  std::vector<std::size_t> offset(lanes.size());
  std::size_t at = 0;
  for (const std::uint32_t l : by_key) {
    offset[l] = at;
    at += count[l];
  }
  std::vector<std::uint32_t> order(ev.size());
  std::vector<std::size_t> fill = offset;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    order[fill[lane_of_event[i]]++] = static_cast<std::uint32_t>(i);
  }
  const auto by_ts = [&](std::uint32_t a, std::uint32_t b) { return ev[a].ts_ns < ev[b].ts_ns; };
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(offset[l]);
    const auto last_it = first + static_cast<std::ptrdiff_t>(count[l]);
    // Stable: equal timestamps keep their positions (the key's last field).
    if (!std::is_sorted(first, last_it, by_ts)) std::stable_sort(first, last_it, by_ts);
  }
  return order;
}

class Writer {
 public:
  // BODY: the events and flows already formatted, written instead of T's (T is its `rest`).
  Writer(const Trace& t, std::ostream& out, const FormattedTrace* body = nullptr)
      : trace_(t), body_(body), sink_(out) {
    index_lanes();
  }
  // A streamed BODY, its lines written at their offsets through AT after the rest.
  Writer(const Trace& t, const FormattedTrace::WriteAt& at, const FormattedTrace& body,
         const FormattedTrace::Producer& produce)
      : trace_(t), body_(&body), at_(&at), produce_(&produce), sink_(at) {
    index_lanes();
  }

  // Counts the events and flows written (Trace's own, not a formatted body's) into `count`.
  void count_into(core::ProgressCount* count) { count_ = count; }

  void write() {
    std::string& b = sink_.buf();
    put_lit(b, "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"rank\": ");
    put_int(b, trace_.rank);
    put_lit(b, ", \"world_size\": ");
    put_int(b, trace_.world_size);
    if (const auto it = trace_.metadata.find("distributedInfo");
        it != trace_.metadata.end() && it->is_object()) {
      for (auto kv = it->begin(); kv != it->end(); ++kv) {
        if (kv.key() == "rank" || kv.key() == "world_size") continue;
        put_lit(b, ", ");
        put_string(b, kv.key());
        put_lit(b, ": ");
        put_json_inline(b, kv.value());
      }
    }
    put_lit(b, "},\n");
    if (const auto it = trace_.metadata.find("deviceProperties");
        it != trace_.metadata.end() && it->is_array()) {
      put_lit(b, "  \"deviceProperties\": [");
      bool first = true;
      for (const auto& d : *it) {
        b += first ? "\n    " : ",\n    ";
        first = false;
        put_json_inline(b, d);
      }
      put_lit(b, "\n  ],\n");
    }
    put_lit(b, "  \"baseTimeNanoseconds\": ");
    put_int(b, trace_.base_ns);
    put_lit(b, ",\n  \"clustersim\": ");
    // Metadata (scenario, strategy, backend, …) indented over several lines so that diffs of
    // golden traces show which key changed; nlohmann's dump(2) writes "key": value.
    nlohmann::json meta = trace_.metadata.is_object() ? trace_.metadata : nlohmann::json::object();
    meta.erase("deviceProperties");
    meta.erase("distributedInfo");
    const std::string dumped = meta.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    for (const char c : dumped) {
      b += c;
      if (c == '\n') put_lit(b, "  ");
    }
    put_lit(b, ",\n  \"traceEvents\": [");
    write_metadata_events();
    FormattedTrace::Region events, flows;
    if (at_) {
      check_base_ns();
      events = leave_region(body_->event_bytes());
    } else if (body_) {
      write_formatted_events();
    } else {
      write_events();
    }
    write_counters();
    if (at_) {
      flows = leave_region(body_->flow_bytes());
    } else if (body_) {
      body_->emit_flows([this](const char* d, std::size_t n) { put_formatted(d, n); });
    } else {
      write_flows();
    }
    put_lit(b, "\n  ],\n  \"displayTimeUnit\": \"ns\"\n}\n");
    sink_.flush();
    if (at_) {
      body_->place(
          *at_, events, flows,
          [this](std::int32_t pid, std::int32_t tid) { return lane_info(pid, tid); }, *produce_);
    }
  }

 private:
  static std::uint64_t key(std::int32_t pid, std::int32_t tid) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 32) |
           static_cast<std::uint32_t>(tid);
  }

  void index_lanes() {
    for (const ProcessInfo& p : trace_.processes) gpu_of_pid_[p.pid] = p.gpu;
    for (const ThreadInfo& th : trace_.threads) {
      gpu_lane_[key(th.pid, th.tid)] = is_gpu_lane(th.role);
    }
  }

  // Room for BYTES of lines formatted beforehand (each ",\n    {…}"), written later at their
  // offsets; the first line of traceEvents drops its comma.
  FormattedTrace::Region leave_region(std::uint64_t bytes) {
    sink_.flush();
    FormattedTrace::Region r;
    r.file_offset = sink_.pos();
    r.drops_first = first_line_ && bytes > 0;
    sink_.skip(bytes - (r.drops_first ? 1 : 0));
    if (bytes > 0) first_line_ = false;
    return r;
  }

  // Opens the next line of traceEvents.
  std::string& line() {
    sink_.maybe_flush();
    std::string& b = sink_.buf();
    b += first_line_ ? "\n    {" : ",\n    {";
    first_line_ = false;
    return b;
  }

  // Opens the next line of traceEvents in place, with room for BOUND more bytes.
  char* open_line(std::size_t bound) {
    char* p = sink_.reserve(bound + 8);
    p = first_line_ ? raw_lit(p, "\n    {") : raw_lit(p, ",\n    {");
    first_line_ = false;
    return p;
  }

  void write_metadata_events() {
    std::vector<const ProcessInfo*> procs;
    for (const ProcessInfo& p : trace_.processes) procs.push_back(&p);
    std::stable_sort(procs.begin(), procs.end(),
                     [](const ProcessInfo* a, const ProcessInfo* b) { return a->pid < b->pid; });
    for (const ProcessInfo* p : procs) {
      std::string& b = line();
      put_lit(b, "\"ph\": \"M\", \"name\": \"process_name\", \"pid\": ");
      put_int(b, p->pid);
      put_lit(b, ", \"tid\": 0, \"args\": {\"name\": ");
      put_string(b, p->name);
      put_lit(b, ", \"rank\": ");
      put_int(b, p->rank);
      put_lit(b, ", \"node\": ");
      put_int(b, p->node);
      put_lit(b, ", \"gpu\": ");
      put_int(b, p->gpu);
      put_lit(b, ", \"capacity_bytes\": ");
      put_int(b, p->capacity_bytes);
      put_lit(b, "}}");
      std::string& c = line();
      put_lit(c, "\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": ");
      put_int(c, p->pid);
      put_lit(c, ", \"tid\": 0, \"args\": {\"sort_index\": ");
      put_int(c, p->sort_index);
      put_lit(c, "}}");
    }
    std::vector<const ThreadInfo*> threads;
    for (const ThreadInfo& th : trace_.threads) threads.push_back(&th);
    std::stable_sort(threads.begin(), threads.end(), [](const ThreadInfo* a, const ThreadInfo* b) {
      return a->pid != b->pid ? a->pid < b->pid : a->tid < b->tid;
    });
    for (const ThreadInfo* th : threads) {
      std::string& b = line();
      put_lit(b, "\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": ");
      put_int(b, th->pid);
      put_lit(b, ", \"tid\": ");
      put_int(b, th->tid);
      put_lit(b, ", \"args\": {\"name\": ");
      put_string(b, th->name);
      put_lit(b, ", \"role\": ");
      put_string(b, to_string(th->role));
      put_lit(b, "}}");
      std::string& c = line();
      put_lit(c, "\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": ");
      put_int(c, th->pid);
      put_lit(c, ", \"tid\": ");
      put_int(c, th->tid);
      put_lit(c, ", \"args\": {\"sort_index\": ");
      put_int(c, th->sort_index);
      put_lit(c, "}}");
    }
  }

  // [SECTION] Events, counters, flows ----------------------------------------------------------

  // Lines formatted beforehand, each ",\n    {…}": the first line of traceEvents drops its comma.
  void put_formatted(const char* d, std::size_t n) {
    if (n == 0) return;
    if (first_line_) {
      ++d;
      --n;
      first_line_ = false;
    }
    sink_.write_through(d, n);
  }

  void check_base_ns() const {
    if (body_->formatted_base_ns() != trace_.base_ns && body_->event_count() + body_->flow_count())
      throw std::logic_error("FormattedTrace: base_ns changed after the first event");
  }

  void write_formatted_events() {
    check_base_ns();
    body_->emit_events([this](const char* d, std::size_t n) { put_formatted(d, n); },
                       [this](std::int32_t pid, std::int32_t tid) { return lane_info(pid, tid); });
  }

  void write_events() {
    const auto& ev = trace_.events;
    const std::vector<std::uint32_t> order = event_order(ev);
    std::int32_t cached_pid = 0, cached_tid = 0;
    LaneInfo lane;
    bool cached = false;
    for (const std::uint32_t i : order) {
      if (count_) count_->add();
      const TraceEvent& e = ev[i];
      if (!cached || e.pid != cached_pid || e.tid != cached_tid) {
        lane = lane_info(e.pid, e.tid);
        cached_pid = e.pid;
        cached_tid = e.tid;
        cached = true;
      }
      const PlainStr cls = detail::class_name(e.cls);
      std::size_t bound = detail::event_head_bound(e.name, e.cat, cls);
      for (const Arg& a : e.args) {
        const auto* sv = std::get_if<std::string>(&a.value);
        bound += sv ? detail::arg_bound(a.key, *sv) : detail::arg_bound(a.key);
      }
      char* p = open_line(bound);
      p = detail::put_event_head(p, e.cat, e.name, e.pid, e.tid, e.ts_ns - trace_.base_ns, e.dur_ns,
                                 lane, e.correlation, e.op_id, cls);
      for (const Arg& a : e.args) {
        if (const auto* iv = std::get_if<std::int64_t>(&a.value)) {
          p = detail::put_arg(p, a.key, *iv);
        } else if (const auto* dv = std::get_if<double>(&a.value)) {
          p = detail::put_arg(p, a.key, *dv);
        } else {
          p = detail::put_arg(p, a.key, std::string_view(std::get<std::string>(a.value)));
        }
      }
      p = detail::put_event_end(p);
      sink_.commit(p);
    }
  }

  void write_counters() {
    const auto& cs = trace_.counters;
    std::vector<std::uint32_t> order(cs.size());
    std::iota(order.begin(), order.end(), 0u);
    const auto less = [&](std::uint32_t a, std::uint32_t b) {
      if (cs[a].pid != cs[b].pid) return cs[a].pid < cs[b].pid;
      if (cs[a].ts_ns != cs[b].ts_ns) return cs[a].ts_ns < cs[b].ts_ns;
      return a < b;
    };
    if (!std::is_sorted(order.begin(), order.end(), less))
      std::sort(order.begin(), order.end(), less);
    for (const std::uint32_t i : order) {
      const CounterSample& c = cs[i];
      std::size_t bound = 200 + raw_string_bound(c.name);
      for (const auto& [series, value] : c.values) {
        bound += 4 + raw_string_bound(series) + kRawNumberBound;
      }
      char* p = open_line(bound);
      p = raw_lit(p, "\"ph\": \"C\", \"name\": ");
      p = raw_string(p, c.name);
      p = raw_lit(p, ", \"pid\": ");
      p = raw_int(p, c.pid);
      p = raw_lit(p, ", \"ts\": ");
      p = raw_us(p, c.ts_ns - trace_.base_ns);
      p = raw_lit(p, ", \"args\": {");
      bool first = true;
      for (const auto& [series, value] : c.values) {
        if (!first) p = raw_lit(p, ", ");
        first = false;
        p = raw_string(p, series);
        p = raw_lit(p, ": ");
        p = raw_counter_value(p, value);
      }
      p = raw_lit(p, "}}");
      sink_.commit(p);
    }
  }

  void write_flows() {
    const auto& fs = trace_.flows;
    std::vector<std::uint32_t> order(fs.size());
    std::iota(order.begin(), order.end(), 0u);
    const auto less = [&](std::uint32_t a, std::uint32_t b) {
      return fs[a].id != fs[b].id ? fs[a].id < fs[b].id : a < b;
    };
    if (!std::is_sorted(order.begin(), order.end(), less))
      std::sort(order.begin(), order.end(), less);
    for (const std::uint32_t i : order) {
      if (count_) count_->add();
      const FlowEvent& f = fs[i];
      for (int end = 0; end < 2; ++end) {
        char* p = open_line(detail::flow_end_bound(f.name, f.cat));
        p = detail::put_flow_end(
            p, end, f.id, end == 0 ? f.from_pid : f.to_pid, end == 0 ? f.from_tid : f.to_tid,
            (end == 0 ? f.from_ts_ns : f.to_ts_ns) - trace_.base_ns, f.cat, f.name);
        sink_.commit(p);
      }
    }
  }

  LaneInfo lane_info(std::int32_t pid, std::int32_t tid) const {
    LaneInfo l;
    if (const auto it = gpu_of_pid_.find(pid); it != gpu_of_pid_.end()) l.gpu = it->second;
    if (const auto it = gpu_lane_.find(key(pid, tid)); it != gpu_lane_.end()) {
      l.gpu_lane = it->second;
    }
    return l;
  }

  const Trace& trace_;
  const FormattedTrace* body_ = nullptr;
  const FormattedTrace::WriteAt* at_ = nullptr;        // a streamed body_
  const FormattedTrace::Producer* produce_ = nullptr;  // its producer
  core::ProgressCount* count_ = nullptr;
  Sink sink_;
  bool first_line_ = true;
  std::unordered_map<std::int32_t, int> gpu_of_pid_;
  std::unordered_map<std::uint64_t, bool> gpu_lane_;
};

}  // namespace

void write_chrome_trace(const Trace& trace, std::ostream& out) {
  Writer(trace, out).write();
}

void write_chrome_trace(const FormattedTrace& trace, std::ostream& out,
                        const FormattedTrace::Producer& produce) {
  if (trace.streamed() && !produce)
    throw std::logic_error("FormattedTrace: a streamed trace written without its producer");
  if (!trace.streamed()) {
    Writer(trace.rest, out, &trace).write();
    return;
  }
  // Streamed: the file made in memory (its lines at their offsets), then written.
  std::string file;
  const FormattedTrace::WriteAt at = [&](const char* d, std::size_t n, std::uint64_t off) {
    if (file.size() < off + n) file.resize(off + n);
    std::memcpy(file.data() + off, d, n);
  };
  Writer(trace.rest, at, trace, produce).write();
  out.write(file.data(), static_cast<std::streamsize>(file.size()));
}

// [SECTION] Formatting while building (FormattedTrace) ----------------------------------------

namespace {

// Blocks of a lane's lines: 64 KiB first, doubling to 16 MiB. Plain malloc: asking for
// transparent huge pages on them (madvise, as build_trace's event vector does) cost more system
// time than it saved here, the kernel compacting memory on first touch (defrag "madvise";
// docs/trace-format.md, "Formatting while building").
constexpr std::size_t kFirstBlock = std::size_t{64} << 10, kMaxBlock = std::size_t{16} << 20;

char* new_block(std::size_t bytes) {
  void* p = std::malloc(bytes);
  if (!p) throw std::bad_alloc();
  return static_cast<char*>(p);
}

}  // namespace

void FormattedTrace::Text::grow(std::size_t n) {
  const std::size_t partial = static_cast<std::size_t>(cur - line);
  if (!blocks.empty())
    blocks.back().used = static_cast<std::size_t>(line - blocks.back().data.get());
  const std::size_t next =
      blocks.empty() ? kFirstBlock : std::min(2 * blocks.back().cap, kMaxBlock);
  const std::size_t cap = std::max(next, partial + n);
  Block b;
  b.data.reset(new_block(cap));
  b.cap = cap;
  if (partial) std::memcpy(b.data.get(), line, partial);
  line = b.data.get();
  cur = line + partial;
  lim = line + cap;
  blocks.push_back(std::move(b));
}

template <class F>
void FormattedTrace::Text::for_each_block(F&& f) const {
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::size_t used = i + 1 == blocks.size()
                                 ? static_cast<std::size_t>(line - blocks[i].data.get())
                                 : blocks[i].used;
    f(blocks[i].data.get(), used);
  }
}

void FormattedTrace::start() {
  started_ = true;
  base_ns_ = rest.base_ns;
  for (const ProcessInfo& p : rest.processes) gpu_of_pid_[p.pid] = p.gpu;
  for (const ThreadInfo& th : rest.threads) gpu_lane_[key(th.pid, th.tid)] = is_gpu_lane(th.role);
}

FormattedTrace::Lane* FormattedTrace::find_lane(std::uint64_t k, std::int32_t pid,
                                                std::int32_t tid) {
  if (!started_) start();
  if (const auto it = lane_of_.find(k); it != lane_of_.end()) return it->second;
  // Placing: every lane was made from the streamed trace's before the producer was called again.
  if (mode_ == Mode::kPlace)
    throw std::logic_error("FormattedTrace: the producer added an event on a lane it had not");
  auto l = std::make_unique<Lane>();
  l->pid = pid;
  l->tid = tid;
  if (const auto it = gpu_of_pid_.find(pid); it != gpu_of_pid_.end()) l->args.gpu = it->second;
  if (const auto it = gpu_lane_.find(k); it != gpu_lane_.end()) l->args.gpu_lane = it->second;
  Lane* raw = l.get();
  lanes_.push_back(std::move(l));
  lane_of_.emplace(k, raw);
  return raw;
}

// [SECTION] Streaming the text (docs/trace-format.md, "Streaming the text")

void FormattedTrace::stream_from(const Producer& produce, std::shared_ptr<const void> state) {
  if (started_ || events_ || flows_added_)
    throw std::logic_error("FormattedTrace: stream_from after the first event");
  streamed_ = true;
  producer_state_ = std::move(state);
  mode_ = Mode::kSize;
  produce(*this);
}

std::uint64_t FormattedTrace::event_bytes() const {
  std::uint64_t n = 0;
  for (const auto& l : lanes_) n += l->bytes;
  return n;
}

void FormattedTrace::grow(Text& t, std::size_t n) {
  if (mode_ != Mode::kPlace) {
    t.grow(n);
    return;
  }
  // Placing: the buffer's whole lines go out, the line being formatted moves to its front; the
  // buffer grows only for a line longer than it.
  write_run(*cur_);
  const std::size_t partial = static_cast<std::size_t>(t.cur - t.line);
  if (!t.blocks.empty() && static_cast<std::size_t>(t.lim - t.cur) >= n) return;
  const std::size_t cap =
      std::max({cur_->buffer, partial + n, t.blocks.empty() ? 0 : 2 * t.blocks[0].cap});
  Block b;
  b.data.reset(new_block(cap));
  b.cap = cap;
  if (partial) std::memcpy(b.data.get(), t.line, partial);
  t.line = b.data.get();
  t.cur = t.line + partial;
  t.lim = t.line + cap;
  t.blocks.clear();
  t.blocks.push_back(std::move(b));
}

void FormattedTrace::write_run(Lane& l) {
  Text& t = l.text;
  if (t.blocks.empty()) return;
  char* const d = t.blocks[0].data.get();
  const std::size_t whole = static_cast<std::size_t>(t.line - d);
  if (whole) {
    // The part's first byte is the comma of the first line of traceEvents: dropped.
    const Region& r = *l.region;
    if (r.drops_first && l.run_at == 0) {
      (*write_at_)(d + 1, whole - 1, r.file_offset);
    } else {
      (*write_at_)(d, whole, r.file_offset + l.run_at - (r.drops_first ? 1 : 0));
    }
    l.run_at += whole;
  }
  const std::size_t partial = static_cast<std::size_t>(t.cur - t.line);
  if (whole && partial) std::memmove(d, t.line, partial);
  t.line = d;
  t.cur = d + partial;
}

void FormattedTrace::place_begin(Lane& l) {
  if (l.next >= l.sized->sizes.size())
    throw std::logic_error("FormattedTrace: the producer added more events than it had");
  const std::uint64_t at = l.base + (l.sorted ? l.fill : l.at[l.next]);
  Text& t = l.text;
  const char* const d = t.blocks.empty() ? nullptr : t.blocks[0].data.get();
  // The buffer holds one run of adjacent lines: a line that goes elsewhere starts another.
  if (t.line != d && l.run_at + static_cast<std::uint64_t>(t.line - d) != at) write_run(l);
  if (t.line == d) l.run_at = at;
}

void FormattedTrace::place_end(Lane& l, std::size_t n) {
  if (n != l.sized->sizes[l.next])
    throw std::logic_error("FormattedTrace: the producer formatted a line of another length");
  if (l.sorted) l.fill += n;
  ++l.next;
}

namespace {

// Each unit's offset in its lane: units in the writer's order (by key, stable), their sizes added.
std::vector<std::uint64_t> unit_offsets(const std::vector<TimeNs>& keys,
                                        const std::vector<std::uint32_t>& sizes) {
  std::vector<std::uint32_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  std::vector<std::uint64_t> at(keys.size());
  std::uint64_t off = 0;
  for (const std::uint32_t i : order) {
    at[i] = off;
    off += sizes[i];
  }
  return at;
}

// Placing: a buffer per lane of at most 128 KiB, 16 MiB in all (4 KiB at least).
constexpr std::size_t kPlaceBuffers = std::size_t{16} << 20, kPlaceBuffer = std::size_t{128} << 10,
                      kMinPlaceBuffer = std::size_t{4} << 10;

}  // namespace

void FormattedTrace::place(const WriteAt& write_at, Region events, Region flows,
                           const LaneArgsOf& lane_args, const Producer& produce) const {
  if (!streamed()) throw std::logic_error("FormattedTrace: place of a trace not streamed");
  if (!produce)
    throw std::logic_error("FormattedTrace: a streamed trace written without its producer");
  FormattedTrace p;
  p.mode_ = Mode::kPlace;
  p.sized_ = this;
  p.write_at_ = &write_at;
  p.regions_[0] = events;
  p.regions_[1] = flows;
  p.started_ = true;
  p.base_ns_ = base_ns_;
  // Lanes by (pid, tid), signed, as the writer's event_order; each at its offset in the events.
  std::vector<const Lane*> lanes;
  for (const auto& l : lanes_) lanes.push_back(l.get());
  std::sort(lanes.begin(), lanes.end(), [](const Lane* a, const Lane* b) {
    return a->pid != b->pid ? a->pid < b->pid : a->tid < b->tid;
  });
  const std::size_t buffer =
      std::clamp(kPlaceBuffers / (lanes.size() + 1), kMinPlaceBuffer, kPlaceBuffer);
  const auto prepare = [&](Lane& l, const Lane& s, const Region* r, std::uint64_t base) {
    if (s.sizes.size() != s.ts_ns.size())
      throw std::logic_error("FormattedTrace: lines and events differ");
    l.sized = &s;
    l.sorted = s.sorted;
    l.region = r;
    l.base = base;
    l.buffer = static_cast<std::size_t>(std::min<std::uint64_t>(buffer, s.bytes));
    if (!s.sorted) l.at = unit_offsets(s.ts_ns, s.sizes);
  };
  std::uint64_t base = 0;
  for (const Lane* s : lanes) {
    if (!(lane_args(s->pid, s->tid) == s->args))
      throw std::logic_error(
          "FormattedTrace: a lane's process or thread changed after its first event");
    auto l = std::make_unique<Lane>();
    l->pid = s->pid;
    l->tid = s->tid;
    l->args = s->args;
    prepare(*l, *s, &p.regions_[0], base);
    base += s->bytes;
    p.lane_of_.emplace(key(s->pid, s->tid), l.get());
    p.lanes_.push_back(std::move(l));
  }
  prepare(p.flows_, flows_, &p.regions_[1], 0);
  produce(p);
  const auto finish = [&](Lane& l) {
    p.write_run(l);
    if (l.next != l.sized->sizes.size())
      throw std::logic_error("FormattedTrace: the producer added fewer events than it had");
  };
  for (const auto& l : p.lanes_) finish(*l);
  finish(p.flows_);
}

namespace {

// The starts of the lines (each ",\n    {…}", no other newline in a line) of a text's blocks,
// PER lines to a unit (an event: 1, a flow: 2), each unit as its bytes.
template <class Blocks>
std::vector<std::string_view> units_of(const Blocks& for_each_block, int per) {
  std::vector<std::string_view> units;
  for_each_block([&](const char* d, std::size_t n) {
    const char* const end = d + n;
    const char* at = d;  // start of the current unit
    int lines = 0;
    const char* q = d;
    while (q < end) {
      const char* nl =
          static_cast<const char*>(std::memchr(q + 2, '\n', static_cast<std::size_t>(end - q - 2)));
      const char* next = nl ? nl - 1 : end;  // the next line's comma
      q = next;
      if (++lines == per) {
        units.emplace_back(at, static_cast<std::size_t>(next - at));
        at = next;
        lines = 0;
      }
      if (!nl) break;
    }
  });
  return units;
}

// Emits UNITS in ORDER, adjacent units as one run.
void emit_in_order(const std::vector<std::string_view>& units,
                   const std::vector<std::uint32_t>& order, const FormattedTrace::Emit& emit) {
  const char* run = nullptr;
  std::size_t len = 0;
  for (const std::uint32_t i : order) {
    const std::string_view u = units[i];
    if (run && run + len == u.data()) {
      len += u.size();
      continue;
    }
    if (run) emit(run, len);
    run = u.data();
    len = u.size();
  }
  if (run) emit(run, len);
}

}  // namespace

void FormattedTrace::emit_events(const Emit& emit, const LaneArgsOf& lane_args) const {
  if (streamed()) throw std::logic_error("FormattedTrace: emit_events of a streamed trace");
  // Lanes by (pid, tid), signed, as the writer's event_order.
  std::vector<const Lane*> lanes;
  for (const auto& l : lanes_) lanes.push_back(l.get());
  std::sort(lanes.begin(), lanes.end(), [](const Lane* a, const Lane* b) {
    return a->pid != b->pid ? a->pid < b->pid : a->tid < b->tid;
  });
  for (const Lane* l : lanes) {
    if (!(lane_args(l->pid, l->tid) == l->args))
      throw std::logic_error(
          "FormattedTrace: a lane's process or thread changed after its first event");
    const auto blocks = [&](auto&& f) { l->text.for_each_block(f); };
    if (l->sorted) {
      blocks(emit);
      continue;
    }
    // Out of ts order (the ProfilerStep#N spans come last on their thread): stably by ts.
    const std::vector<std::string_view> units = units_of(blocks, 1);
    if (units.size() != l->ts_ns.size())
      throw std::logic_error("FormattedTrace: lines and events differ");
    std::vector<std::uint32_t> order(units.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return l->ts_ns[a] < l->ts_ns[b]; });
    emit_in_order(units, order, emit);
  }
}

void FormattedTrace::emit_flows(const Emit& emit) const {
  if (streamed()) throw std::logic_error("FormattedTrace: emit_flows of a streamed trace");
  const auto blocks = [&](auto&& f) { flows_.text.for_each_block(f); };
  if (flows_.sorted) {
    blocks(emit);
    return;
  }
  const std::vector<std::string_view> units = units_of(blocks, 2);
  if (units.size() != flows_.ts_ns.size())
    throw std::logic_error("FormattedTrace: lines and flows differ");
  std::vector<std::uint32_t> order(units.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return flows_.ts_ns[a] < flows_.ts_ns[b];
  });
  emit_in_order(units, order, emit);
}

// [SECTION] Files (per-rank files: per_rank_traces.cpp) ------------------------------------------

void write_chrome_trace_file(const Trace& trace, const std::string& path,
                             core::Progress* progress) {
  core::ProgressCount count(progress, "writing the trace",
                            static_cast<std::int64_t>(trace.events.size() + trace.flows.size()),
                            "events");
  write_file_atomically(path, [&](std::ostream& out) {
    Writer w(trace, out);
    w.count_into(&count);
    w.write();
  });
  count.finish();
}

void write_chrome_trace_file(const FormattedTrace& trace, const std::string& path,
                             const FormattedTrace::Producer& produce) {
  if (trace.streamed() && !produce)
    throw std::logic_error("FormattedTrace: a streamed trace written without its producer");
  if (!trace.streamed()) {
    write_file_atomically(path, [&](std::ostream& out) { write_chrome_trace(trace, out); });
    return;
  }
  // Streamed: each line formatted into a small buffer and written at its offset (pwrite), so that
  // the text is never held in full (docs/trace-format.md, "Streaming the text").
  write_file_atomically_fd(path, [&](int fd) {
    const FormattedTrace::WriteAt at = [&](const char* d, std::size_t n, std::uint64_t off) {
      write_fully_at(fd, d, n, off, path);
    };
    Writer(trace.rest, at, trace, produce).write();
  });
}

}  // namespace csim::prof
