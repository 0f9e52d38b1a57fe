// simview's memory, statistics and scenario models, on the golden DataParallel trace and on
// hand-made traces.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <tuple>

#include "core/scenario/scenario_parser.hpp"
#include "gui/document.hpp"
#include "gui/event_style.hpp"
#include "gui/memory_model.hpp"
#include "gui/scenario_runner.hpp"
#include "gui/stats_model.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"

using namespace csim;
using namespace csim::gui;

namespace {

prof::CounterSample mem(int pid, TimeNs ts, double params, double act) {
  prof::CounterSample c;
  c.pid = pid;
  c.name = "memory";
  c.ts_ns = ts;
  c.values = {{"allocated", params + act}, {"params", params}, {"activations", act}};
  return c;
}

}  // namespace

TEST_CASE("memory model: stacked categories, peak, roles", "[gui]") {
  prof::Trace t;
  for (int p = 0; p < 2; ++p) {
    prof::ProcessInfo pi;
    pi.pid = p;
    pi.gpu = p;
    pi.name = "GPU " + std::to_string(p);
    pi.capacity_bytes = 1000;
    t.processes.push_back(pi);
  }
  t.counters = {mem(0, 0, 100, 0), mem(0, 50, 100, 300), mem(0, 100, 100, 0), mem(1, 0, 100, 0),
                mem(1, 60, 100, 100)};
  prof::Summary s;
  s.device_ids0 = 0;
  s.output_device = 1;
  s.imbalance = 1.33;
  const MemoryModel m = build_memory(t, s);
  REQUIRE(m.categories == std::vector<std::string>{"params", "activations"});
  REQUIRE(m.gpus.size() == 2);
  CHECK(m.gpus[0].peak_bytes == 400);
  CHECK(m.gpus[0].peak_t == 50);
  CHECK(m.gpus[0].device_ids0);
  CHECK_FALSE(m.gpus[0].output_device);
  CHECK(m.gpus[1].output_device);
  CHECK(m.max_bytes == 1000);  // capacity is the largest
  CHECK(m.imbalance == 1.33);
  CHECK(sample_at(m.gpus[0], -1) == -1);
  CHECK(sample_at(m.gpus[0], 50) == 1);
  CHECK(sample_at(m.gpus[0], 99) == 1);
}

TEST_CASE("memory model: a profile_memory trace's allocated total is drawn as a band", "[gui]") {
  // tests/data/kineto/profile_memory.json: a PyTorch-profiler trace with [memory] instants on
  // device 1 (Device Type 1) whose "Total Allocated" is 1, 3, 6, 4, 5 MiB after each, "Total
  // Reserved" 2, 4, 8, 8, 8 MiB, and one host allocation (Device Type 0, not GPU memory). Kineto
  // records the allocator's total only: no category, so before memory_bands the stack drew
  // nothing although the peak (6 MiB) was read.
  const std::unique_ptr<Document> doc =
      load_document(std::string(CSIM_SOURCE_DIR) + "/tests/data/kineto/profile_memory.json");
  const MemoryModel& m = doc->memory;
  CHECK(m.categories.empty());
  CHECK(m.has_unattributed);
  REQUIRE(m.gpus.size() == 1);
  const GpuMemory& g = m.gpus[0];
  CHECK(g.gpu == 1);
  const double mib = 1024.0 * 1024;
  REQUIRE(g.allocated == std::vector<double>{1 * mib, 3 * mib, 6 * mib, 4 * mib, 5 * mib});
  CHECK(g.peak_bytes == 6 * mib);
  CHECK(g.reserved == std::vector<double>{2 * mib, 4 * mib, 8 * mib, 8 * mib, 8 * mib});
  // Every sample's stack is one unattributed band as tall as its allocated total.
  for (std::size_t s = 0; s < g.allocated.size(); ++s) {
    CAPTURE(s);
    const std::vector<MemoryBand> b = memory_bands(g, s);
    REQUIRE(b.size() == 1);
    CHECK(b[0].category == -1);
    CHECK(b[0].bytes == g.allocated[s]);
  }
}

TEST_CASE("memory bands: categories bottom first, then the allocated bytes they leave out",
          "[gui]") {
  // Sample 0: allocated 500 = params 100 + activations 300 + 100 without a category; sample 1:
  // allocated equal to its categories' sum (a simulated trace), no extra band.
  prof::Trace t;
  prof::ProcessInfo pi;
  pi.gpu = 0;
  t.processes.push_back(pi);
  prof::CounterSample a = mem(0, 0, 100, 300);
  a.values[0].second = 500;
  t.counters = {a, mem(0, 10, 100, 50)};
  const MemoryModel m = build_memory(t, prof::Summary{});
  CHECK(m.has_unattributed);
  REQUIRE(m.categories == std::vector<std::string>{"params", "activations"});
  const std::vector<MemoryBand> b0 = memory_bands(m.gpus[0], 0);
  REQUIRE(b0.size() == 3);
  CHECK(std::tie(b0[0].category, b0[0].bytes) == std::make_tuple(0, 100.0));
  CHECK(std::tie(b0[1].category, b0[1].bytes) == std::make_tuple(1, 300.0));
  CHECK(std::tie(b0[2].category, b0[2].bytes) == std::make_tuple(-1, 100.0));
  const std::vector<MemoryBand> b1 = memory_bands(m.gpus[0], 1);
  REQUIRE(b1.size() == 2);
  CHECK(b1[1].bytes == 50);
  CHECK(memory_bands(m.gpus[0], 2).empty());  // past the last sample
  // A trace whose totals are their categories' sums has no unattributed band in its legend.
  prof::Trace sim = t;
  sim.counters = {mem(0, 0, 100, 300)};
  CHECK_FALSE(build_memory(sim, prof::Summary{}).has_unattributed);
}

TEST_CASE("memory model: the caching allocator's reserved line next to the allocated stack",
          "[gui]") {
  prof::Trace t;
  prof::ProcessInfo pi;
  pi.pid = 0;
  pi.gpu = 0;
  pi.capacity_bytes = 1000;
  t.processes.push_back(pi);
  t.counters = {mem(0, 0, 100, 0), mem(0, 50, 100, 300)};
  // Reserved runs ahead of allocated (segments are cached): 2 MiB-style rounding up to 1200 bytes
  // here, above the capacity, so the common y scale must reach it; the non-"reserved" series of
  // the counter are ignored.
  for (const auto& [ts, reserved] : {std::pair<TimeNs, double>{0, 200}, {40, 1200}, {90, 600}})
    t.counters.push_back(prof::CounterSample{
        0, prof::kReservedMemoryCounter, ts, {{"reserved", reserved}, {"segments", 3}}});
  const MemoryModel m = build_memory(t, prof::Summary{});
  REQUIRE(m.gpus.size() == 1);
  CHECK(m.gpus[0].reserved == std::vector<double>{200, 1200, 600});
  CHECK(m.gpus[0].reserved_t == std::vector<TimeNs>{0, 40, 90});
  CHECK(m.gpus[0].peak_reserved_bytes == 1200);
  CHECK(m.max_bytes == 1200);  // above capacity (1000) and the allocated peak (400)
  // The "memory reserved" counter adds no category to the stack.
  CHECK(m.categories == std::vector<std::string>{"params", "activations"});
}

TEST_CASE("memory columns keep the peak when many samples share a pixel", "[gui]") {
  GpuMemory g;
  for (int i = 0; i < 1000; ++i) {
    g.t.push_back(i);
    g.allocated.push_back(i == 437 ? 1e9 : 1.0);
  }
  // 1000 ns over 10 px: 100 samples per pixel.
  const auto cols = memory_columns(g, TimeView{0, 100}, 10);
  CHECK(cols.size() == 10);
  const bool peak_kept =
      std::any_of(cols.begin(), cols.end(), [](const MemoryColumn& c) { return c.sample == 437; });
  CHECK(peak_kept);
}

TEST_CASE("statistics and compare table on the golden DataParallel trace", "[gui]") {
  const auto doc =
      load_document(std::string(CSIM_SOURCE_DIR) + "/traces/linear_5x2_dp2.trace.json");
  const StatsModel& st = doc->stats;
  REQUIRE(st.gpus.size() == doc->summary.per_gpu.size());
  REQUIRE_FALSE(st.gpus.empty());
  for (std::size_t i = 0; i < st.gpus.size(); ++i) {
    // The five parts sum to the summary's window (docs/summary.md, "Time split").
    CHECK(st.gpus[i].window_s == Approx(doc->summary.window_s).epsilon(1e-6));
    CHECK(st.gpus[i].bubble_fraction ==
          Approx(doc->summary.per_gpu[i].idle_s / doc->summary.window_s));
  }
  CHECK(st.gpus[0].role.find("device_ids[0]") != std::string::npos);
  const auto rows = compare_table({&st, &st});
  REQUIRE(rows.size() == 10);  // compare_table's rows (stats_model.hpp)
  CHECK(rows[0].metric == "step time");
  CHECK(rows[0].delta == "+0.0 %");
  CHECK(rows[0].values[0] == rows[0].values[1]);
  // The timeline: two GPUs, steps from ProfilerStep#N.
  CHECK(doc->timeline.gpus.size() == 2);
  CHECK(doc->timeline.steps.size() == doc->summary.step_times_ns.size());
}

TEST_CASE("scenario knobs become --set overrides", "[gui]") {
  ScenarioKnobs k;
  k.strategy = 1;
  k.gpus = 2;
  k.global_batch = 64;
  k.micro_batches = 1;
  k.gil = false;
  CHECK(knob_overrides(k) ==
        std::vector<std::string>{"strategy.kind=data_parallel", "strategy.device_ids=[0,1]",
                                 "training.global_batch=64", "training.gradient_accumulation=1",
                                 "host.gil=false"});
  k.strategy = 2;
  k.bucket_cap_mb = 10;
  const auto o = knob_overrides(k);
  CHECK(std::find(o.begin(), o.end(), "strategy.ddp.bucket_cap_mb=10") != o.end());
  CHECK(std::find(o.begin(), o.end(), "strategy.ddp.launcher=process") != o.end());
  const auto v = launch_variants();
  REQUIRE(v.size() == 3);
  CHECK(v[1].overrides.back() == "host.gil=false");
}

TEST_CASE("the GIL checkbox's label says the state it shows", "[gui]") {
  // ImGui shows a label up to "###"; what follows is the widget's id, the same in both states.
  auto shown = [](bool gil) {
    const std::string l = gil_checkbox_label(gil);
    return l.substr(0, l.find("###"));
  };
  CHECK(shown(true) == "GIL on (threads take turns)");
  CHECK(shown(false) == "GIL off (free-threaded Python)");
  CHECK(std::string(gil_checkbox_label(true)).substr(shown(true).size()) ==
        std::string(gil_checkbox_label(false)).substr(shown(false).size()));
}

TEST_CASE("a bad scenario path gives an error, not an exception", "[gui]") {
  const SimResult r = run_scenario("/nonexistent/scenario.json", {});
  CHECK_FALSE(r.ok);
  CHECK_FALSE(r.error.empty());
}

TEST_CASE("class colours are distinct and text stays readable", "[gui]") {
  std::vector<Rgba> seen;
  for (int c = 0; c < prof::kEventClassCount; ++c) {
    const Rgba col = class_colour(static_cast<prof::EventClass>(c));
    CHECK(std::find(seen.begin(), seen.end(), col) == seen.end());
    seen.push_back(col);
    CHECK(folded_colour(static_cast<prof::EventClass>(c)) != col);
  }
  CHECK(text_on(rgba(255, 255, 255)) == rgba(16, 16, 16));
  CHECK(text_on(rgba(0, 0, 0)) == rgba(245, 245, 245));
  CHECK(red_of(rgba(1, 2, 3)) == 1);
  CHECK(blue_of(rgba(1, 2, 3)) == 3);
}

TEST_CASE("the scenario panel's knobs simulate a bundled scenario", "[gui]") {
  const std::string path = std::string(CSIM_SOURCE_DIR) + "/scenarios/linear_5x2_dp2.json";
  const SimResult r = run_scenario(path, {"host.gil=false"});
  INFO(r.error);
  REQUIRE(r.ok);
  CHECK_FALSE(r.trace.events.empty());
  // No wall-clock bound here (issue 16 item 19: it fails on a slow or loaded machine); the
  // panel's speed is a benchmark's business (bench/), not a unit test's.
  CHECK(r.seconds >= 0);
}

TEST_CASE("statistics of a symmetric run count each simulated GPU for its mirrors", "[gui]") {
  // 3D dp 2 x tp 2 x pp 2 on 8 A100s: simulated with rank symmetry (2 GPUs stand for 8) and in
  // full; the executed FLOP/s of the whole run and every GPU's row must agree.
  const std::string json =
      "{\"cluster\":{\"gpus_per_node\":8,\"gpu\":\"A100-SXM4-80GB\"},"
      "\"model\":{\"gpt\":{\"layers\":4,\"hidden\":1024,\"heads\":16,\"seq_len\":512,"
      "\"vocab\":32000}},\"training\":{\"global_batch\":16,\"precision\":\"bf16\",\"steps\":2},"
      "\"strategy\":{\"kind\":\"3d\",\"tp\":2,\"pp\":2}}";
  const run::RunResult sym = run::simulate(core::parse_scenario_string(json, "t.json"));
  const run::RunResult full =
      run::simulate(core::parse_scenario_string(json, "t.json", {"simulation.symmetry=off"}));
  const StatsModel a = build_stats(sym.trace, prof::summarize(sym.trace));
  const StatsModel b = build_stats(full.trace, prof::summarize(full.trace));
  CHECK(a.gpus.size() == 8);
  CHECK(a.gpus.size() == b.gpus.size());
  CHECK(a.achieved_flops_per_s == Approx(b.achieved_flops_per_s).epsilon(1e-9));
  CHECK(a.gpu_gil_wait_s == Approx(b.gpu_gil_wait_s).margin(1e-12));
  CHECK(a.host_gil_wait_s == Approx(b.host_gil_wait_s).margin(1e-12));
}

TEST_CASE("the statistics label says where the timings come from", "[gui]") {
  // A stand-in run must never pass for a GPU measurement (docs/real-execution.md).
  prof::Trace t;
  prof::Summary s;
  s.scenario = "x";
  s.backend = "sim";
  CHECK_THAT(build_stats(t, s).label, Catch::EndsWith("[simulated]"));
  s.backend = "cpu-standin";
  CHECK_THAT(build_stats(t, s).label, Catch::EndsWith("[CPU stand-in: not a measurement]"));
  s.backend = "cuda";
  CHECK_THAT(build_stats(t, s).label, Catch::EndsWith("[measured: cuda]"));
}

TEST_CASE("compare alignment: common steps and per-trace offsets to line step starts up", "[gui]") {
  // A simulated run whose steps start at 0, 10, 20 ms and a real one that starts its first event
  // at 100 ms, warms up for 35 ms and runs steps 1..2 at 135 and 147 ms (first event 100 ms).
  TimelineModel sim, real;
  sim.t_min = 0;
  sim.steps = {{1, 0, 10}, {2, 10, 20}, {3, 20, 30}};
  real.t_min = 100;
  real.steps = {{1, 135, 147}, {2, 147, 160}};
  const std::vector<const TimelineModel*> both = {&sim, &real};
  CHECK(common_steps(both) == std::vector<std::int64_t>{1, 2});
  // Step 2 starts 10 after the simulated trace's first event and 47 after the real one's: with
  // these offsets both step starts sit at x = shared view's time 0.
  CHECK(align_offsets_ns(both, 2) == std::vector<double>{10, 47});
  // Step 0 = first events; a step one trace lacks falls back to the first events too.
  CHECK(align_offsets_ns(both, 0) == std::vector<double>{0, 0});
  CHECK(align_offsets_ns(both, 3) == std::vector<double>{0, 0});
}

// [SECTION] Issue 16, item 15: the memory view's shared scale and GiB ticks; host GIL wait
// ---------------------------------------------------------------------------------

TEST_CASE("memory lanes share one y scale by default, per-GPU scaling is an option", "[gui]") {
  // DataParallel's picture in miniature: GPU 0 peaks at 22.9 GiB, GPU 1 at 10.5 GiB, 79.1 GiB
  // usable each (gpt2_small_8xa100 under DataParallel).
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  MemoryModel m;
  m.gpus.resize(2);
  m.gpus[0].peak_bytes = 22.9 * kGiB;
  m.gpus[1].peak_bytes = 10.5 * kGiB;
  for (GpuMemory& g : m.gpus) g.capacity_bytes = static_cast<Bytes>(79.1 * kGiB);
  // Shared: both lanes top out at 1.12 × the largest peak, so GPU 1's stack is 10.5 / 22.9 =
  // 46 % as tall as GPU 0's, as its bytes are.
  const double shared0 = memory_y_top(m, 0, MemoryScale::kShared, false);
  const double shared1 = memory_y_top(m, 1, MemoryScale::kShared, false);
  CHECK(shared0 == Approx(22.9 * 1.12 * kGiB));
  CHECK(shared1 == shared0);
  CHECK(m.gpus[1].peak_bytes / shared1 == Approx(10.5 / (22.9 * 1.12)));
  // Per GPU: each lane up to its own peak, so both peaks are drawn at 1 / 1.12 of the lane.
  CHECK(memory_y_top(m, 1, MemoryScale::kPerGpu, false) == Approx(10.5 * 1.12 * kGiB));
  CHECK(m.gpus[0].peak_bytes / memory_y_top(m, 0, MemoryScale::kPerGpu, false) ==
        Approx(m.gpus[1].peak_bytes / memory_y_top(m, 1, MemoryScale::kPerGpu, false)));
  // Up to capacity: 1.12 × 79.1 GiB for every lane in either mode.
  CHECK(memory_y_top(m, 1, MemoryScale::kShared, true) == Approx(79.1 * 1.12 * kGiB));
  CHECK(memory_y_top(m, 1, MemoryScale::kPerGpu, true) == Approx(79.1 * 1.12 * kGiB));
  // The command line's names.
  MemoryScale s = MemoryScale::kShared;
  CHECK(parse_memory_scale("per-gpu", &s));
  CHECK(s == MemoryScale::kPerGpu);
  CHECK(parse_memory_scale("shared", &s));
  CHECK(s == MemoryScale::kShared);
  CHECK_FALSE(parse_memory_scale("log", &s));
}

TEST_CASE("memory ticks: 1-2-5 steps of GiB, at most the lane's share of lines", "[gui]") {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  // Top 25.648 GiB (1.12 × 22.9): with 4 lines at most, 1 and 2 GiB steps give 25 and 12 lines,
  // 5 GiB gives 5, 10 GiB gives 2 → the smallest step that fits is 10 GiB: {10, 20} GiB.
  CHECK(memory_ticks(22.9 * 1.12 * kGiB, 4) == std::vector<double>{10 * kGiB, 20 * kGiB});
  // With 5 lines allowed, 5 GiB fits exactly (floor(25.6 / 5) = 5): {5, 10, 15, 20, 25} GiB.
  CHECK(memory_ticks(22.9 * 1.12 * kGiB, 5).size() == 5);
  // Top 11.76 GiB (1.12 × 10.5), 4 lines: 5 GiB → {5, 10} GiB.
  CHECK(memory_ticks(10.5 * 1.12 * kGiB, 4) == std::vector<double>{5 * kGiB, 10 * kGiB});
  // Below 1 GiB the unit is MiB: top 300 MiB, 3 lines → 100 MiB steps (200 MiB would give 1,
  // but 100 is the smallest step with floor(300 / step) <= 3).
  const auto mib = memory_ticks(300.0 * 1024 * 1024, 3);
  CHECK(mib == std::vector<double>{100.0 * 1024 * 1024, 200.0 * 1024 * 1024, 300.0 * 1024 * 1024});
  // Fractions of the unit when the top is just above one unit: top 1.5 GiB, 3 lines → 0.5 GiB.
  CHECK(memory_ticks(1.5 * kGiB, 3) == std::vector<double>{0.5 * kGiB, 1.0 * kGiB, 1.5 * kGiB});
  // Labels use the axis' unit.
  CHECK(memory_tick_label(10 * kGiB, 25 * kGiB) == "10 GiB");
  CHECK(memory_tick_label(0.5 * kGiB, 1.5 * kGiB) == "0.5 GiB");
  CHECK(memory_tick_label(100.0 * 1024 * 1024, 300.0 * 1024 * 1024) == "100 MiB");
  CHECK(memory_ticks(0, 4).empty());
}

TEST_CASE("memory view of gpt2_small_8xa100 under DataParallel: one scale, GPU 0 twice as tall",
          "[gui]") {
  // The docs' screenshot (docs/images/simview_memory_dp.png): device_ids[0] = output_device =
  // GPU 0 holds the optimizer state and the gathered outputs; GPUs 1..7 only their replica's
  // activations. One step is enough for the shapes (2 so that the optimizer state exists).
  const std::string path = std::string(CSIM_SOURCE_DIR) + "/scenarios/gpt2_small_8xa100.json";
  const SimResult r = run_scenario(path, {"training.steps=2"});
  INFO(r.error);
  REQUIRE(r.ok);
  const prof::Summary s = prof::summarize(r.trace);
  const MemoryModel m = build_memory(r.trace, s);
  REQUIRE(m.gpus.size() == 8);
  // The shared top covers the largest allocated peak and the caching allocator's reserved line,
  // which runs above it (segments are cached).
  double top = 0, peak = 0;
  for (const GpuMemory& g : m.gpus) {
    top = std::max({top, g.peak_bytes, g.peak_reserved_bytes});
    peak = std::max(peak, g.peak_bytes);
  }
  for (std::size_t i = 0; i < m.gpus.size(); ++i) {
    // Shared scale: every lane's top is 1.12 × that, whatever its own peak.
    CHECK(memory_y_top(m, i, MemoryScale::kShared, false) == Approx(top * 1.12));
  }
  // GPU 0 is the fullest, and on the shared scale its stack stands more than twice as tall as
  // GPU 1's (the figures the issue quotes: 22.9 vs 10.5 GiB).
  CHECK(m.gpus[0].peak_bytes == peak);
  CHECK(m.gpus[0].peak_bytes > 2 * m.gpus[1].peak_bytes);
  CHECK(m.imbalance > 1.5);
}

TEST_CASE("host GIL wait: the host threads' GIL-wait events per step over the window", "[gui]") {
  // GPU 0 with its main thread (tid 1: ProfilerStep#1..3 of 100 ns each) and a replica thread
  // (tid 2). The summary's window is steps 2..3 = [100, 300), 2 steps. GIL waits:
  //   tid 2: [50, 70) in step 1 (outside the window), [120, 130) 10 ns, [190, 220) 30 ns;
  //   tid 1: [250, 255) 5 ns.
  // So the host threads wait (10 + 30 + 5) / 2 = 22.5 ns per step: tid 2 20 ns, tid 1 2.5 ns.
  prof::Trace t;
  prof::ProcessInfo pi;
  pi.pid = 0;
  pi.gpu = 0;
  pi.name = "GPU 0";
  t.processes.push_back(pi);
  t.threads.push_back(prof::ThreadInfo{0, 1, "main", prof::LaneRole::kHost, 0});
  t.threads.push_back(prof::ThreadInfo{0, 2, "replica 1", prof::LaneRole::kHost, 1});
  auto ev = [](int tid, TimeNs ts, TimeNs dur, prof::EventClass cls, std::string name,
               std::string cat) {
    prof::TraceEvent e;
    e.pid = 0;
    e.tid = tid;
    e.ts_ns = ts;
    e.dur_ns = dur;
    e.cls = cls;
    e.name = std::move(name);
    e.cat = std::move(cat);
    return e;
  };
  for (int n = 1; n <= 3; ++n)
    t.events.push_back(ev(1, (n - 1) * 100, 100, prof::EventClass::kAnnotation,
                          "ProfilerStep#" + std::to_string(n), "user_annotation"));
  for (const auto& [tid, ts, dur] :
       {std::tuple<int, TimeNs, TimeNs>{2, 50, 20}, {2, 120, 10}, {2, 190, 30}, {1, 250, 5}})
    t.events.push_back(ev(tid, ts, dur, prof::EventClass::kGilWait, "GIL wait", "gil_wait"));
  const StatsModel st = build_stats(t, prof::Summary{});
  CHECK(st.host_gil_wait_s == Approx(22.5e-9));
  REQUIRE(st.gil_wait_by_thread.size() == 2);
  CHECK(st.gil_wait_by_thread[0].name == "GPU 0 / replica 1");
  CHECK(st.gil_wait_by_thread[0].wait_s == Approx(20e-9));
  CHECK(st.gil_wait_by_thread[1].wait_s == Approx(2.5e-9));
  // The GPU-side figure is the summary's, untouched (0 here: no summary split).
  CHECK(st.gpu_gil_wait_s == 0);
}

TEST_CASE("the step strip of gpt_pipeline_8xa100 reads the trace's step, not the union", "[gui]") {
  // Issue 16 item 14: every stage's ProfilerStep#2 lasts one step (826 ms), but the last stage
  // starts step 2 while stage 0 still runs step 1's backward, so the union over the stages
  // (min start, max end) was 965 ms and overlapped step 1. The strip takes GPU 0's spans.
  const std::string path = std::string(CSIM_SOURCE_DIR) + "/scenarios/gpt_pipeline_8xa100.json";
  const SimResult r = run_scenario(path, {});
  INFO(r.error);
  REQUIRE(r.ok);
  const TimelineModel m = build_timeline(r.trace);
  const prof::Summary s = prof::summarize(r.trace);
  REQUIRE(m.steps.size() == 3);  // the scenario's 3 steps
  REQUIRE(s.step_times_ns.size() == 3);
  CHECK(m.step_pid == 0);
  for (const StepMark& st : m.steps) {
    // Each strip step is exactly GPU 0's ProfilerStep#N event of the trace.
    const std::string name = "ProfilerStep#" + std::to_string(st.n);
    const auto it =
        std::find_if(r.trace.events.begin(), r.trace.events.end(),
                     [&](const prof::TraceEvent& e) { return e.pid == 0 && e.name == name; });
    REQUIRE(it != r.trace.events.end());
    CHECK(st.start == it->ts_ns);
    CHECK(st.end == it->ts_ns + it->dur_ns);
  }
  CHECK(m.steps[1].start >= m.steps[0].end);  // the strip tiles
  CHECK(m.steps[2].start >= m.steps[1].end);
  // Step 2 on the strip is the summary's step 2 (end_2 − end_1 over all stages, docs/summary.md
  // "Steps"): stage 0 finishes each step last (its backward is the pipeline's last), so both
  // measure between the same two ends; 1 % allows for a stage finishing a little later.
  CHECK(static_cast<double>(m.steps[1].end - m.steps[1].start) ==
        Approx(static_cast<double>(s.step_times_ns[1])).epsilon(0.01));
}

// [SECTION] Issue 16, item 16: the bundled GIL comparison
// ---------------------------------------------------------------------------------

TEST_CASE("mlp_gil_4x1080ti: threads with the GIL, GIL-free threads and processes differ",
          "[gui]") {
  // The launch variants exactly as simview --variants runs them (knobs, then the variant).
  const std::string path = std::string(CSIM_SOURCE_DIR) + "/scenarios/mlp_gil_4x1080ti.json";
  const ScenarioKnobs knobs = knobs_from(core::parse_scenario_file(path));
  std::vector<StatsModel> runs;
  for (const Variant& v : launch_variants()) {
    std::vector<std::string> o = knob_overrides(knobs);
    o.insert(o.end(), v.overrides.begin(), v.overrides.end());
    const SimResult r = run_scenario(path, o);
    INFO(v.label << ": " << r.error);
    REQUIRE(r.ok);
    runs.push_back(build_stats(r.trace, prof::summarize(r.trace)));
  }
  REQUIRE(runs.size() == 3);
  const StatsModel &gil = runs[0], &free = runs[1], &ddp = runs[2];
  // One replica's forward holds the GIL for its Python: 8 linear + 7 ReLU = 15 framework ops ×
  // host.python_us_per_op (4.8 µs, the default) + 8 layers × extra_python_us (20 µs) = 232 µs.
  // With the GIL the four replicas take turns op by op, so each waits for about the other three's
  // Python, 3 × 232 µs = 696 µs, and the step grows by the last replica's wait. 15 % covers the
  // main thread's own Python and the order in which replicas start.
  constexpr double kForwardPython = (15 * 4.8 + 8 * 20) * 1e-6;
  REQUIRE_FALSE(gil.gil_wait_by_thread.empty());
  CHECK(gil.gil_wait_by_thread.front().wait_s == Approx(3 * kForwardPython).epsilon(0.15));
  CHECK(gil.summary.step_time_s - free.summary.step_time_s ==
        Approx(3 * kForwardPython).epsilon(0.15));
  // Free-threaded Python and one process per GPU: nobody waits for a GIL.
  CHECK(gil.host_gil_wait_s > 4 * 0.5 * kForwardPython);
  CHECK(free.host_gil_wait_s == 0);
  CHECK(ddp.host_gil_wait_s == 0);
  // DDP also skips DataParallel's per-step replicate and thread start-up (4 × 60 µs
  // host.thread_start_us alone): faster again than GIL-free threads.
  CHECK(ddp.summary.step_time_s < free.summary.step_time_s - 4 * 60e-6);
  // The compare table shows the difference in its GIL row (A vs C: all of A's waits gone).
  const auto rows = compare_table({&gil, &free, &ddp});
  const auto row = std::find_if(rows.begin(), rows.end(), [](const CompareRow& r) {
    return r.metric == "GIL wait, host threads (sum)";
  });
  REQUIRE(row != rows.end());
  CHECK(row->delta == "-100.0 %");
}
