// Uneven pipeline stages (core/model/pipeline_stages.hpp; docs/scenario.md, "strategy: uneven
// pipeline stages"): the stage-assignment arithmetic, the parser's keys and refusals, and the
// lowering's per-stage work and memory following the split. Every expected value is derived beside
// it.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/pipeline_stages.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

namespace {

StageSplitRequest request(int blocks, int pp, int v = 1) {
  StageSplitRequest r;
  r.blocks = blocks;
  r.stages = pp;
  r.chunks = v;
  return r;
}

// A small GPT (h 64, 4 heads, s 32) of `layers` blocks on `pp` A100s, pipeline 1F1B, bf16,
// 2 micro-batches of 1 sample, one step; `extra` adds strategy keys.
std::string gpt_pipeline(int layers, int pp, const std::string& extra, int batch = 2) {
  return "{\"cluster\":{\"gpus_per_node\":" + std::to_string(std::min(pp, 16)) +
         ",\"nodes\":" + std::to_string((pp + 15) / 16) +
         ",\"gpu\":\"A100-SXM4-80GB\"},\"host\":{\"python\":false},"
         "\"model\":{\"gpt\":{\"layers\":" +
         std::to_string(layers) +
         ",\"hidden\":64,\"heads\":4,\"seq_len\":32,\"vocab\":512}},"
         "\"training\":{\"global_batch\":" +
         std::to_string(batch) +
         ",\"precision\":\"bf16\",\"steps\":1},"
         "\"strategy\":{\"kind\":\"pipeline\",\"pp\":" +
         std::to_string(pp) + ",\"micro_batch_size\":1" + extra + "}}";
}

std::string error_of(const std::string& json) {
  try {
    parse_scenario_string(json, "stages.json", {});
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// Forward compute ops per GPU in one micro-batch's pass (op counts of the lowered Program; the
// loss is phase "loss", not counted), and their FLOPs.
struct StageWork {
  std::map<int, int> ops;
  std::map<int, double> flops;
};
StageWork forward_work(const Program& p, int micro_batches) {
  StageWork w;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kCompute || op.phase != Phase::kForward) continue;
    w.ops[op.gpu] += 1;
    w.flops[op.gpu] += op.flops;
  }
  for (auto& [g, n] : w.ops) n /= micro_batches;
  for (auto& [g, f] : w.flops) f /= micro_batches;
  return w;
}

}  // namespace

TEST_CASE("stage split: explicit, Megatron first/last, embedding/loss accounting, even",
          "[pipeline_stages]") {
  // Explicit: taken as given.
  StageSplitRequest r = request(10, 4);
  r.stage_layers = {3, 3, 2, 2};
  StageSplit s = split_pipeline_stages(r);
  REQUIRE(s.error.empty());
  CHECK(s.blocks_per_segment == std::vector<int>{3, 3, 2, 2});
  CHECK(s.uneven);

  // Llama 3 405B: 126 blocks over 16 stages. Megatron's accounting: 126 + 1 (embedding) + 1
  // (loss) = 128 = 16 x 8, so the first and last stages hold 8 - 1 = 7 blocks, the 14 others 8:
  // 7 + 14 x 8 + 7 = 126.
  r = request(126, 16);
  r.account_for_embedding = r.account_for_loss = true;
  s = split_pipeline_stages(r);
  REQUIRE(s.error.empty());
  CHECK(s.blocks_per_segment.front() == 7);
  CHECK(s.blocks_per_segment.back() == 7);
  for (int g = 1; g < 15; ++g) CHECK(s.blocks_per_segment[static_cast<std::size_t>(g)] == 8);

  // The same with Megatron's first/last counts: (126 - 7 - 7) / 14 = 8 per middle stage.
  r = request(126, 16);
  r.first_stage_layers = r.last_stage_layers = 7;
  CHECK(split_pipeline_stages(r).blocks_per_segment == s.blocks_per_segment);

  // BLOOM 176B: 70 blocks over 12 stages; 70 + 2 = 72 = 12 x 6: first and last 5, others 6.
  r = request(70, 12);
  r.account_for_embedding = r.account_for_loss = true;
  s = split_pipeline_stages(r);
  REQUIRE(s.error.empty());
  CHECK(s.blocks_per_segment.front() == 5);
  CHECK(s.blocks_per_segment[1] == 6);
  CHECK(s.blocks_per_segment.back() == 5);

  // Only the last stage named: 10 blocks, pp 4, last 1: (10 - 1) / 3 = 3 for stages 0..2.
  r = request(10, 4);
  r.last_stage_layers = 1;
  CHECK(split_pipeline_stages(r).blocks_per_segment == std::vector<int>{3, 3, 3, 1});

  // Interleaved (v 2) with first/last: 12 blocks, pp 2: first 4 -> 2 per chunk, last 8 -> 4 per
  // chunk; segment g = chunk * pp + stage: {2, 4, 2, 4}.
  r = request(12, 2, 2);
  r.first_stage_layers = 4;
  r.last_stage_layers = 8;
  CHECK(split_pipeline_stages(r).blocks_per_segment == std::vector<int>{2, 4, 2, 4});

  // No keys: the even split, 8 / 4 = 2 each, not uneven; 10 / 4 refused, blaming pp.
  s = split_pipeline_stages(request(8, 4));
  CHECK(s.blocks_per_segment == std::vector<int>{2, 2, 2, 2});
  CHECK_FALSE(s.uneven);
  s = split_pipeline_stages(request(10, 4));
  CHECK(s.blame_key == "pp");
  CHECK(s.hint.find("stage_layers") != std::string::npos);
}

TEST_CASE("stage split refusals name the key", "[pipeline_stages]") {
  StageSplitRequest r = request(10, 4);
  r.stage_layers = {3, 3, 2, 1};  // sums to 9
  CHECK(split_pipeline_stages(r).error.find("hold 9 blocks") != std::string::npos);
  r.stage_layers = {5, 5};  // 2 entries for 4 stages
  CHECK(split_pipeline_stages(r).error.find("2 entries for 4") != std::string::npos);
  r.stage_layers = {4, 4, 2, 0};
  CHECK(split_pipeline_stages(r).error.find("0 blocks") != std::string::npos);
  r.stage_layers = {3, 3, 2, 2};
  r.account_for_loss = true;  // two ways at once
  CHECK(split_pipeline_stages(r).error.find("more than one way") != std::string::npos);
  // 10 + 1 = 11 not divisible by 4.
  r = request(10, 4);
  r.account_for_loss = true;
  CHECK(split_pipeline_stages(r).blame_key == "account_for_loss");
  // first 3 with v 2: not a multiple of the chunks.
  r = request(12, 2, 2);
  r.first_stage_layers = 3;
  CHECK(split_pipeline_stages(r).blame_key == "first_stage_layers");
  // first 4 leaves 6 for 3 middle+last stages... with last 1: 5 over 2 middle stages.
  r = request(10, 4);
  r.first_stage_layers = 4;
  r.last_stage_layers = 1;
  CHECK(split_pipeline_stages(r).error.find("do not split evenly") != std::string::npos);
}

TEST_CASE("parser: uneven stage keys fill segment_blocks, and 10 over 4 without them is refused",
          "[pipeline_stages][parser]") {
  const Scenario s =
      parse_scenario_string(gpt_pipeline(10, 4, ",\"stage_layers\":[3,3,2,2]"), "stages.json", {});
  CHECK(s.strategy.parallel.segment_blocks == std::vector<int>{3, 3, 2, 2});
  // An even explicit list is today's split: nothing recorded.
  CHECK(parse_scenario_string(gpt_pipeline(8, 4, ",\"stage_layers\":[2,2,2,2]"), "stages.json", {})
            .strategy.parallel.segment_blocks.empty());
  const std::string e = error_of(gpt_pipeline(10, 4, ""));
  CHECK(e.find("is not divisible by pp * virtual_stages = 4") != std::string::npos);
  CHECK(e.find("first_stage_layers") != std::string::npos);  // the hint names the new keys
  CHECK(error_of(gpt_pipeline(10, 4, ",\"stage_layers\":[3,3,2]")).find("strategy.stage_layers") !=
        std::string::npos);
  CHECK(error_of(gpt_pipeline(10, 4, ",\"account_for_loss\":true"))
            .find("strategy.account_for_loss") != std::string::npos);
}

TEST_CASE("10 blocks over 4 stages [3,3,2,2]: longer stages in the Program and the simulation",
          "[pipeline_stages][lowering]") {
  const Scenario s =
      parse_scenario_string(gpt_pipeline(10, 4, ",\"stage_layers\":[3,3,2,2]"), "stages.json", {});
  const Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  const StageWork w = forward_work(p, 2);
  // Forward ops per micro-batch: a GPT block is 13 layers; stage 0 adds the embedding, stage 3
  // ln_f and lm_head: 1 + 3 x 13 = 40, 3 x 13 = 39, 2 x 13 = 26, 2 x 13 + 2 = 28.
  CHECK(w.ops.at(0) == 40);
  CHECK(w.ops.at(1) == 39);
  CHECK(w.ops.at(2) == 26);
  CHECK(w.ops.at(3) == 28);
  // FLOPs of the pure-block stages 1 and 2: 3 blocks vs 2 blocks, exactly 3/2.
  CHECK(w.flops.at(1) / w.flops.at(2) == Approx(1.5).epsilon(1e-12));

  // Simulated: stage 1's forward+backward kernels take ~3/2 of stage 2's (identical blocks, the
  // same kernels; only compute-communication interference could differ, hence the tolerance).
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, RunControl{});
  REQUIRE(r.complete);
  std::map<int, TimeNs> busy;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kCompute ||
        (op.phase != Phase::kForward && op.phase != Phase::kBackward))
      continue;
    const OpTiming& t = r.timings[static_cast<std::size_t>(op.id)];
    busy[op.gpu] += t.end_ns - t.start_ns;
  }
  CHECK(static_cast<double>(busy[1]) / static_cast<double>(busy[2]) == Approx(1.5).epsilon(0.02));

  // Memory follows the split: stage 1 holds 3 blocks' parameters, stage 2 two (12h^2 + 13h
  // each, no embedding or head on either): ratio 3/2; the stored activations per sample of the
  // segments likewise (stored_activation_bytes_per_sample over each segment).
  const auto segs = partition_layers(s.model, 4, s.strategy.parallel.segment_blocks);
  CHECK(stored_activation_bytes_per_sample(s.model, segs[1], 1, false, RecomputeMode::kNone) /
            stored_activation_bytes_per_sample(s.model, segs[2], 1, false, RecomputeMode::kNone) ==
        Approx(1.5).epsilon(1e-12));
  // The fullest stage for memory bounds (sweep/tune.cpp): stage 0, the embedding (V h + s h =
  // 512 x 64 + 32 x 64 = 34,816) + 3 blocks of 12h^2 + 13h = 49,984: 184,768 parameters.
  CHECK(max_stage_params(s.model, s.strategy.parallel) == 184768);
  const MemoryReport rep = memory_timeline(p, r.timings, s.cluster);
  std::map<int, Bytes> params;
  for (const GpuMemory& g : rep.gpus)
    for (const MemorySample& smp : g.samples)
      params[g.gpu] =
          std::max(params[g.gpu], smp.by_category[static_cast<std::size_t>(MemCategory::kParams)]);
  CHECK(static_cast<double>(params[1]) / static_cast<double>(params[2]) ==
        Approx(1.5).epsilon(1e-9));
}

TEST_CASE("126 blocks over 16 stages (Llama 3 405B's depth, reduced width) lowers and runs",
          "[pipeline_stages][lowering]") {
  const Scenario s = parse_scenario_string(
      gpt_pipeline(126, 16, ",\"account_for_embedding\":true,\"account_for_loss\":true", 16),
      "stages.json", {});
  // 126 + 2 = 128 = 16 x 8: first and last stages 7 blocks, the others 8.
  REQUIRE(s.strategy.parallel.segment_blocks.size() == 16);
  const Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  const StageWork w = forward_work(p, 16);
  // Stage 0: embedding + 7 x 13 = 92; middle: 8 x 13 = 104; last: 7 x 13 + ln_f + head = 93.
  CHECK(w.ops.at(0) == 92);
  for (int g = 1; g < 15; ++g) CHECK(w.ops.at(g) == 104);
  CHECK(w.ops.at(15) == 93);
  sim::SimExecutor ex(s);
  CHECK(ex.run(p, RunControl{}).complete);
}

TEST_CASE("interleaved uneven stages: stage_layers per virtual stage",
          "[pipeline_stages][lowering]") {
  // 10 blocks, pp 2, v 2, segments g = chunk * pp + stage: [3, 2, 3, 2]: stage 0 holds 3 + 3
  // blocks (+ the embedding), stage 1 holds 2 + 2 (+ ln_f and lm_head). 4 micro-batches (a
  // multiple of pp).
  const Scenario s = parse_scenario_string(
      gpt_pipeline(10, 2, ",\"schedule\":\"interleaved\",\"stage_layers\":[3,2,3,2]", 4),
      "stages.json", {});
  const Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  const StageWork w = forward_work(p, 4);
  // Per micro-batch: stage 0 1 + 6 x 13 = 79, stage 1 4 x 13 + 2 = 54.
  CHECK(w.ops.at(0) == 79);
  CHECK(w.ops.at(1) == 54);
  sim::SimExecutor ex(s);
  CHECK(ex.run(p, RunControl{}).complete);
  // Per virtual stage means pp * v entries: 2 entries are refused with the order in the hint.
  CHECK(error_of(gpt_pipeline(10, 2, ",\"schedule\":\"interleaved\",\"stage_layers\":[5,5]", 4))
            .find("virtual stages") != std::string::npos);
}
