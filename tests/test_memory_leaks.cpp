// Memory troubleshooting through the simulator (docs/memory.md): the two leaks told apart by their
// growth per step and category, empty_cache lowering reserved but not allocated memory, and the
// OOM step predicted from a few steps matching the step a longer simulation runs out in.
#include <catch2/catch.hpp>

#include "core/caching_allocator.hpp"
#include "core/lowering/program_builder.hpp"
#include "core/scenario_parser.hpp"
#include "profiler/summary.hpp"
#include "tools/simrun_app.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// 4 layers of 2 kernels, 1000 parameters, 1 MiB saved activations per sample (`act_mib`), and a
// 1 KiB output per sample; fp32 SGD without momentum (no optimizer state), no input bytes, one
// A100-80GB. Batch 8.
std::string scenario(const std::string& training_extra, double act_mib = 1.0) {
  std::string layers;
  for (int i = 0; i < 4; ++i) {
    layers += std::string(i ? "," : "") + "{\"name\":\"l" + std::to_string(i) +
              "\",\"kind\":\"gemm\",\"params\":1000,\"kernels\":2,\"fwd_flops_per_sample\":1e6,"
              "\"activation_bytes_per_sample\":" +
              std::to_string(act_mib * kMiB) + ",\"output_bytes_per_sample\":1024}";
  }
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":1,\"gpu\":\"A100-SXM4-80GB\"},\"host\":{"
         "\"python\":false},"
         "\"model\":{\"explicit\":[" +
         layers +
         "],\"input_bytes_per_sample\":0},"
         "\"training\":{\"global_batch\":8,\"optimizer\":\"sgd\",\"precision\":\"fp32\"" +
         training_extra + "},\"strategy\":{\"kind\":\"single\"}}";
}

app::SimRun run(const std::string& json, std::vector<std::string> sets = {}) {
  return app::simulate(parse_scenario_string(json, "leak.json", sets));
}

}  // namespace

TEST_CASE("no leak: memory at step ends is flat and no growth is reported", "[memory][leak]") {
  const app::SimRun r = run(scenario(",\"steps\":5"));
  const prof::Summary s = prof::summarize(r.trace);
  CHECK(s.memory_growth.empty());
  REQUIRE(s.per_gpu.size() == 1);
  CHECK(s.per_gpu[0].has_reserved_data);
  CHECK(s.per_gpu[0].peak_reserved_bytes >= s.per_gpu[0].peak_bytes);
}

TEST_CASE("the two leaks are told apart by growth per step and category", "[memory][leak]") {
  SECTION("loss_as_tensor: the autograd graph and a scalar per step") {
    const app::SimRun r = run(scenario(",\"steps\":5,\"leaks\":{\"loss_as_tensor\":true}"));
    const prof::Summary s = prof::summarize(r.trace);
    REQUIRE(s.memory_growth.size() == 1);
    const prof::MemoryGrowth& g = s.memory_growth[0];
    // nodes = sum of kernels (4 x 2) + 3 (loss) + 1 (+=) = 12; 12 x 256 B + a 4 B scalar
    // = 3076 B per step, all in category autograd_graph.
    CHECK(autograd_graph_nodes(parse_scenario_string(scenario(""), "x.json", {})) == 12);
    CHECK(g.bytes_per_step == Approx(12 * 256 + 4));
    CHECK(g.category == "autograd_graph");
    CHECK(g.category_bytes_per_step == Approx(3076));
    CHECK(g.first_step == 1);
    CHECK(g.last_step == 4);  // the trace's last step (5) is not compared
    // The allocator rounds both: 3072 B (a multiple of 512) + 512 B for the 4 B scalar = 3584 B
    // more allocated-block bytes per step.
    const GpuAllocatorTimeline& a = r.memory.allocator.gpus.at(0);
    const Bytes end_allocated = a.samples.back().allocated_bytes;
    // At the end: params (4000 fp32 -> 16000 B -> 16384 B block) + 5 x 3584.
    CHECK(end_allocated == 16384 + 5 * 3584);
  }
  SECTION("keep_outputs: an activation-sized growth per step") {
    const app::SimRun r = run(scenario(",\"steps\":5,\"leaks\":{\"keep_outputs\":true}"));
    const prof::Summary s = prof::summarize(r.trace);
    REQUIRE(s.memory_growth.size() == 1);
    const prof::MemoryGrowth& g = s.memory_growth[0];
    // The eval forward keeps 4 layers x 8 samples x 1 MiB of saved activations and the
    // 8 x 1 KiB output: 32 MiB + 8 KiB per step, category activations.
    CHECK(g.bytes_per_step == Approx(32 * kMiB + 8 * 1024));
    CHECK(g.category == "activations");
    CHECK(g.category_bytes_per_step == Approx(32 * kMiB + 8 * 1024));
  }
}

// The same model under nn.DataParallel on two GPUs (docs/memory.md, "Under DataParallel").
std::string dp_scenario(const std::string& training_extra) {
  std::string j = scenario(training_extra);
  const auto swap = [&j](const std::string& from, const std::string& to) {
    const std::size_t at = j.find(from);
    REQUIRE(at != std::string::npos);
    j.replace(at, from.size(), to);
  };
  swap("\"gpus_per_node\":1", "\"gpus_per_node\":2");
  swap("{\"kind\":\"single\"}", "{\"kind\":\"data_parallel\"}");
  return j;
}

TEST_CASE("the leaks under DataParallel grow on the devices PyTorch keeps them on",
          "[memory][leak]") {
  SECTION("keep_outputs: every replica's activations, replica 1's parameter copy, the logits") {
    const app::SimRun r = run(dp_scenario(",\"steps\":5,\"leaks\":{\"keep_outputs\":true}"));
    CHECK(r.program.warnings.empty());
    const prof::Summary s = prof::summarize(r.trace);
    REQUIRE(s.memory_growth.size() == 2);
    // Batch 8 in two chunks of 4. GPU 0 (device_ids[0] = output_device): 4 layers x 4 samples x
    // 1 MiB of saved activations + the gathered 8 x 1 KiB logits. GPU 1: the same activations +
    // its parameter copy, 4 layers x 1000 fp32 parameters = 16000 B.
    for (const prof::MemoryGrowth& g : s.memory_growth) {
      INFO("GPU " << g.gpu);
      CHECK(g.category == "activations");
      CHECK(g.category_bytes_per_step == Approx(16 * kMiB));
      CHECK(g.bytes_per_step == Approx(16 * kMiB + (g.gpu == 0 ? 8 * 1024 : 16000)));
    }
  }
  SECTION("loss_as_tensor: both replicas' graph nodes on output_device") {
    const app::SimRun r = run(dp_scenario(",\"steps\":5,\"leaks\":{\"loss_as_tensor\":true}"));
    const prof::Summary s = prof::summarize(r.trace);
    REQUIRE(s.memory_growth.size() == 1);
    // 2 replicas x 8 kernel nodes + 3 (loss) + 1 (+=) + 3 (Scatter, Broadcast, Gather) = 23
    // nodes x 256 B + the 4 B scalar = 5892 B per step, on output_device (GPU 0).
    CHECK(s.memory_growth[0].gpu == 0);
    CHECK(s.memory_growth[0].bytes_per_step == Approx(5892));
  }
  SECTION("empty_cache releases the cached segments of both devices") {
    const app::SimRun r = run(dp_scenario(",\"steps\":2,\"empty_cache_every\":1"));
    REQUIRE(r.memory.allocator.gpus.size() == 2);
    for (const GpuAllocatorTimeline& a : r.memory.allocator.gpus) CHECK(a.empty_cache.size() == 2);
  }
}

TEST_CASE("empty_cache lowers reserved memory, not allocated memory", "[memory][allocator]") {
  const app::SimRun r = run(scenario(",\"steps\":2,\"empty_cache_every\":1"));
  const GpuAllocatorTimeline& a = r.memory.allocator.gpus.at(0);
  REQUIRE(a.empty_cache.size() == 2);  // after steps 1 and 2
  // Each layer saves 8 samples x 1 MiB = 8 MiB: a 1-10 MiB request, so two share a 20 MiB
  // segment (8 + 8 + a 4 MiB remainder): 2 large segments, all free after backward. Params
  // (16384 B), grads (16384 B) and the output (8 KiB) live in one 2 MiB small segment, which
  // the parameters keep busy. empty_cache releases the two large segments: 40 MiB.
  for (const EmptyCacheEffect& e : a.empty_cache) {
    CHECK(e.released_bytes == 40 * kMiB);
    CHECK(e.reserved_after_bytes == 2 * kMiB);
  }
  // At the call only the parameters' block is allocated (zero_grad freed the grads before
  // loss.item() returned); it stays allocated while reserved drops from 42 MiB to 2 MiB.
  for (const EmptyCacheEffect& e : a.empty_cache) {
    CHECK(e.allocated_bytes == 16384);
    CHECK(e.reserved_after_bytes + e.released_bytes == 42 * kMiB);
  }
  const TimeNs t = a.empty_cache[0].t_ns;
  const AllocatorSample* at = nullptr;
  for (const AllocatorSample& smp : a.samples) {
    if (smp.t_ns == t) at = &smp;
  }
  REQUIRE(at != nullptr);
  CHECK(at->reserved_bytes == 2 * kMiB);
  CHECK(at->allocated_bytes == 16384);
  // The trace carries the reserved counter; the summary reads its peak.
  const prof::Summary s = prof::summarize(r.trace);
  CHECK(s.per_gpu.at(0).peak_reserved_bytes == 42 * kMiB);
  // Without empty_cache the segments stay cached: reserved stays 42 MiB.
  const app::SimRun keep = run(scenario(",\"steps\":2"));
  CHECK(keep.memory.allocator.gpus.at(0).samples.back().reserved_bytes == 42 * kMiB);
  CHECK(keep.memory.allocator.gpus.at(0).empty_cache.empty());
}

TEST_CASE("the OOM step predicted from 4 steps is the step a long run runs out in",
          "[memory][leak]") {
  // keep_outputs with 64 MiB per sample and layer: 4 x 8 x 64 MiB = 2 GiB (+ 8 KiB) kept per step.
  const std::string json = scenario(",\"leaks\":{\"keep_outputs\":true}", 64.0);
  const app::SimRun short_run = run(json, {"training.steps=4"});
  const prof::Summary s = prof::summarize(short_run.trace);
  REQUIRE(s.memory_growth.size() == 1);
  const prof::MemoryGrowth& g = s.memory_growth[0];
  CHECK(g.bytes_per_step == Approx(2.0 * 1024 * kMiB + 8 * 1024));
  // Steps 1..3 are compared (the last, 4, is left out); step 3 peaks at P_3 (its eval forward on
  // top of the 2 kept steps before it, or its training activations); step 3 + j peaks at
  // P_3 + j x growth, so the first step above the usable capacity C is
  // 3 + floor((C - P_3) / growth) + 1 (docs/summary.md, "Memory growth").
  CHECK(g.last_step == 3);
  const double c = static_cast<double>(g.capacity_bytes);
  const auto expected = 3 +
                        static_cast<std::int64_t>(
                            (c - static_cast<double>(g.last_step_peak_bytes)) / g.bytes_per_step) +
                        1;
  CHECK(g.oom_step == expected);
  REQUIRE(g.oom_step > 4);
  REQUIRE(g.oom_step < 60);
  // Simulating that many steps: the first allocation above capacity is in step oom_step...
  const app::SimRun long_run = run(json, {"training.steps=" + std::to_string(g.oom_step)});
  REQUIRE(long_run.memory.oom);
  CHECK(long_run.program.ops[long_run.memory.oom->op].step == g.oom_step);
  // ...and one step fewer fits.
  const app::SimRun fits = run(json, {"training.steps=" + std::to_string(g.oom_step - 1)});
  CHECK_FALSE(fits.memory.oom);
}

TEST_CASE("memory switches are parsed with clear errors", "[memory][scenario]") {
  CHECK_THROWS_WITH(
      parse_scenario_string(scenario(",\"leaks\":{\"loss_as_tensr\":true}"), "x.json", {}),
      Catch::Contains("loss_as_tensor"));
  CHECK_THROWS_WITH(parse_scenario_string(scenario(",\"empty_cache_every\":-1"), "x.json", {}),
                    Catch::Contains("training.empty_cache_every"));
  CHECK_THROWS_WITH(parse_scenario_string(scenario(",\"del_temporaries\":1"), "x.json", {}),
                    Catch::Contains("expected true or false"));
  const Scenario sc =
      parse_scenario_string(scenario(""), "x.json",
                            {"training.leaks.keep_outputs=true", "training.del_temporaries=false"});
  CHECK(sc.training.leak_keep_outputs);
  CHECK_FALSE(sc.training.del_temporaries);
  CHECK(sc.training.empty_cache_every == 0);
}

TEST_CASE("every free of the bundled scenarios matches a live allocation", "[memory][allocator]") {
  // The allocator pairs a free with an allocation by GPU, category and size (docs/memory.md,
  // "Driving it with a Program"); a lowering whose frees do not mirror its allocations would
  // leave blocks allocated for ever.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"single_gpu_linear.json", {}},
      {"linear_5x2_dp2.json", {}},
      {"linear_5x2_dp2.json", {"strategy.kind=ddp"}},
      {"dp_vs_ddp_4x1080ti.json", {}},
      {"resnet50_model_parallel_2gpu.json", {}},
      {"gpt_pipeline_8xa100.json", {}},
      {"gpt_20b_64xa100_zero3.json", {}},
      {"llama3_8b_64xh100_fsdp.json", {}},
      {"gpt_20b_64xa100_3d.json", {}},
      {"gpt2_small_1xh200.json", {}},
  };
  for (const auto& [file, sets] : cases) {
    const app::SimRun r = app::simulate(
        parse_scenario_file(std::string(CSIM_SOURCE_DIR) + "/scenarios/" + file, sets));
    for (const GpuAllocatorTimeline& g : r.memory.allocator.gpus) {
      INFO(file << " GPU " << g.gpu);
      CHECK(g.unmatched_frees == 0);
    }
  }
}

TEST_CASE("growth is read from any trace's counters; none means no memory data", "[memory][leak]") {
  // A hand-made trace: 5 steps of 100 ns, one kernel each; allocated at each step's end
  // 10, 13, 16, 19 GiB-ish units (3 MiB growth per step, all "activations"), capacity 100 MiB.
  prof::Trace t;
  prof::ProcessInfo p;
  p.pid = 0;
  p.gpu = 0;
  p.capacity_bytes = 100 * kMiB;
  t.processes.push_back(p);
  for (int k = 1; k <= 5; ++k) {
    const TimeNs s0 = (k - 1) * 100;
    t.events.push_back({0,
                        1,
                        s0,
                        100,
                        "ProfilerStep#" + std::to_string(k),
                        "user_annotation",
                        prof::EventClass::kAnnotation,
                        -1,
                        -1,
                        {}});
    t.events.push_back(
        {0, 2, s0 + 10, 50, "gemm", "kernel", prof::EventClass::kCompute, -1, -1, {}});
  }
  SECTION("no counters: no memory data, no guess") {
    const prof::Summary s = prof::summarize(t);
    CHECK_FALSE(s.has_memory_data);
    CHECK(s.memory_growth.empty());
  }
  SECTION("growing counters: growth, category and OOM step") {
    for (int k = 1; k <= 5; ++k) {
      const double base = static_cast<double>((10 + 3 * k) * kMiB);
      // mid-step peak 20 MiB above the end-of-step level
      t.counters.push_back({0,
                            "memory",
                            (k - 1) * 100 + 50,
                            {{"allocated", base + 20 * kMiB}, {"activations", base}}});
      t.counters.push_back({0,
                            "memory",
                            (k - 1) * 100 + 90,
                            {{"allocated", base}, {"activations", base - 5 * kMiB}}});
    }
    const prof::Summary s = prof::summarize(t);
    REQUIRE(s.memory_growth.size() == 1);
    const prof::MemoryGrowth& g = s.memory_growth[0];
    // Compared steps 1..4: E = 13, 16, 19, 22 MiB -> 3 MiB per step; step 4 peaks at 42 MiB.
    CHECK(g.bytes_per_step == Approx(3.0 * kMiB));
    CHECK(g.category == "activations");
    CHECK(g.last_step == 4);
    CHECK(g.last_step_peak_bytes == 42 * kMiB);
    // 4 + floor((100 - 42) / 3) + 1 = 4 + 19 + 1 = 24: step 24 peaks at 42 + 20 x 3 = 102 MiB.
    CHECK(g.oom_step == 24);
  }
}
