// The per-dimension validators of the parallel strategy (core/scenario/parse_parallel.hpp), each
// called alone on a strategy object, and the driver that runs them in order. The messages
// themselves are pinned by tests/bad_inputs/ (test_bad_inputs.cpp); these tests check what each
// validator fills and which problem it owns.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/scenario/parse_parallel.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;
using namespace csim::core::parse;

namespace {

// A GPT of `layers` blocks (16 heads) on 8 GPUs, global batch 16, for its training and model
// sections.
Scenario gpt_base(int layers = 8, const std::string& training_extra = "") {
  return parse_scenario_string(
      "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":8,\"gpu\":\"A100-SXM4-80GB\"},"
      "\"model\":{\"gpt\":{\"layers\":" +
          std::to_string(layers) +
          ",\"hidden\":1024,\"heads\":16,\"seq_len\":512,\"vocab\":32000}},"
          "\"training\":{\"global_batch\":16,\"precision\":\"bf16\",\"optimizer\":\"adam\","
          "\"steps\":1" +
          training_extra + "},\"strategy\":{\"kind\":\"single\"}}",
      "base.json");
}

// Runs `validators` in order on strategy object `strategy` (kind included) of `base`.
ParallelSpec run(const Scenario& base, const std::string& strategy,
                 const std::vector<ParallelValidator>& validators, bool ga_given = false) {
  Ctx ctx;
  ctx.file = "test.json";
  const json j = json::parse(strategy);
  std::vector<std::string> keys = kParallelKeys;
  keys.push_back("kind");
  const Obj o(ctx, j, "strategy", keys);
  const std::vector<std::string> kinds = {"single",   "data_parallel",   "ddp", "model_parallel",
                                          "pipeline", "tensor_parallel", "3d",  "zero",
                                          "fsdp"};
  const auto kind = static_cast<StrategyKind>(o.choice("kind", kinds, 0));
  const ParallelInput in{ctx, o, kind, 8, base.training, base.model, ga_given, base.cluster};
  ParallelSpec ps;
  for (ParallelValidator v : validators) v(in, ps);
  return ps;
}

}  // namespace

TEST_CASE("rank grid validator: the kind's free dimension fills the GPUs", "[parse][parallel]") {
  const Scenario b = gpt_base();
  // 3d: dp is free: 8 / (tp 2 x pp 2) = 2.
  ParallelSpec ps = run(b, R"({"kind":"3d","tp":2,"pp":2})", {validate_rank_grid});
  CHECK((ps.dp == 2 && ps.tp == 2 && ps.pp == 2));
  // pipeline: pp is free: 8 / dp 2 = 4; tensor_parallel: tp is: 8 / dp 2 = 4; zero: dp = 8.
  ps = run(b, R"({"kind":"pipeline","dp":2})", {validate_rank_grid});
  CHECK((ps.dp == 2 && ps.tp == 1 && ps.pp == 4));
  ps = run(b, R"({"kind":"tensor_parallel","dp":2})", {validate_rank_grid});
  CHECK((ps.dp == 2 && ps.tp == 4 && ps.pp == 1));
  ps = run(b, R"({"kind":"zero"})", {validate_rank_grid});
  CHECK((ps.dp == 8 && ps.tp == 1 && ps.pp == 1));
  // Megatron's default order unless rank_order says otherwise (fastest-varying first).
  CHECK(ps.rank_order == std::vector<ParallelDim>{ParallelDim::kTp, ParallelDim::kCp,
                                                  ParallelDim::kEp, ParallelDim::kDp,
                                                  ParallelDim::kPp});
  // Context parallelism takes its share of the GPUs before dp fills them: 8 / (tp 2 x cp 2) = 2.
  ps = run(b, R"({"kind":"3d","tp":2,"cp":2})", {validate_rank_grid});
  CHECK((ps.dp == 2 && ps.tp == 2 && ps.cp == 2 && ps.pp == 1));
  // An order may leave out the dimensions of size 1; it lists exactly what it names.
  ps = run(b, R"({"kind":"3d","tp":2,"pp":2,"rank_order":"pp-tp-dp"})", {validate_rank_grid});
  CHECK(ps.rank_order ==
        std::vector<ParallelDim>{ParallelDim::kPp, ParallelDim::kTp, ParallelDim::kDp});
  // A dimension the kind lacks, or a product that is not the GPU count.
  CHECK_THROWS_WITH(run(b, R"({"kind":"zero","tp":2})", {validate_rank_grid}),
                    Catch::Contains("strategy.kind zero has no tp dimension"));
  CHECK_THROWS_WITH(run(b, R"({"kind":"3d","dp":2,"tp":2,"pp":3})", {validate_rank_grid}),
                    Catch::Contains("dp * tp * pp = 2 * 2 * 3 = 12"));
}

TEST_CASE("tensor validator: tp divides the heads, sequence parallelism needs tp > 1",
          "[parse][parallel]") {
  const Scenario b = gpt_base();
  const std::vector<ParallelValidator> v = {validate_rank_grid, validate_tensor_parallel};
  // tensor_parallel fills tp = 8: 16 heads, 2 per rank.
  CHECK(run(b, R"({"kind":"tensor_parallel","sequence_parallel":true})", v).sequence_parallel);
  // tp 8 divides 16 too; a 12-head model does not split over 8.
  const Scenario twelve = parse_scenario_string(
      "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":8,\"gpu\":\"A100-SXM4-80GB\"},"
      "\"model\":{\"gpt\":{\"layers\":8,\"hidden\":768,\"heads\":12,\"seq_len\":512,"
      "\"vocab\":32000}},\"training\":{\"global_batch\":16},\"strategy\":{\"kind\":\"single\"}}",
      "base.json");
  CHECK_THROWS_WITH(run(twelve, R"({"kind":"tensor_parallel"})", v),
                    Catch::Contains("tp 8 does not divide model.gpt.heads 12"));
  CHECK_THROWS_WITH(run(b, R"({"kind":"zero","sequence_parallel":true})", v),
                    Catch::Contains("it needs strategy.tp > 1"));
}

TEST_CASE("pipeline validators: chunks split the blocks evenly, micro-batches fill the batch",
          "[parse][parallel]") {
  const Scenario b = gpt_base(8);
  const std::vector<ParallelValidator> v = {validate_rank_grid, validate_pipeline_schedule,
                                            validate_stage_split, validate_micro_batches};
  // Pipeline over 8 stages, no micro_batch_size: micro-batches of 1, m = 16 / (dp 1 x 1) = 16.
  ParallelSpec ps = run(b, R"({"kind":"pipeline"})", v);
  CHECK(ps.schedule == PipelineSchedule::k1f1b);
  CHECK((ps.micro_batch_size == 1 && ps.micro_batches == 16));
  // Interleaved defaults to v = 2 chunks: pp 4 x 2 = 8 segments of one block each;
  // micro_batch_size 2 -> m = 16 / (dp 2 x 2) = 4, a multiple of pp 4.
  ps = run(b, R"({"kind":"pipeline","dp":2,"schedule":"interleaved","micro_batch_size":2})", v);
  CHECK((ps.pp == 4 && ps.virtual_stages == 2 && ps.micro_batches == 4));
  // 8 blocks do not split over pp 8 x v 2 = 16 chunks (validate_stage_split, without its keys).
  CHECK_THROWS_WITH(run(b, R"({"kind":"pipeline","schedule":"interleaved"})", v),
                    Catch::Contains("not divisible by pp * virtual_stages = 16"));
  // Without a pipeline: micro_batch_size = 16 / (dp 8 x gradient_accumulation 2) = 1, m = 2.
  ps = run(gpt_base(8, ",\"gradient_accumulation\":2"), R"({"kind":"zero"})", v, true);
  CHECK((ps.micro_batch_size == 1 && ps.micro_batches == 2));
  // Interleaved needs m a multiple of pp: 16 / (dp 2 x 4) = 2 micro-batches over pp 4.
  CHECK_THROWS_WITH(
      run(b, R"({"kind":"pipeline","dp":2,"schedule":"interleaved","micro_batch_size":4})", v),
      Catch::Contains("2 micro-batches: the interleaved schedule needs a multiple of strategy.pp"));
}

TEST_CASE("sharding and recompute validators", "[parse][parallel]") {
  const Scenario b = gpt_base();
  const std::vector<ParallelValidator> v = {validate_rank_grid, validate_sharding,
                                            validate_recompute};
  // kind zero defaults to stage 1; FSDP full_shard is stage 3, shard_grad_op stage 2.
  CHECK(run(b, R"({"kind":"zero"})", v).zero_stage == 1);
  CHECK(run(b, R"({"kind":"fsdp"})", v).zero_stage == 3);
  CHECK(run(b, R"({"kind":"fsdp","fsdp_sharding":"shard_grad_op"})", v).zero_stage == 2);
  CHECK(run(b, R"({"kind":"3d","tp":2,"pp":2})", v).zero_stage == 0);
  // Stage 2 shards gradients per micro-batch, which a pipeline does not allow.
  CHECK_THROWS_WITH(run(b, R"({"kind":"3d","pp":2,"zero_stage":2})", v),
                    Catch::Contains("ZeRO stage 2 shards gradients per micro-batch"));
  const ParallelSpec ps = run(b, R"({"kind":"zero","recompute":"selective","prefetch":false})", v);
  CHECK(ps.recompute == RecomputeMode::kSelective);
  CHECK_FALSE(ps.prefetch);
  CHECK(ps.overlap_grad_reduce);
}

TEST_CASE("model split validator: split_at names the first layer of each later device",
          "[parse][parallel]") {
  const Scenario b = gpt_base(2);
  const std::vector<ParallelValidator> v = {validate_rank_grid, validate_model_split};
  // model_parallel over the 8 GPUs: pp = 8 devices, so 7 split points. GPT layers: 0 the
  // embedding, block 0 = 1..13 (ln_1, attn.qkv, attn.scores, attn.softmax, attn.dropout,
  // attn.av, ...), block 1 = 14..26: the devices start at layers 0, 1, 2, 3, 4, 5, 6 and 14.
  const ParallelSpec ps =
      run(b,
          R"({"kind":"model_parallel","split_at":["h.0.ln_1","h.0.attn.qkv","h.0.attn.scores",)"
          R"("h.0.attn.softmax","h.0.attn.dropout","h.0.attn.av","h.1.ln_1"]})",
          v);
  CHECK(ps.stage_first_layer == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 14});
  CHECK_THROWS_WITH(run(b, R"({"kind":"3d","split_at":[]})", v),
                    Catch::Contains("split_at applies to strategy.kind model_parallel"));
}

TEST_CASE("the driver runs every validator in order", "[parse][parallel]") {
  // The FSDP version comes first (FSDP2 gives kind fsdp the tp and pp dimensions), then the
  // grid, so a scenario wrong in both its grid and its sharding reports the grid.
  REQUIRE(kParallelValidators.front() == &validate_fsdp_version);
  REQUIRE(kParallelValidators[1] == &validate_rank_grid);
  REQUIRE(kParallelValidators.size() == 17);  // fsdp version, grid, tensor, schedule, stage
                                              // split, micro-batches, sharding, fsdp2, megatron
                                              // sharding, zero3, recompute, model split,
                                              // context parallelism, experts, expert tensor
                                              // parallelism, optimizer offload, activation
                                              // offload
  // The optimizer offload after every validator that fills the kind's sharding
  // (distributed_optimizer, megatron_fsdp, zero_stage); the activation offload last: it reads
  // pp, recompute and moe_a2a_overlap.
  REQUIRE(kParallelValidators[15] == &validate_optimizer_offload);
  REQUIRE(kParallelValidators.back() == &validate_activation_offload);
  const Scenario b = gpt_base();
  CHECK_THROWS_WITH(run(b, R"({"kind":"zero","tp":2,"zero_stage":2,"pp":2})", kParallelValidators),
                    Catch::Contains("has no tp dimension"));
  // The driver's result is the validators' in sequence.
  Ctx ctx;
  ctx.file = "test.json";
  const json j = json::parse(R"({"tp":2,"pp":2,"schedule":"gpipe","recompute":"full"})");
  const Obj o(ctx, j, "strategy", kParallelKeys);
  const ParallelSpec ps =
      parse_parallel(ctx, o, StrategyKind::k3d, 8, b.training, b.model, false, b.cluster);
  const ParallelSpec manual =
      run(b, R"({"kind":"3d","tp":2,"pp":2,"schedule":"gpipe","recompute":"full"})",
          kParallelValidators);
  CHECK((ps.dp == manual.dp && ps.tp == manual.tp && ps.pp == manual.pp));
  // dp = 8 / (2 x 2) = 2; a pipeline defaults to micro-batches of 1: m = 16 / (dp 2 x 1) = 8.
  CHECK((ps.micro_batches == manual.micro_batches && ps.micro_batches == 8));
  CHECK(ps.schedule == PipelineSchedule::kGpipe);
  CHECK(ps.recompute == RecomputeMode::kFull);
}
