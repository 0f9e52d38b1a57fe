// Chrome-trace writer ↔ reader: exact round trip, formatting rules, malformed input, per-rank
// files, plain Chrome and PyTorch-profiler (Kineto) traces (docs/trace-format.md).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/error.hpp"
#include "profiler/atomic_file.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/per_rank_traces.hpp"
#include "profiler/summary.hpp"
#include "profiler/trace_classify.hpp"

namespace fs = std::filesystem;
using namespace csim;
using namespace csim::prof;

namespace {

std::string write_string(const Trace& t) {
  std::ostringstream os;
  write_chrome_trace(t, os);
  return os.str();
}

fs::path temp_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() /
                     ("csim_prof_" + tag + "_" + std::to_string(static_cast<long>(::getpid())));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Two GPUs, in the writer's order (so read(write(t)) == t field by field).
Trace sample_trace() {
  Trace t;
  t.base_ns = 1'700'000'000'000'000'000;
  t.world_size = 2;
  t.metadata["scenario"] = {{"name", "tiny \"quoted\" ü"}};
  t.metadata["backend"] = "sim";
  t.metadata["samples_per_step"] = 30;
  t.processes = {{0, "node 0 / GPU 0", 0, 0, 0, 11 * kGiB, 0},
                 {1, "node 0 / GPU 1", 1, 0, 1, 11 * kGiB, 1}};
  t.threads = {{0, 7, "stream 7 compute", LaneRole::kCompute, 7},
               {0, 13, "stream 13 comm", LaneRole::kComm, 13},
               {0, 100, "main (python)", LaneRole::kHost, 100},
               {1, 7, "stream 7 compute", LaneRole::kCompute, 7}};
  TraceEvent launch;
  launch.pid = 0;
  launch.tid = 100;
  launch.ts_ns = t.base_ns + 1000;
  launch.dur_ns = 5000;
  launch.name = "cudaLaunchKernel";
  launch.cat = "cuda_runtime";
  launch.cls = EventClass::kHost;
  launch.correlation = 42;
  TraceEvent k;
  k.pid = 0;
  k.tid = 7;
  k.ts_ns = t.base_ns + 1'234'567;  // → "ts": 1234.567
  k.dur_ns = 2'000'001;             // → "dur": 2000.001
  k.name = "sgemm\t\"fwd\"\\";
  k.cat = "kernel";
  k.cls = EventClass::kCompute;
  k.op_id = 3;
  k.correlation = 42;
  k.args = {{"batch", std::int64_t{15}},
            {"ratio", 2.0},
            {"eff", 0.1},
            {"note", std::string("a\nb")},
            {"device", std::int64_t{99}}};
  TraceEvent ar;
  ar.pid = 0;
  ar.tid = 13;
  ar.ts_ns = t.base_ns + 2'000'000;
  ar.dur_ns = 500;
  ar.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  ar.cat = "kernel";
  ar.cls = EventClass::kCommunication;
  ar.args = {{"Collective name", std::string("allreduce")}, {"In msg nelems", std::int64_t{4096}}};
  TraceEvent k1 = k;
  k1.pid = 1;
  k1.ts_ns = t.base_ns - 1500;  // before the base → "ts": -1.500
  k1.args.clear();
  k1.correlation = -1;
  t.events = {launch, k, ar, k1};
  // Our event order is (pid, tid, ts): pid 0 tid 7 before tid 13 before tid 100.
  t.events = {k, ar, launch, k1};
  t.counters = {{0, "memory", t.base_ns, {{"allocated", 1024.0}, {"params", 512.0}}},
                {1, "memory", t.base_ns + 10, {{"allocated", 2048.0}}}};
  FlowEvent f;
  f.id = 42;
  f.name = "ac2g";
  f.cat = "ac2g";
  f.from_pid = 0;
  f.from_tid = 100;
  f.from_ts_ns = launch.ts_ns;
  f.to_pid = 0;
  f.to_tid = 7;
  f.to_ts_ns = k.ts_ns;
  t.flows = {f};
  return t;
}

// Every ':' outside strings is followed by a space.
bool colons_spaced(const std::string& s) {
  bool in_str = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_str) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_str = false;
      }
    } else if (c == '"') {
      in_str = true;
    } else if (c == ':' && (i + 1 >= s.size() || s[i + 1] != ' ')) {
      return false;
    }
  }
  return true;
}

void require_same(const Trace& a, const Trace& b) {
  REQUIRE(a.base_ns == b.base_ns);
  REQUIRE(a.rank == b.rank);
  REQUIRE(a.world_size == b.world_size);
  REQUIRE(a.metadata == b.metadata);
  REQUIRE(a.processes.size() == b.processes.size());
  for (std::size_t i = 0; i < a.processes.size(); ++i) {
    const auto &x = a.processes[i], &y = b.processes[i];
    CHECK((x.pid == y.pid && x.name == y.name && x.rank == y.rank && x.node == y.node &&
           x.gpu == y.gpu && x.capacity_bytes == y.capacity_bytes && x.sort_index == y.sort_index));
  }
  REQUIRE(a.threads.size() == b.threads.size());
  for (std::size_t i = 0; i < a.threads.size(); ++i) {
    const auto &x = a.threads[i], &y = b.threads[i];
    CHECK((x.pid == y.pid && x.tid == y.tid && x.name == y.name && x.role == y.role &&
           x.sort_index == y.sort_index));
  }
  REQUIRE(a.events.size() == b.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    const auto &x = a.events[i], &y = b.events[i];
    CHECK(x.pid == y.pid);
    CHECK(x.tid == y.tid);
    CHECK(x.ts_ns == y.ts_ns);
    CHECK(x.dur_ns == y.dur_ns);
    CHECK(x.name == y.name);
    CHECK(x.cat == y.cat);
    CHECK(x.cls == y.cls);
    CHECK(x.op_id == y.op_id);
    CHECK(x.correlation == y.correlation);
    REQUIRE(x.args.size() == y.args.size());
    for (std::size_t j = 0; j < x.args.size(); ++j) {
      CHECK(x.args[j].key == y.args[j].key);
      CHECK(x.args[j].value == y.args[j].value);
    }
  }
  REQUIRE(a.counters.size() == b.counters.size());
  for (std::size_t i = 0; i < a.counters.size(); ++i) {
    CHECK(a.counters[i].pid == b.counters[i].pid);
    CHECK(a.counters[i].name == b.counters[i].name);
    CHECK(a.counters[i].ts_ns == b.counters[i].ts_ns);
    CHECK(a.counters[i].values == b.counters[i].values);
  }
  REQUIRE(a.flows.size() == b.flows.size());
  for (std::size_t i = 0; i < a.flows.size(); ++i) {
    const auto &x = a.flows[i], &y = b.flows[i];
    CHECK((x.id == y.id && x.name == y.name && x.cat == y.cat && x.from_pid == y.from_pid &&
           x.from_tid == y.from_tid && x.from_ts_ns == y.from_ts_ns && x.to_pid == y.to_pid &&
           x.to_tid == y.to_tid && x.to_ts_ns == y.to_ts_ns));
  }
}

}  // namespace

TEST_CASE("writer formats timestamps exactly, spaces colons, one event per line", "[trace]") {
  const std::string out = write_string(sample_trace());
  // 1'234'567 ns after the base = 1234.567 µs; 2'000'001 ns = 2000.001 µs; −1'500 ns = −1.500 µs.
  CHECK(out.find("\"ts\": 1234.567, \"dur\": 2000.001") != std::string::npos);
  CHECK(out.find("\"ts\": -1.500") != std::string::npos);
  CHECK(out.find("\"baseTimeNanoseconds\": 1700000000000000000") != std::string::npos);
  CHECK(out.find("\"distributedInfo\": {\"rank\": 0, \"world_size\": 2}") != std::string::npos);
  CHECK(out.find("\"displayTimeUnit\": \"ns\"") != std::string::npos);
  CHECK(colons_spaced(out));
  // Reserved args first, then the event's own in order; a double keeps its ".0".
  CHECK(out.find("\"args\": {\"device\": 0, \"stream\": 7, \"correlation\": 42, \"op_id\": 3, "
                 "\"class\": \"compute\", \"batch\": 15, \"ratio\": 2.0, \"eff\": 0.1, "
                 "\"note\": \"a\\nb\", \"device\": 99}") != std::string::npos);
  CHECK(out.find("\"name\": \"sgemm\\t\\\"fwd\\\"\\\\\"") != std::string::npos);
  CHECK(out.find("{\"ph\": \"f\", \"id\": 42, \"pid\": 0, \"tid\": 7, \"ts\": 1234.567, "
                 "\"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}") != std::string::npos);
  CHECK(out.find("\"role\": \"comm\"") != std::string::npos);
  // Each traceEvents element on its own line: 4 processes/threads × 2 metadata lines + 2 process
  // × 2, 4 events, 2 counters, 2 flow ends.
  std::istringstream lines(out);
  std::string line;
  int event_lines = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("    {\"ph\": ", 0) == 0) ++event_lines;
  }
  CHECK(event_lines == 2 * 2 + 4 * 2 + 4 + 2 + 2);
}

TEST_CASE("write -> read -> write is exact", "[trace]") {
  const Trace t = sample_trace();
  const std::string first = write_string(t);
  ReadStats st;
  const Trace back = read_chrome_trace_string(first, "mem", &st);
  CHECK(st.clustersim_file);
  CHECK(st.skipped_records == 0);
  CHECK(st.events == 4);
  CHECK(st.flows == 1);
  require_same(t, back);
  CHECK(write_string(back) == first);
}

TEST_CASE("round trip through files, including the batched fast path", "[trace]") {
  // ~25k events ≈ 5 MiB: several 1 MiB batches cut at guessed boundaries and 4 MiB refills.
  Trace t = sample_trace();
  t.events.clear();
  t.flows.clear();
  for (int i = 0; i < 25000; ++i) {
    TraceEvent e;
    e.pid = i < 12500 ? 0 : 1;
    e.tid = 7;
    e.ts_ns = t.base_ns + static_cast<TimeNs>(i) * 1001;
    e.dur_ns = 999;
    e.name = (i % 3 == 0) ? "k},{\"x\": [1]}" : "gemm";  // braces inside strings
    e.cat = "kernel";
    e.cls = EventClass::kCompute;
    e.op_id = i;
    e.args = {{"nested", std::string("{\"a\": 1},")}};
    t.events.push_back(e);
  }
  const fs::path dir = temp_dir("rt");
  const std::string path = (dir / "t.json").string();
  write_chrome_trace_file(t, path);
  CHECK_FALSE(fs::exists(path + ".tmp." + std::to_string(static_cast<long>(::getpid()))));
  const Trace back = read_chrome_trace_file(path);
  require_same(t, back);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(write_string(back) == bytes);
  fs::remove_all(dir);
}

TEST_CASE("malformed, truncated and non-trace inputs throw InputError with an offset", "[trace]") {
  const std::string good = write_string(sample_trace());
  // Truncated anywhere inside the document.
  for (const std::size_t cut :
       {std::size_t{1}, good.size() / 3, good.size() / 2, good.size() - 3}) {
    INFO("cut at " << cut);
    REQUIRE_THROWS_AS(read_chrome_trace_string(good.substr(0, cut), "cut.json"), InputError);
    try {
      read_chrome_trace_string(good.substr(0, cut), "cut.json");
    } catch (const InputError& e) {
      CHECK(e.file() == "cut.json");
      CHECK(std::string(e.what()).find("byte") != std::string::npos);
    }
  }
  // Every prefix short of the closing brace is rejected cleanly (never a crash or a partial read).
  int rejected = 0;
  for (std::size_t cut = 0; cut + 2 <= good.size(); ++cut) {
    try {
      read_chrome_trace_string(good.substr(0, cut), "cut.json");
    } catch (const InputError&) {
      ++rejected;
    }
  }
  CHECK(rejected == static_cast<int>(good.size()) - 1);
  CHECK_THROWS_AS(read_chrome_trace_string("", "empty.json"), InputError);
  CHECK_THROWS_AS(read_chrome_trace_string("{}", "x.json"), InputError);
  CHECK_THROWS_AS(read_chrome_trace_string("42", "x.json"), InputError);
  CHECK_THROWS_AS(read_chrome_trace_string("{\"traceEvents\": 3}", "x.json"), InputError);
  CHECK_THROWS_AS(read_chrome_trace_string("{\"traceEvents\": []} []", "x.json"), InputError);
  CHECK_THROWS_WITH(
      read_chrome_trace_string("{\"traceEvents\": [{\"ph\": \"X\"}, {\"ph\": \"X\" \"pid\": 1}]}",
                               "bad.json"),
      Catch::Contains("traceEvents[1]") && Catch::Contains("byte 30"));
  CHECK_THROWS_AS(read_chrome_trace_file("/nonexistent/trace.json"), InputError);
}

TEST_CASE("bad records are counted and skipped", "[trace]") {
  const std::string json = R"({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "ok", "pid": 0, "tid": 7, "ts": 1, "dur": 2},
    {"ph": "X", "cat": "kernel", "name": "no ts", "pid": 0, "tid": 7, "dur": 2},
    {"ph": "X", "cat": "kernel", "name": "bad ts", "pid": 0, "tid": 7, "ts": "soon", "dur": 2},
    {"ph": "Q", "pid": 0},
    17,
    {"ph": "i", "name": "instant", "pid": 0, "tid": 0, "ts": 5},
    {"ph": "X", "cat": "Trace", "name": "span", "pid": "Spans", "tid": "x", "ts": 1, "dur": 1}
  ]})";
  ReadStats st;
  const Trace t = read_chrome_trace_string(json, "mixed.json", &st);
  CHECK(st.events == 1);
  CHECK(st.skipped_records == 4);
  CHECK(st.ignored_records == 2);
  CHECK(st.first_problem.find("traceEvents[1]") != std::string::npos);
  REQUIRE(t.events.size() == 1);
  CHECK(t.events[0].ts_ns == 1000);
  CHECK(t.events[0].dur_ns == 2000);
}

TEST_CASE("plain Chrome traces: B/E pairs, float µs, classification, roles", "[trace]") {
  const std::string json = R"([
    {"ph": "B", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 1, "ts": 10.0004},
    {"ph": "E", "pid": 5, "tid": 1, "ts": 12.5},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 20, "ts": 11, "dur": 3.25, "args": {"device": 0, "stream": 20, "correlation": 9, "grid": [1, 2, 3]}},
    {"ph": "X", "cat": "Kernel", "name": "volta_sgemm", "pid": 0, "tid": 7, "ts": 11, "dur": 1},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 8, "ts": 11, "dur": 1}
  ])";
  ReadStats st;
  const Trace t = read_chrome_trace_string(json, "plain.json", &st);
  CHECK_FALSE(st.clustersim_file);
  CHECK(t.rank == 0);  // no distributedInfo → rank 0 of 1
  CHECK(t.world_size == 1);
  REQUIRE(t.events.size() == 4);
  const TraceEvent& mm = t.events[0];  // committed at its E
  CHECK(mm.name == "aten::mm");
  CHECK(mm.ts_ns == 10000);  // 10.0004 µs → 10000.4 ns → 10000
  CHECK(mm.dur_ns == 2500);
  CHECK(mm.cls == EventClass::kHost);
  const TraceEvent& nccl = t.events[1];
  CHECK(nccl.cls == EventClass::kCommunication);
  CHECK(nccl.dur_ns == 3250);
  CHECK(nccl.correlation == 9);
  REQUIRE(nccl.args.size() == 1);  // device/stream become pid/tid; correlation a field
  CHECK(nccl.args[0].key == "grid");
  CHECK(std::get<std::string>(nccl.args[0].value) == "[1,2,3]");
  CHECK(t.events[2].cls == EventClass::kCompute);
  CHECK(t.events[3].cls == EventClass::kCopy);
  REQUIRE(t.thread(0, 20) != nullptr);
  CHECK(t.thread(0, 20)->role == LaneRole::kComm);
  CHECK(t.thread(0, 7)->role == LaneRole::kCompute);
  CHECK(t.thread(0, 8)->role == LaneRole::kCopy);
  CHECK(t.thread(5, 1)->role == LaneRole::kHost);
  REQUIRE(t.process(0) != nullptr);
  CHECK(t.process(0)->gpu == 0);  // from the kernels' "device" arg
  CHECK(t.process(5)->gpu == -1);
}

TEST_CASE("classify maps Kineto categories", "[trace]") {
  CHECK(classify("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL") ==
        EventClass::kCommunication);
  CHECK(classify("kernel", "NCCL_something") == EventClass::kCommunication);
  CHECK(classify("kernel", "cross_device_AllReduce") == EventClass::kCommunication);
  CHECK(classify("kernel", "void at::native::vectorized_elementwise_kernel") ==
        EventClass::kCompute);
  CHECK(classify("gpu_memset", "Memset (Device)") == EventClass::kCopy);
  CHECK(classify("cuda_runtime", "cudaLaunchKernel") == EventClass::kHost);
  CHECK(classify("cuda_driver", "cuLaunchKernel") == EventClass::kHost);
  CHECK(classify("python_function", "forward") == EventClass::kHost);
  CHECK(classify("gil_wait", "GIL") == EventClass::kGilWait);
  CHECK(classify("gpu_user_annotation", "ProfilerStep#1") == EventClass::kAnnotation);
  CHECK(classify("ac2g", "ac2g") == EventClass::kOther);
  ClassTally empty;
  CHECK(infer_lane_role(empty) == LaneRole::kOther);
}

TEST_CASE("per-rank files hold one rank each with distributedInfo", "[trace]") {
  const Trace t = sample_trace();
  const fs::path dir = temp_dir("ranks") / "sub";  // created by the writer
  write_per_rank_traces(t, dir.string());
  for (int r = 0; r < 2; ++r) {
    const std::string path = (dir / ("rank-" + std::to_string(r) + ".json")).string();
    REQUIRE(fs::exists(path));
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("\"distributedInfo\": {\"rank\": " + std::to_string(r) +
                    ", \"world_size\": 2}") != std::string::npos);
    const Trace back = read_chrome_trace_file(path);
    CHECK(back.rank == r);
    CHECK(back.world_size == 2);
    REQUIRE(back.processes.size() == 1);
    CHECK(back.processes[0].pid == r);
    for (const TraceEvent& e : back.events) CHECK(e.pid == r);
  }
  fs::remove_all(dir.parent_path());
}

TEST_CASE("atomic writes leave no temporary behind on failure", "[trace]") {
  const fs::path dir = temp_dir("atomic");
  const std::string path = (dir / "out.json").string();
  CHECK_THROWS_AS(write_file_atomically(path,
                                        [](std::ostream& os) {
                                          os << "half";
                                          CHECK(inflight_temporary_count() == 1);
                                          throw std::runtime_error("boom");
                                        }),
                  std::runtime_error);
  CHECK(inflight_temporary_count() == 0);
  CHECK(fs::is_empty(dir));
  // An interrupt while writing: the registry lets the signal path unlink the temporary.
  // The rename then finds no temporary and reports it.
  CHECK_THROWS_AS(write_file_atomically(path,
                                        [&](std::ostream& os) {
                                          os << "x";
                                          os.flush();
                                          CHECK(remove_inflight_temporaries() == 1);
                                        }),
                  std::runtime_error);
  CHECK_FALSE(fs::exists(path));
  CHECK(fs::is_empty(dir));
  fs::remove_all(dir);
}
