// The reader's two paths (docs/trace-format.md, "Reading"): records in the fast subset are read
// straight from the bytes (profiler/chrome_trace_fast_record.cpp), the rest through simdjson's
// DOM. Both must give the same Trace and the same statistics for every record.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "profiler/chrome_trace_reader.hpp"
#include "profiler/chrome_trace_writer.hpp"

using namespace csim::prof;

namespace {

// Records of our writer, of Kineto, and edge cases of each value type; some are outside the fast
// subset (exponents, 19 digits, arrays, escapes) and take the DOM path in both readings.
// Each group is read as one trace (B/E and flow ends pair within a group).
const std::vector<std::vector<std::string>> kGroups = {
    {R"({"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "node 0 / GPU 0", "rank": 0, "node": 0, "gpu": 0, "capacity_bytes": 85899345920}})"},
    {R"({"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7 compute", "role": "compute"}})"},
    {R"({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": 7, "args": {"sort_index": 7}})"},
    {R"({"ph": "M", "name": "process_labels", "pid": 1, "tid": 0, "args": {"labels": "GPU 1"}})"},
    {R"({"ph": "X", "cat": "kernel", "name": "ampere_sgemm", "pid": 0, "tid": 7, "ts": 1234.567, "dur": 1.800, "args": {"device": 0, "stream": 7, "correlation": 12, "op_id": 3, "class": "compute", "flops": 1.5, "bytes": 4096, "label": "fwd"}})"},
    {R"({"ph": "X", "cat": "kernel", "name": "k exp", "pid": 0, "tid": 7, "ts": 2e3, "dur": 1.5E1, "args": {"x": 1e-3}})"},
    {R"({"ph": "X", "cat": "kernel", "name": "kineto", "pid": 1, "tid": 7, "ts": 1700000000123.5, "dur": 4.25, "args": {"External id": 99, "device": 1, "stream": 7, "correlation": 40, "grid": [1, 2, 3], "registers per thread": 32}})"},
    {R"({"ph": "X", "cat": "kernel", "name": "abs 19 digits", "pid": 1, "tid": 7, "ts": 1700000000123456.789, "dur": 0.001})"},
    {R"({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 0, "args": {"flag": true, "off": false, "none": null, "neg": -42, "zero": 0, "negzero": -0, "dzero": -0.0, "big": 123456789012345678, "bigger": 1234567890123456789, "tiny": 0.000001, "s": ""}})"},
    {R"({"ph": "X", "cat": "cpu_op", "name": "µs naïve ∑", "pid": 1, "tid": 1, "ts": 6.000, "dur": 1.000})"},
    {R"({"ph": "X", "cat": "cpu_op", "name": "esc \"q\" \u00e9", "pid": 1, "tid": 1, "ts": 7.000, "dur": 1.000})"},
    {R"({"ph": "X", "cat": "cpu_op", "name": "dup", "name": "dup2", "pid": 1, "tid": 1, "ts": 8, "dur": 1, "args": {"a": 1}, "args": {"b": 2}})"},
    {"{ \"ph\" :\t\"X\" ,\n \"cat\": \"cpu_op\", \"name\": \"spaced\", \"pid\": 1 , \"tid\": "
     "1,\r\n \"ts\": 9.5 , \"dur\": 0.25 }"},
    {R"({"ph": "X", "cat": "cpu_op", "name": "extra keys", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "s": "t", "tts": 3, "flow_in": true, "nil": null})"},
    {R"({"ph": "X", "cat": "cpu_op", "name": "array key", "pid": 1, "tid": 1, "ts": 11, "dur": 1, "stack": ["a", "b"]})"},
    {R"({"ph": "X", "cat": "cpu_op", "name": "args not object", "pid": 1, "tid": 1, "ts": 12, "dur": 1, "args": 3})"},
    {R"({"ph": "X", "cat": "cpu_op", "name": "empty args", "pid": 1, "tid": 1, "ts": 13, "dur": 1, "args": {}})"},
    {R"({"ph": "X", "cat": "kernel", "name": "no dur", "pid": 0, "tid": 7, "ts": 14})"},
    {R"({"ph": "X", "cat": "kernel", "name": "negative dur", "pid": 0, "tid": 7, "ts": 15, "dur": -1.000})"},
    {R"({"ph": "X", "cat": "kernel", "name": "no ts", "pid": 0, "tid": 7, "dur": 1})"},
    {R"({"ph": "X", "cat": "kernel", "name": "string ts", "pid": 0, "tid": 7, "ts": "soon", "dur": 1})"},
    {R"({"ph": "X", "cat": "Trace", "name": "span", "pid": "Spans", "tid": "x", "ts": 1, "dur": 1})"},
    {R"({"ph": "X", "cat": "kernel", "name": "fractional pid", "pid": 1.5, "tid": 7, "ts": 1, "dur": 1})"},
    {R"({"ph": "X", "cat": "kernel", "name": "wide pid", "pid": 4294967296, "tid": 7, "ts": 1, "dur": 1})"},
    {R"({"ph": "X", "cat": 5, "name": "numeric cat", "pid": 0, "tid": 7, "ts": 16, "dur": 1})"},
    {R"({"ph": "B", "cat": "cpu_op", "name": "begin", "pid": 1, "tid": 2, "ts": 20})",
     R"({"ph": "E", "pid": 1, "tid": 2, "ts": 22.5})",
     R"({"ph": "E", "pid": 1, "tid": 3, "ts": 23})"},
    {R"({"ph": "C", "name": "memory", "pid": 0, "ts": 1.000, "args": {"allocated": 1000000000, "cached": 2.5}})"},
    {R"({"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 30, "args": {"Device Type": 1, "Device Id": 1, "Addr": 140000000, "Bytes": 512, "Total Allocated": 2048, "Total Reserved": 4096}})"},
    {R"({"ph": "i", "name": "instant", "pid": 0, "tid": 0, "ts": 5})"},
    {R"({"ph": "s", "id": 12, "pid": 0, "tid": 1, "ts": 1233.567, "cat": "ac2g", "name": "ac2g"})",
     R"({"ph": "f", "id": 12, "pid": 0, "tid": 7, "ts": 1234.567, "cat": "ac2g", "name": "ac2g", "bp": "e"})",
     R"({"ph": "s", "id": 1.5, "pid": 0, "tid": 1, "ts": 1, "cat": "ac2g", "name": "ac2g"})",
     R"({"ph": "f", "id": 77, "pid": 0, "tid": 7, "ts": 2, "cat": "ac2g", "name": "unpaired"})"},
    {R"({"ph": "Q", "pid": 0})"},
    {R"({"ph": 3, "pid": 0})"},
    {R"({})"},
    {R"(17)"},
};

std::string trace_text(const std::string& first, const std::vector<std::string>& group) {
  std::string s = "{\"traceEvents\": [\n  " + first;
  for (const std::string& r : group) s += ",\n  " + r;
  return s + "\n], \"baseTimeNanoseconds\": 1000}";
}

std::string written(const Trace& t) {
  std::ostringstream out;
  write_chrome_trace(t, out);
  return out.str();
}

}  // namespace

TEST_CASE("the fast record path and simdjson's DOM read every record alike", "[trace]") {
  // Each group after the same ignored instant, written plainly (read by the fast path, which then
  // goes on with the group) or with an escape (which only the DOM path reads; its batch then
  // takes the whole group).
  std::int64_t events = 0;
  for (const std::vector<std::string>& group : kGroups) {
    INFO(group.front());
    const std::string fast = trace_text(R"({"ph": "i", "name": "x", "pid": 0, "ts": 1})", group);
    const std::string dom =
        trace_text(R"({"ph": "i", "name": "\u0078", "pid": 0, "ts": 1})", group);
    ReadStats sf, sd;
    const Trace tf = read_chrome_trace_string(fast, "t.json", &sf);
    const Trace td = read_chrome_trace_string(dom, "t.json", &sd);
    events += sf.events;
    CHECK(sf.events == sd.events);
    CHECK(sf.skipped_records == sd.skipped_records);
    CHECK(sf.first_problem == sd.first_problem);
    CHECK(sf.counters == sd.counters);
    CHECK(sf.memory_events == sd.memory_events);
    CHECK(sf.flows == sd.flows);
    CHECK(sf.ignored_records == sd.ignored_records);
    REQUIRE(tf.events.size() == td.events.size());
    for (std::size_t i = 0; i < tf.events.size(); ++i) {
      CHECK(tf.events[i].name == td.events[i].name);
      CHECK(tf.events[i].cat == td.events[i].cat);
      CHECK(tf.events[i].ts_ns == td.events[i].ts_ns);
      CHECK(tf.events[i].dur_ns == td.events[i].dur_ns);
      CHECK(tf.events[i].args.size() == td.events[i].args.size());
    }
    CHECK(written(tf) == written(td));
  }
  // 15 complete events are kept ("no dur" reads as 0 µs) and one B/E pair; the rest are skipped
  // or ignored.
  CHECK(events == 16);
}

TEST_CASE("the fast path reads our writer's µs as exact ns", "[trace]") {
  // ts = k / 1000 µs printed with three decimals reads back as k ns, also far from the base
  // (2^50 − 1 ns, the fast path's limit, and 2^50 + 1, read through the double).
  for (const long long k : {0LL, 1LL, 999LL, 1234567LL, (1LL << 50) - 1, (1LL << 50) + 1}) {
    const std::string us = std::to_string(k / 1000) + "." +
                           std::string(3 - std::to_string(k % 1000).size(), '0') +
                           std::to_string(k % 1000);
    const std::string json =
        R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": )" +
        us + R"(, "dur": 0.001}]})";
    INFO(us);
    const Trace t = read_chrome_trace_string(json, "t.json");
    REQUIRE(t.events.size() == 1);
    CHECK(t.events[0].ts_ns == k);
    CHECK(t.events[0].dur_ns == 1);
  }
}

TEST_CASE("fast and DOM paths alternate across refills and batches exactly", "[trace]") {
  // ~60k events (~12 MiB) with names of 1..300 bytes, so that element ends fall at every offset
  // of the reader's 256 KiB refills; every 97th name has an escape, which hands the following
  // elements to simdjson's batches until the fast path takes over again.
  Trace t;
  t.processes.push_back({0, "node 0 / GPU 0", 0, 0, 0, 0, 0});
  t.threads.push_back({0, 7, "stream 7 compute", LaneRole::kCompute, 7});
  for (int i = 0; i < 60000; ++i) {
    TraceEvent e;
    e.pid = 0;
    e.tid = 7;
    e.ts_ns = static_cast<csim::TimeNs>(i) * 1001;
    e.dur_ns = 999;
    e.name = std::string(1 + (i * 37) % 300, static_cast<char>('a' + i % 26));
    if (i % 97 == 0) e.name += "\"q\"";
    e.cat = "kernel";
    e.cls = EventClass::kCompute;
    e.correlation = i;
    if (i % 5 == 0) e.args = {{"bytes", std::int64_t{i}}, {"ratio", 0.5 + i}};
    t.events.push_back(e);
  }
  const std::string text = written(t);
  ReadStats st;
  const Trace back = read_chrome_trace_string(text, "t.json", &st);
  // Every event comes back, and writing it again gives the same bytes.
  CHECK(st.events == 60000);
  CHECK(st.skipped_records == 0);
  CHECK(written(back) == text);
}
