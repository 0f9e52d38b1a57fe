// summarize() on small hand-built traces; expected values derived in comments from the formulas
// in docs/summary.md.
#include <catch2/catch.hpp>

#include <sstream>

#include "profiler/summary.hpp"

using namespace csim;
using namespace csim::prof;

namespace {

constexpr TimeNs kMs = kNsPerMs;

TraceEvent ev(std::int32_t pid, std::int32_t tid, TimeNs start, TimeNs end, EventClass cls,
              const std::string& cat = "kernel", const std::string& name = "k") {
  TraceEvent e;
  e.pid = pid;
  e.tid = tid;
  e.ts_ns = start;
  e.dur_ns = end - start;
  e.cls = cls;
  e.cat = cat;
  e.name = name;
  return e;
}

TraceEvent step(std::int32_t pid, int n, TimeNs start, TimeNs end) {
  return ev(pid, 100, start, end, EventClass::kAnnotation, "user_annotation",
            "ProfilerStep#" + std::to_string(n));
}

CounterSample mem(std::int32_t pid, TimeNs ts, double allocated) {
  return CounterSample{pid, "memory", ts, {{"allocated", allocated}}};
}

}  // namespace

TEST_CASE("step times: step 1 = end-start, then end-to-end, median of steps 2..N", "[summary]") {
  Trace t;
  t.processes = {{0, "node 0 / GPU 0", 0, 0, 0, 0, 0}};
  // Steps: #1 [0,10] ms, #2 ends 22, #3 ends 30, #4 ends 45 (the host annotation may start
  // late: the step time is end-to-end).
  t.events = {step(0, 1, 0, 10 * kMs), step(0, 2, 11 * kMs, 22 * kMs),
              step(0, 3, 23 * kMs, 30 * kMs), step(0, 4, 31 * kMs, 45 * kMs),
              ev(0, 7, 0, 1 * kMs, EventClass::kCompute)};
  const Summary s = summarize(t);
  // step times: 10, 22−10 = 12, 30−22 = 8, 45−30 = 15 ms
  REQUIRE(s.step_times_ns == std::vector<TimeNs>{10 * kMs, 12 * kMs, 8 * kMs, 15 * kMs});
  // median of {12, 8, 15} = 12 ms
  CHECK(s.step_time_s == Approx(0.012));
  // window = [10, 45] ms over 3 steps → 35/3 ms per step
  CHECK(s.window_steps == 3);
  CHECK(s.window_s == Approx(0.035 / 3));
  // even count: median of {12, 8} = 10 ms
  t.events.erase(t.events.begin() + 3);
  CHECK(summarize(t).step_time_s == Approx(0.010));
  // one step only: step 1 itself
  Trace one;
  one.events = {step(0, 7, 2 * kMs, 9 * kMs)};
  CHECK(summarize(one).step_time_s == Approx(0.007));
}

TEST_CASE("exclusive split by priority sums to the window, exposed vs overlapped comm",
          "[summary]") {
  Trace t;
  t.processes = {{0, "node 0 / GPU 0", 0, 0, 0, 0, 0}};
  t.threads = {{0, 7, "compute", LaneRole::kCompute, 7},
               {0, 13, "comm", LaneRole::kComm, 13},
               {0, 100, "main", LaneRole::kHost, 100}};
  // One step [0, 100] µs (only step → the window is step 1 itself).
  const TimeNs us = kNsPerUs;
  t.events = {
      step(0, 1, 0, 100 * us),
      ev(0, 7, 10 * us, 40 * us, EventClass::kCompute),         // compute 10–40
      ev(0, 13, 30 * us, 60 * us, EventClass::kCommunication),  // comm 30–60: 30–40 overlapped
      ev(0, 7, 50 * us, 70 * us, EventClass::kCopy),            // copy 50–70: 50–60 under comm
      ev(0, 100, 65 * us, 80 * us, EventClass::kGilWait, "gil_wait", "GIL"),  // 65–70 under copy
      ev(0, 100, 0, 5 * us, EventClass::kHost, "cpu_op", "aten::mm"),  // host work: not counted
  };
  const Summary s = summarize(t);
  REQUIRE(s.per_gpu.size() == 1);
  const GpuSummary& g = s.per_gpu[0];
  // compute 10–40 = 30; comm 40–60 = 20 (30–40 is under compute); copy 60–70 = 10;
  // host-wait 70–80 = 10; idle = 100 − 70 = 30 µs.
  CHECK(g.compute_s == Approx(30e-6));
  CHECK(g.comm_s == Approx(20e-6));
  CHECK(g.copy_s == Approx(10e-6));
  CHECK(g.host_wait_s == Approx(10e-6));
  CHECK(g.idle_s == Approx(30e-6));
  CHECK(g.compute_s + g.comm_s + g.copy_s + g.host_wait_s + g.idle_s == Approx(100e-6));
  // exposed = comm not under compute = 20 µs; overlapped = comm ∩ compute = 30–40 = 10 µs
  CHECK(g.exposed_comm_s == Approx(20e-6));
  CHECK(g.overlapped_comm_s == Approx(10e-6));
  // busy = (30 + 20 + 10) / 100
  CHECK(g.busy_fraction == Approx(0.6));
  CHECK(s.exposed_comm_s == Approx(20e-6));
  CHECK(s.overlapped_comm_s == Approx(10e-6));
  CHECK_FALSE(s.has_memory_data);
  CHECK(s.imbalance == 0);
}

TEST_CASE("per-step averages over steps 2..N, clipped to the window", "[summary]") {
  Trace t;
  t.processes = {{0, "node 0 / GPU 0", 0, 0, 0, 0, 0}};
  // Steps #1 [0,10], #2 ends 20, #3 ends 30 ms: window [10, 30] = 2 steps of 10 ms.
  // Compute 5–15 (5 ms inside the window) and 20–24 (4 ms): 9 ms over 2 steps = 4.5 ms/step.
  t.events = {step(0, 1, 0, 10 * kMs), step(0, 2, 10 * kMs, 20 * kMs),
              step(0, 3, 20 * kMs, 30 * kMs), ev(0, 7, 5 * kMs, 15 * kMs, EventClass::kCompute),
              ev(0, 7, 20 * kMs, 24 * kMs, EventClass::kCompute)};
  const Summary s = summarize(t);
  REQUIRE(s.per_gpu.size() == 1);
  CHECK(s.per_gpu[0].compute_s == Approx(0.0045));
  CHECK(s.per_gpu[0].idle_s == Approx(0.0055));  // 10 − 4.5
  CHECK(s.per_gpu[0].busy_fraction == Approx(0.45));
}

TEST_CASE("utilisation per step: busy share and memory peak of every step, the first included",
          "[summary]") {
  Trace t;
  const Bytes cap = 8 * kGiB;
  t.processes = {{0, "node 0 / GPU 0", 0, 0, 0, cap, 0}};
  // Steps #1 [0,10], #2 (10,20], #3 (20,30] ms. Compute 5–15 ms and comm 20–24 ms:
  //   step 1: 5 ms of 10 busy -> 0.5; step 2: 5 of 10 -> 0.5; step 3: 4 of 10 -> 0.4.
  t.events = {step(0, 1, 0, 10 * kMs), step(0, 2, 10 * kMs, 20 * kMs),
              step(0, 3, 20 * kMs, 30 * kMs), ev(0, 7, 5 * kMs, 15 * kMs, EventClass::kCompute),
              ev(0, 8, 20 * kMs, 24 * kMs, EventClass::kCommunication)};
  // Memory: 1 GiB at 0, 4 GiB at 12 ms, 2 GiB at 18 ms, nothing after: step 1 peaks at 1 GiB,
  // step 2 at 4 GiB, step 3 keeps the 2 GiB step 2 left (the level before it counts).
  t.counters = {mem(0, 0, 1.0 * kGiB), mem(0, 12 * kMs, 4.0 * kGiB), mem(0, 18 * kMs, 2.0 * kGiB)};
  const Summary s = summarize(t);
  REQUIRE(s.per_gpu.size() == 1);
  const std::vector<StepUtilisation>& u = s.per_gpu[0].by_step;
  REQUIRE(u.size() == 3);
  CHECK(u[0].step == 1);
  CHECK(u[0].busy_fraction == Approx(0.5));
  CHECK(u[1].busy_fraction == Approx(0.5));
  CHECK(u[2].busy_fraction == Approx(0.4));
  CHECK(u[0].peak_bytes == 1 * kGiB);
  CHECK(u[1].peak_bytes == 4 * kGiB);
  CHECK(u[2].peak_bytes == 2 * kGiB);
  // The table: step 2 is 50 % busy and 4 / 8 GiB = 50 % full.
  std::ostringstream table;
  print_summary_table(s, table);
  CHECK(table.str().find("utilisation per step") != std::string::npos);
  CHECK(table.str().find("50 / 50") != std::string::npos);
}

TEST_CASE("memory peaks, imbalance, DataParallel markers, OOM", "[summary]") {
  Trace t;
  t.metadata = {{"scenario", {{"name", "dp"}}},
                {"strategy",
                 {{"label", "DataParallel"}, {"kind", "data_parallel"}, {"device_ids", {0, 1, 2}}}},
                {"backend", "sim"},
                {"samples_per_step", 30}};
  const Bytes cap = 10 * kGiB;
  t.processes = {{0, "node 0 / GPU 0", 0, 0, 0, cap, 0},
                 {1, "node 0 / GPU 1", 1, 0, 1, cap, 1},
                 {2, "node 0 / GPU 2", 2, 0, 2, cap, 2}};
  t.events = {step(0, 1, 0, 10 * kMs)};
  for (int p = 0; p < 3; ++p) t.events.push_back(ev(p, 7, 0, 5 * kMs, EventClass::kCompute));
  // Peaks 6, 2, 2 GiB (GPU 0 rises and falls): mean 10/3, imbalance = 6 / (10/3) = 1.8.
  t.counters = {mem(0, 0, 1.0 * kGiB), mem(0, 5, 6.0 * kGiB), mem(0, 9, 3.0 * kGiB),
                mem(1, 0, 2.0 * kGiB), mem(2, 0, 2.0 * kGiB)};
  Summary s = summarize(t);
  CHECK(s.has_memory_data);
  CHECK(s.per_gpu[0].peak_bytes == 6 * kGiB);
  CHECK(s.imbalance == Approx(1.8));
  CHECK(s.device_ids0 == 0);
  CHECK(s.output_device == 0);  // defaults to device_ids[0]
  CHECK_FALSE(s.oom);
  // 30 samples per 10 ms step = 3000 samples/s
  CHECK(s.samples_per_s == Approx(3000));
  std::ostringstream table;
  print_summary_table(s, table);
  CHECK(table.str().find("imbalance (max/mean of peak memory): 1.80x") != std::string::npos);
  CHECK(table.str().find("device_ids[0] and output_device") != std::string::npos);
  CHECK(table.str().find("node 0 / GPU 1") != std::string::npos);
  CHECK(table.str().find("sim (simulated)") != std::string::npos);

  // Over capacity without an executor verdict: derived from the counters, op unknown.
  t.counters.push_back(mem(1, 7, 12.0 * kGiB));
  s = summarize(t);
  REQUIRE(s.oom);
  CHECK(s.oom->gpu == 1);
  CHECK(s.oom->op.empty());
  CHECK(s.oom->shortfall_bytes == 2 * kGiB);  // 12 − 10 GiB
  CHECK(s.oom->at_ns == 7);

  // The executor's verdict wins; null means none.
  t.metadata["oom"] = {
      {"gpu", 0}, {"op", "optimizer.step"}, {"shortfall_bytes", 123}, {"at_ns", 9}};
  s = summarize(t);
  REQUIRE(s.oom);
  CHECK(s.oom->op == "optimizer.step");
  CHECK(s.oom->shortfall_bytes == 123);
  t.metadata["oom"] = nullptr;
  CHECK_FALSE(summarize(t).oom);

  const nlohmann::json j = summary_to_json(summarize(t));
  CHECK(j["oom"].is_null());
  CHECK(j["imbalance"].get<double>() == Approx(1.8));
  REQUIRE(j["per_gpu"].size() == 3);
  for (const char* k :
       {"rank", "node", "gpu", "peak_bytes", "capacity_bytes", "busy_fraction", "compute_s",
        "comm_s", "copy_s", "host_wait_s", "idle_s", "exposed_comm_s"}) {
    CHECK(j["per_gpu"][0].contains(k));
  }
  CHECK(j.dump(2).find("\"step_time_s\": ") != std::string::npos);
}

TEST_CASE("no steps: the whole trace is one step, with a note", "[summary]") {
  Trace t;
  t.events = {ev(3, 7, 100, 300, EventClass::kCompute)};
  const Summary s = summarize(t);
  CHECK(s.step_times_ns == std::vector<TimeNs>{200});
  REQUIRE(s.per_gpu.size() == 1);  // no process info: the pid with GPU work is the GPU
  CHECK(s.per_gpu[0].busy_fraction == Approx(1.0));
  CHECK(s.notes.size() == 2);  // no ProfilerStep, no memory data
}

TEST_CASE("communication by group: each group's time and the part no compute overlaps",
          "[summary]") {
  // One step [0, 100] ms on GPU 0 (a single step is the window). Compute [0, 40]; a tp
  // collective [30, 50] and a cp transfer [45, 70] on two streams; a second cp event [60, 80]
  // overlapping the first; a dp collective without a description, named only by its process group
  // name; and a collective outside any group. Per group:
  //   tp: [30, 50] = 20 ms, exposed [40, 50] = 10 ms
  //   cp: [45, 80] (the union) = 35 ms, all exposed
  //   dp (Process Group Name "dp_shard 3"): [90, 95] = 5 ms exposed
  //   unnamed: [96, 98] = 2 ms
  // tp and cp both run in [45, 50]: each counts it, so the groups' exposed times sum to 52 ms
  // where the GPU's own split has 47 ms of exposed communication ([40, 80] + [90, 95] + [96, 98]).
  Trace t;
  t.processes = {{0, "node 0 / GPU 0", 0, 0, 0, 0, 0}};
  auto comm = [](TimeNs a, TimeNs b, std::int32_t tid, const char* key, const char* value) {
    TraceEvent e = ev(0, tid, a * kMs, b * kMs, EventClass::kCommunication);
    if (key != nullptr) e.args.push_back({key, std::string(value)});
    return e;
  };
  t.events = {step(0, 1, 0, 100 * kMs),
              ev(0, 7, 0, 40 * kMs, EventClass::kCompute),
              comm(30, 50, 7, "Process Group Description", "tp (dp 0, pp 0)"),
              comm(45, 70, 8, "Process Group Description", "cp (tp 0, dp 0, pp 0)"),
              comm(60, 80, 9, "Process Group Description", "cp (tp 0, dp 0, pp 0)"),
              comm(90, 95, 8, "Process Group Name", "dp_shard 3"),
              comm(96, 98, 8, nullptr, nullptr)};
  const Summary s = summarize(t);
  REQUIRE(s.comm_by_group.size() == 4);
  const std::vector<std::string> order = {"tp", "cp", "dp_shard", "unnamed"};  // first seen
  const std::vector<double> comm_ms = {20, 35, 5, 2}, exposed_ms = {10, 35, 5, 2};
  for (std::size_t i = 0; i < order.size(); ++i) {
    INFO(order[i]);
    CHECK(s.comm_by_group[i].group == order[i]);
    CHECK(s.comm_by_group[i].comm_s == Approx(comm_ms[i] * 1e-3));
    CHECK(s.comm_by_group[i].exposed_s == Approx(exposed_ms[i] * 1e-3));
  }
  CHECK(s.exposed_comm_s == Approx(0.047));
  // The table names them, most exposed first.
  std::ostringstream out;
  print_summary_table(s, out);
  CHECK(out.str().find("by group: cp 35.000 ms (exposed 35.000), tp 20.000 ms (exposed 10.000), "
                       "dp_shard 5.000 ms (exposed 5.000), unnamed 2.000 ms (exposed 2.000)") !=
        std::string::npos);
}
