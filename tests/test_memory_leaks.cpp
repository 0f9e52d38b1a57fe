// Memory troubleshooting through the simulator (docs/memory.md): the two leaks told apart by their
// growth per step and category, empty_cache lowering reserved but not allocated memory, and the
// OOM step predicted from a few steps matching the step a longer simulation runs out in.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "core/lowering/parallel_plan.hpp"
#include "core/lowering/program_builder.hpp"
#include "core/program/caching_allocator.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"

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

run::RunResult run_json(const std::string& json, std::vector<std::string> sets = {}) {
  return run::simulate(parse_scenario_string(json, "leak.json", sets));
}

}  // namespace

TEST_CASE("no leak: memory at step ends is flat and no growth is reported", "[memory][leak]") {
  const run::RunResult r = run_json(scenario(",\"steps\":5"));
  const prof::Summary s = prof::summarize(r.trace);
  CHECK(s.memory_growth.empty());
  REQUIRE(s.per_gpu.size() == 1);
  CHECK(s.per_gpu[0].has_reserved_data);
  CHECK(s.per_gpu[0].peak_reserved_bytes >= s.per_gpu[0].peak_bytes);
  // The split of that peak by category (docs/summary.md, "Memory"): the memory counter's series,
  // which sum to its allocated series; 4 layers x 1000 fp32 parameters = 16,000 B of params, and
  // the peak holds every layer's saved activations of the batch, 4 x 1 MiB x 8 = 32 MiB.
  const std::map<std::string, Bytes>& cat = s.per_gpu[0].peak_by_category;
  Bytes sum = 0;
  for (const auto& [name, bytes] : cat) sum += bytes;
  CHECK(sum == s.per_gpu[0].peak_bytes);
  CHECK(cat.at("params") == 16000);
  CHECK(cat.at("activations") >= 32 * kMiB);
}

TEST_CASE("the two leaks are told apart by growth per step and category", "[memory][leak]") {
  SECTION("loss_as_tensor: the autograd graph and a scalar per step") {
    const run::RunResult r = run_json(scenario(",\"steps\":5,\"leaks\":{\"loss_as_tensor\":true}"));
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
    const run::RunResult r = run_json(scenario(",\"steps\":5,\"leaks\":{\"keep_outputs\":true}"));
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
    const run::RunResult r =
        run_json(dp_scenario(",\"steps\":5,\"leaks\":{\"keep_outputs\":true}"));
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
    const run::RunResult r =
        run_json(dp_scenario(",\"steps\":5,\"leaks\":{\"loss_as_tensor\":true}"));
    const prof::Summary s = prof::summarize(r.trace);
    REQUIRE(s.memory_growth.size() == 1);
    // 2 replicas x 8 kernel nodes + 3 (loss) + 1 (+=) + 3 (Scatter, Broadcast, Gather) = 23
    // nodes x 256 B + the 4 B scalar = 5892 B per step, on output_device (GPU 0).
    CHECK(s.memory_growth[0].gpu == 0);
    CHECK(s.memory_growth[0].bytes_per_step == Approx(5892));
  }
  SECTION("empty_cache releases the cached segments of both devices") {
    const run::RunResult r = run_json(dp_scenario(",\"steps\":2,\"empty_cache_every\":1"));
    REQUIRE(r.memory.allocator.gpus.size() == 2);
    for (const GpuAllocatorTimeline& a : r.memory.allocator.gpus) CHECK(a.empty_cache.size() == 2);
  }
}

// The same model on `gpus` GPUs of one node under `strategy` (a JSON object) (docs/memory.md,
// "Under model_parallel", "Under pipeline, tensor, 3D, ZeRO and FSDP").
std::string strategy_scenario(int gpus, const std::string& strategy,
                              const std::string& training_extra) {
  std::string j = scenario(training_extra);
  const auto swap = [&j](const std::string& from, const std::string& to) {
    const std::size_t at = j.find(from);
    REQUIRE(at != std::string::npos);
    j.replace(at, from.size(), to);
  };
  swap("\"gpus_per_node\":1", "\"gpus_per_node\":" + std::to_string(gpus));
  swap("{\"kind\":\"single\"}", strategy);
  return j;
}

// A small GPT (2 blocks, hidden 64, 4 heads, 16 positions) for the tensor-parallel strategies,
// which need model.gpt. Each block has 16 kernels (ln_1 1, qkv 1, scores 1, softmax 2, dropout 1,
// av 1, proj 1, residual 2, ln_2 1, fc 1, gelu 1, proj 1, residual 2), the embedding 4, ln_f and
// lm_head 1 each; the TP mapping functions: qkv, attn.proj, mlp.fc, mlp.proj per block, the
// embedding and lm_head.
std::string gpt_scenario(int gpus, const std::string& strategy, const std::string& training_extra) {
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":" + std::to_string(gpus) +
         ",\"gpu\":\"A100-SXM4-80GB\"},\"host\":{\"python\":false},"
         "\"model\":{\"gpt\":{\"layers\":2,\"hidden\":64,\"heads\":4,\"seq_len\":16,\"vocab\":256}}"
         ","
         "\"training\":{\"optimizer\":\"sgd\",\"precision\":\"fp32\"" +
         training_extra + "},\"strategy\":" + strategy + "}";
}

// The growth the summary reports per GPU, keyed by GPU; every free of the run matches a live
// allocation (docs/memory.md, "Driving it with a Program").
std::map<int, prof::MemoryGrowth> growth_by_gpu(const run::RunResult& r) {
  for (const GpuAllocatorTimeline& g : r.memory.allocator.gpus) CHECK(g.unmatched_frees == 0);
  std::map<int, prof::MemoryGrowth> out;
  for (const prof::MemoryGrowth& g : prof::summarize(r.trace).memory_growth) out[g.gpu] = g;
  return out;
}

// Index of the first op of `step` named `name` with kind `kind`, on `gpu` unless -1 (-1: none).
std::int64_t op_index(const Program& p, int step, OpKind kind, const std::string& name,
                      int gpu = -1) {
  for (const Op& o : p.ops) {
    if (o.step == step && o.kind == kind && p.name_of(o) == name && (gpu < 0 || o.gpu == gpu))
      return o.id;
  }
  return -1;
}

constexpr const char* kLoss = ",\"steps\":5,\"leaks\":{\"loss_as_tensor\":true}";
constexpr const char* kKeep = ",\"steps\":5,\"leaks\":{\"keep_outputs\":true}";

TEST_CASE("the leaks under model_parallel: one graph over both devices", "[memory][leak]") {
  // Layers balanced by FLOPs over 2 devices: l0, l1 on GPU 0, l2, l3 on GPU 1 (one split).
  const std::string mp = "{\"kind\":\"model_parallel\"}";
  SECTION("loss_as_tensor: the nodes and a ToCopyBackward per split, on the last device") {
    const run::RunResult r = run_json(strategy_scenario(2, mp, kLoss));
    CHECK(r.program.warnings.empty());
    const auto g = growth_by_gpu(r);
    REQUIRE(g.size() == 1);
    // nodes = sum of kernels (4 x 2) + 1 split + 3 (loss) + 1 (+=) = 13; 13 x 256 B + 4 B = 3332 B.
    CHECK(model_parallel_graph_nodes(
              parse_scenario_string(strategy_scenario(2, mp, ""), "x.json", {})) == 13);
    REQUIRE(g.count(1) == 1);
    CHECK(g.at(1).bytes_per_step == Approx(13 * 256 + 4));
    CHECK(g.at(1).category == "autograd_graph");
  }
  SECTION("keep_outputs: each device its layers' activations; the copy and the logits on GPU 1") {
    const auto g = growth_by_gpu(run_json(strategy_scenario(2, mp, kKeep)));
    REQUIRE(g.size() == 2);
    // GPU 0: 2 layers x 8 samples x 1 MiB = 16 MiB. GPU 1: the same + l1's output copied in
    // (8 x 1 KiB) + the logits (8 x 1 KiB).
    CHECK(g.at(0).bytes_per_step == Approx(16 * kMiB));
    CHECK(g.at(1).bytes_per_step == Approx(16 * kMiB + 16 * 1024));
    CHECK(g.at(1).category == "activations");
  }
  SECTION("empty_cache: one process, every device's cache") {
    const run::RunResult r =
        run_json(strategy_scenario(2, mp, ",\"steps\":2,\"empty_cache_every\":1"));
    REQUIRE(r.memory.allocator.gpus.size() == 2);
    for (const GpuAllocatorTimeline& a : r.memory.allocator.gpus) CHECK(a.empty_cache.size() == 2);
  }
  SECTION("del_temporaries false: output and input live past the optimizer") {
    const run::RunResult keep =
        run_json(strategy_scenario(2, mp, ",\"steps\":2,\"del_temporaries\":false"));
    const run::RunResult del = run_json(strategy_scenario(2, mp, ",\"steps\":2"));
    const auto opt = [](const Program& p) {
      return op_index(p, 1, OpKind::kCompute, "optimizer.step (sgd)");
    };
    CHECK(op_index(keep.program, 1, OpKind::kFree, "model output") > opt(keep.program));
    for (const GpuAllocatorTimeline& g : keep.memory.allocator.gpus) CHECK(g.unmatched_frees == 0);
    CHECK(op_index(del.program, 1, OpKind::kFree, "model output") < opt(del.program));
    CHECK(keep.program.warnings.empty());
  }
}

TEST_CASE("the leaks under pipeline parallelism stay on the stage that holds them",
          "[memory][leak]") {
  // pp 2: l0, l1 on stage 0 (GPU 0), l2, l3 on stage 1 (GPU 1); batch 8 in m = 2 micro-batches of
  // b = 4.
  const std::string pipe = "{\"kind\":\"pipeline\",\"pp\":2,\"micro_batch_size\":4}";
  SECTION("loss_as_tensor: the last stage keeps its own layers' graph for every micro-batch") {
    const run::RunResult r = run_json(strategy_scenario(2, pipe, kLoss));
    CHECK(r.program.warnings.empty());
    const auto g = growth_by_gpu(r);
    REQUIRE(g.size() == 1);
    REQUIRE(g.count(1) == 1);
    // The graph is cut at the stage boundary: per micro-batch l2's and l3's kernels (4) + 3 + 1
    // = 8 nodes; m = 2: 16 nodes x 256 B + 2 x 4 B = 4104 B per step, on stage 1 only.
    CHECK(hybrid_loss_graph_nodes(
              parse_scenario_string(strategy_scenario(2, pipe, ""), "x.json", {})) == 16);
    CHECK(g.at(1).bytes_per_step == Approx(16 * 256 + 2 * 4));
    CHECK(g.at(1).category == "autograd_graph");
  }
  SECTION("keep_outputs: every stage its own layers' activations, the last the logits") {
    const auto g = growth_by_gpu(run_json(strategy_scenario(2, pipe, kKeep)));
    REQUIRE(g.size() == 2);
    // Stage s: m x stored(s) x b = 2 x (2 layers x 1 MiB) x 4 = 16 MiB; stage 1 also the logits,
    // m x 1 KiB x b = 8 KiB.
    CHECK(g.at(0).bytes_per_step == Approx(16 * kMiB));
    CHECK(g.at(1).bytes_per_step == Approx(16 * kMiB + 8 * 1024));
    for (const auto& [gpu, gr] : g) CHECK(gr.category == "activations");
  }
  SECTION("interleaved: the loss graph covers the last chunk only; the eval pairs its sends") {
    // pp 2 x v 2: segments l0 | l1 | l2 | l3; stage 0 holds l0 and l2, stage 1 l1 and l3.
    const std::string il =
        "{\"kind\":\"pipeline\",\"pp\":2,\"micro_batch_size\":4,\"schedule\":\"interleaved\"}";
    const auto loss = growth_by_gpu(run_json(strategy_scenario(2, il, kLoss)));
    REQUIRE(loss.size() == 1);
    // Per micro-batch l3's 2 kernels + 3 + 1 = 6 nodes; m = 2: 12 x 256 B + 2 x 4 B = 3080 B.
    CHECK(loss.at(1).bytes_per_step == Approx(12 * 256 + 2 * 4));
    const auto keep = growth_by_gpu(run_json(strategy_scenario(2, il, kKeep)));
    REQUIRE(keep.size() == 2);
    // Stage s: m x (two 1-layer chunks x 1 MiB) x b = 16 MiB; stage 1 + 8 KiB of logits.
    CHECK(keep.at(0).bytes_per_step == Approx(16 * kMiB));
    CHECK(keep.at(1).bytes_per_step == Approx(16 * kMiB + 8 * 1024));
  }
  SECTION("empty_cache: one call per rank, on its own device") {
    const run::RunResult r =
        run_json(strategy_scenario(2, pipe, ",\"steps\":2,\"empty_cache_every\":1"));
    REQUIRE(r.memory.allocator.gpus.size() == 2);
    for (const GpuAllocatorTimeline& a : r.memory.allocator.gpus) CHECK(a.empty_cache.size() == 2);
  }
  SECTION("del_temporaries false: the last stage keeps its logits until the step's end") {
    const run::RunResult keep =
        run_json(strategy_scenario(2, pipe, ",\"steps\":2,\"del_temporaries\":false"));
    const run::RunResult del = run_json(strategy_scenario(2, pipe, ",\"steps\":2"));
    for (const GpuAllocatorTimeline& g : keep.memory.allocator.gpus) CHECK(g.unmatched_frees == 0);
    const auto end = [](const Program& p) {
      return op_index(p, 1, OpKind::kMarker, "step end", 1);
    };
    // Both micro-batches' logits (m x 1 KiB x b = 2 x 4 KiB) are freed after the step end.
    int after = 0;
    for (const Op& o : keep.program.ops) {
      if (o.step == 1 && o.kind == OpKind::kFree &&
          keep.program.name_of(o).find("logits") != std::string::npos) {
        CHECK(o.bytes == 4 * 1024);
        after += o.id > end(keep.program) ? 1 : 0;
      }
    }
    CHECK(after == 2);
    for (const Op& o : del.program.ops) {
      if (o.step == 1 && o.kind == OpKind::kFree &&
          del.program.name_of(o).find("logits") != std::string::npos)
        CHECK(o.id < end(del.program));
    }
  }
}

TEST_CASE("the leaks under tensor and 3D parallelism: each rank keeps its shard's graph",
          "[memory][leak]") {
  SECTION("tensor_parallel: the same nodes per rank plus Megatron's mapping functions") {
    // tp 2, batch 2 in one micro-batch. nodes = kernels (embed 4 + 2 blocks x 16 + ln_f 1 +
    // lm_head 1 = 38) + mapping nodes (embedding, 2 x 4 per block, lm_head = 10) + 3 + 1 = 52;
    // 52 x 256 B + 4 B = 13316 B per step on each TP rank.
    const std::string tp = "{\"kind\":\"tensor_parallel\",\"tp\":2}";
    const std::string json =
        gpt_scenario(2, tp, ",\"global_batch\":2,\"steps\":5,\"leaks\":{\"loss_as_tensor\":true}");
    CHECK(hybrid_loss_graph_nodes(parse_scenario_string(json, "x.json", {})) == 52);
    const run::RunResult r = run_json(json);
    CHECK(r.program.warnings.empty());
    const auto g = growth_by_gpu(r);
    REQUIRE_FALSE(g.empty());
    for (const auto& [gpu, gr] : g) {
      INFO("GPU " << gpu);
      CHECK(gr.bytes_per_step == Approx(52 * 256 + 4));
      CHECK(gr.category == "autograd_graph");
    }
  }
  SECTION("tensor_parallel keep_outputs: each rank its share of the activations and the logits") {
    const std::string tp = "{\"kind\":\"tensor_parallel\",\"tp\":2}";
    const std::string json =
        gpt_scenario(2, tp, ",\"global_batch\":2,\"steps\":5,\"leaks\":{\"keep_outputs\":true}");
    const Scenario sc = parse_scenario_string(json, "x.json", {});
    // m = 1 micro-batch of b = 2: stored(model, t = 2) x 2 + the vocabulary-split logits,
    // 16 x vocab x 4 B / 2 per sample.
    const Segment all{0, static_cast<int>(sc.model.layers.size())};
    const double stored =
        stored_activation_bytes_per_sample(sc.model, all, 2, false, RecomputeMode::kNone);
    const double logits = sc.model.layers.back().output_bytes_per_sample / 2;
    CHECK(logits == Approx(16.0 * sc.model.transformer.vocab * 4 / 2));
    const auto g = growth_by_gpu(run_json(json));
    REQUIRE_FALSE(g.empty());
    for (const auto& [gpu, gr] : g) {
      INFO("GPU " << gpu);
      CHECK(gr.bytes_per_step == Approx(std::llround(stored * 2) + std::llround(logits * 2)));
    }
  }
  SECTION("3d: the loss graph on the last stage's ranks only") {
    // dp 2 x tp 2 x pp 2; batch 4 = dp 2 x m 2 micro-batches of 1. Segment 1 = block 1, ln_f,
    // lm_head: per micro-batch 16 + 1 + 1 kernels + 5 mapping nodes (4 in the block, lm_head)
    // + 3 + 1 = 27 nodes; m = 2: 54 x 256 B + 2 x 4 B = 13832 B per step.
    const std::string d3 = "{\"kind\":\"3d\",\"dp\":2,\"tp\":2,\"pp\":2,\"micro_batch_size\":1}";
    const std::string json =
        gpt_scenario(8, d3, ",\"global_batch\":4,\"steps\":5,\"leaks\":{\"loss_as_tensor\":true}");
    CHECK(hybrid_loss_graph_nodes(parse_scenario_string(json, "x.json", {})) == 54);
    const run::RunResult r = run_json(json);
    const auto g = growth_by_gpu(r);
    REQUIRE_FALSE(g.empty());
    const Scenario sc = parse_scenario_string(json, "x.json", {});
    const RankGrid grid(sc.strategy.parallel);
    for (const auto& [gpu, gr] : g) {
      INFO("GPU " << gpu);
      CHECK(grid.coord(gpu)[ParallelDim::kPp] == 1);  // device_ids are 0..7: rank = GPU
      CHECK(gr.bytes_per_step == Approx(54 * 256 + 2 * 4));
    }
  }
}

TEST_CASE("the leaks under ZeRO and FSDP keep no gathered parameters", "[memory][leak]") {
  // dp 2: each rank takes 4 samples in one micro-batch. DeepSpeed keeps layers of at most
  // stage3_param_persistence_threshold (1e5) parameters gathered for good; 0 makes these small
  // layers fetched like large ones (docs/program.md, "ZeRO-3 parameter fetch").
  for (const std::string& strategy :
       {std::string("{\"kind\":\"zero\",\"dp\":2,\"zero_stage\":3,"
                    "\"stage3_param_persistence_threshold\":0}"),
        std::string("{\"kind\":\"fsdp\",\"dp\":2}"),
        std::string("{\"kind\":\"fsdp\",\"dp\":2,\"fsdp_sharding\":\"shard_grad_op\"}")}) {
    INFO(strategy);
    // loss_as_tensor: the single-GPU graph on every rank, 12 x 256 B + 4 B = 3076 B per step;
    // backward freed the gathered parameters it saved (FSDP frees their storage itself).
    const run::RunResult loss = run_json(strategy_scenario(2, strategy, kLoss));
    CHECK(loss.program.warnings.empty());
    const auto gl = growth_by_gpu(loss);
    REQUIRE_FALSE(gl.empty());
    for (const auto& [gpu, gr] : gl) CHECK(gr.bytes_per_step == Approx(12 * 256 + 4));
    // keep_outputs: the eval forward gathers each unit and frees it again, so what stays is
    // 4 layers x 4 samples x 1 MiB = 16 MiB of activations + 4 x 1 KiB of logits per rank.
    const run::RunResult keep = run_json(strategy_scenario(2, strategy, kKeep));
    const auto gk = growth_by_gpu(keep);
    REQUIRE_FALSE(gk.empty());
    for (const auto& [gpu, gr] : gk) {
      CHECK(gr.bytes_per_step == Approx(16 * kMiB + 4 * 1024));
      CHECK(gr.category == "activations");
    }
    // The eval forward's gathers: one per unit (4 layers with parameters) and emitted rank.
    const auto gathers = [](const Program& p) {
      int n = 0;
      std::set<int> gpus;
      for (const Op& o : p.ops) {
        if (o.step != 1) continue;
        gpus.insert(o.gpu);
        n += o.kind == OpKind::kCollective && p.name_of(o) == "zero all_gather params" ? 1 : 0;
      }
      return std::pair<int, int>{n, static_cast<int>(gpus.size())};
    };
    const run::RunResult plain = run_json(strategy_scenario(2, strategy, ",\"steps\":5"));
    const auto [with_eval, ranks] = gathers(keep.program);
    CHECK(with_eval - gathers(plain.program).first == 4 * ranks);
  }
}

TEST_CASE("del_temporaries under DataParallel keeps the gathered output and the input",
          "[memory][leak]") {
  const run::RunResult keep = run_json(dp_scenario(",\"steps\":2,\"del_temporaries\":false"));
  const run::RunResult del = run_json(dp_scenario(",\"steps\":2"));
  CHECK(keep.program.warnings.empty());
  const auto opt = [](const Program& p) {
    return op_index(p, 1, OpKind::kCompute, "optimizer.step (sgd)");
  };
  // The gathered 8 x 1 KiB logits on output_device (category gathered_outputs) live past the
  // optimizer; autograd still frees their gradient during the step.
  CHECK(op_index(keep.program, 1, OpKind::kFree, "gathered outputs") > opt(keep.program));
  CHECK(op_index(keep.program, 1, OpKind::kFree, "grad of gathered outputs") < opt(keep.program));
  CHECK(op_index(del.program, 1, OpKind::kFree, "gathered outputs") < opt(del.program));
  for (const GpuAllocatorTimeline& g : keep.memory.allocator.gpus) CHECK(g.unmatched_frees == 0);
}

TEST_CASE("empty_cache lowers reserved memory, not allocated memory", "[memory][allocator]") {
  const run::RunResult r = run_json(scenario(",\"steps\":2,\"empty_cache_every\":1"));
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
  const run::RunResult keep = run_json(scenario(",\"steps\":2"));
  CHECK(keep.memory.allocator.gpus.at(0).samples.back().reserved_bytes == 42 * kMiB);
  CHECK(keep.memory.allocator.gpus.at(0).empty_cache.empty());
}

TEST_CASE("the OOM step predicted from 4 steps is the step a long run runs out in",
          "[memory][leak]") {
  // keep_outputs with 64 MiB per sample and layer: 4 x 8 x 64 MiB = 2 GiB (+ 8 KiB) kept per step.
  const std::string json = scenario(",\"leaks\":{\"keep_outputs\":true}", 64.0);
  const run::RunResult short_run = run_json(json, {"training.steps=4"});
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
  const run::RunResult long_run = run_json(json, {"training.steps=" + std::to_string(g.oom_step)});
  REQUIRE(long_run.memory.oom);
  CHECK(long_run.program.ops[long_run.memory.oom->op].step == g.oom_step);
  // ...and one step fewer fits.
  const run::RunResult fits = run_json(json, {"training.steps=" + std::to_string(g.oom_step - 1)});
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
    const run::RunResult r = run::simulate(
        parse_scenario_file(std::string(CSIM_SOURCE_DIR) + "/scenarios/" + file, sets));
    for (const GpuAllocatorTimeline& g : r.memory.allocator.gpus) {
      INFO(file << " GPU " << g.gpu);
      CHECK(g.unmatched_frees == 0);
    }
  }
}

TEST_CASE("growth is read from any trace's counters, none means no memory data", "[memory][leak]") {
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
