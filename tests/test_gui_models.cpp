// simview's memory, statistics and scenario models, on the golden DataParallel trace and on
// hand-made traces.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/scenario_parser.hpp"
#include "gui/document.hpp"
#include "gui/event_style.hpp"
#include "gui/memory_model.hpp"
#include "gui/scenario_runner.hpp"
#include "gui/stats_model.hpp"
#include "profiler/summary.hpp"
#include "tools/simrun_app.hpp"

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
  REQUIRE(rows.size() == 9);
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
  CHECK(r.seconds < 1.0);  // "well under a second" for the bundled small scenarios
}

TEST_CASE("statistics of a symmetric run count each simulated GPU for its mirrors", "[gui]") {
  // 3D dp 2 x tp 2 x pp 2 on 8 A100s: simulated with rank symmetry (2 GPUs stand for 8) and in
  // full; the executed FLOP/s of the whole run and every GPU's row must agree.
  const std::string json =
      "{\"cluster\":{\"gpus_per_node\":8,\"gpu\":\"A100-SXM4-80GB\"},"
      "\"model\":{\"gpt\":{\"layers\":4,\"hidden\":1024,\"heads\":16,\"seq_len\":512,"
      "\"vocab\":32000}},\"training\":{\"global_batch\":16,\"precision\":\"bf16\",\"steps\":2},"
      "\"strategy\":{\"kind\":\"3d\",\"tp\":2,\"pp\":2}}";
  const app::SimRun sym = app::simulate(core::parse_scenario_string(json, "t.json"));
  const app::SimRun full =
      app::simulate(core::parse_scenario_string(json, "t.json", {"simulation.symmetry=off"}));
  const StatsModel a = build_stats(sym.trace, prof::summarize(sym.trace));
  const StatsModel b = build_stats(full.trace, prof::summarize(full.trace));
  CHECK(a.gpus.size() == 8);
  CHECK(a.gpus.size() == b.gpus.size());
  CHECK(a.achieved_flops_per_s == Approx(b.achieved_flops_per_s).epsilon(1e-9));
  CHECK(a.gil_wait_s == Approx(b.gil_wait_s).margin(1e-12));
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
