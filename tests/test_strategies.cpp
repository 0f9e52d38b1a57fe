// Model, pipeline, tensor, 3D, ZeRO/FSDP and recompute lowerings, each closed form derived in a
// comment and checked against the lowering or the simulator (docs/program.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/flops.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "lowered_run.hpp"
#include "test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// An explicit model of `n` identical layers: `flops` forward FLOPs, `act` saved bytes and
// `out` output bytes per sample, `params` parameters each. No Python, so host costs are the
// dispatch only; A100s on NVSwitch.
std::string uniform_scenario(int gpus, int n, double flops, double act, double out, long params,
                             const std::string& strategy, const std::string& training) {
  std::string layers;
  for (int i = 0; i < n; ++i) {
    layers += std::string(i ? "," : "") + "{\"name\":\"l" + std::to_string(i) +
              "\",\"kind\":\"gemm\",\"params\":" + std::to_string(params) +
              ",\"fwd_flops_per_sample\":" + std::to_string(flops) +
              ",\"activation_bytes_per_sample\":" + std::to_string(act) +
              ",\"output_bytes_per_sample\":" + std::to_string(out) + "}";
  }
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":" + std::to_string(gpus) +
         ",\"gpu\":\"A100-SXM4-80GB\"},\"host\":{\"python\":false},"
         "\"model\":{\"explicit\":[" +
         layers +
         "],\"input_bytes_per_sample\":0},"
         "\"training\":{" +
         training + "},\"strategy\":{" + strategy + "}}";
}

Scenario parse(const std::string& json, std::vector<std::string> sets = {}) {
  return parse_scenario_string(json, "test.json", sets);
}

using csim::test::max_in_flight;
using csim::test::peak_in;
using csim::test::Run;
using csim::test::simulate;

// Fraction of the pipeline flush (first forward start to last backward end over all GPUs) in
// which GPU `gpu` runs no forward/backward kernel.
double bubble_fraction(const Run& run, int gpu) {
  TimeNs first = -1, last = 0, busy = 0;
  for (const Op& op : run.p.ops) {
    if (op.kind != OpKind::kCompute ||
        (op.phase != Phase::kForward && op.phase != Phase::kBackward))
      continue;
    const OpTiming& t = run.r.timings[static_cast<std::size_t>(op.id)];
    if (first < 0 || t.start_ns < first) first = t.start_ns;
    last = std::max(last, t.end_ns);
    if (op.gpu == gpu) busy += t.end_ns - t.start_ns;
  }
  return 1.0 - static_cast<double>(busy) / static_cast<double>(last - first);
}

}  // namespace

// [SECTION] Pipeline
// --------------------------------------------------------------------------------

TEST_CASE(
    "pipeline schedules: every (chunk, micro-batch) once forward and once backward, in-flight "
    "bounds",
    "[strategies][pipeline]") {
  const int p = 4, m = 8, v = 2;
  for (int stage = 0; stage < p; ++stage) {
    // GPipe holds all m micro-batches before the first backward.
    CHECK(max_in_flight(pipeline_schedule(PipelineSchedule::kGpipe, p, 1, m, stage)) == m);
    // 1F1B: warm-up p - stage - 1 forwards plus one steady forward: p - stage in flight (<= p).
    CHECK(max_in_flight(pipeline_schedule(PipelineSchedule::k1f1b, p, 1, m, stage)) == p - stage);
    // Interleaved: warm-up (p - stage - 1) * 2 + (v - 1) * p chunk-forwards plus one.
    const auto il = pipeline_schedule(PipelineSchedule::kInterleaved, p, v, m, stage);
    CHECK(max_in_flight(il) == (p - stage - 1) * 2 + (v - 1) * p + 1);
    std::map<std::pair<int, int>, int> seen;
    for (const PipeStep& st : il) seen[{st.chunk, st.micro}] += st.forward ? 1 : 10;
    CHECK(seen.size() == static_cast<std::size_t>(m * v));
    for (const auto& [k, n] : seen) CHECK(n == 11);
  }
}

TEST_CASE("pipeline bubble (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/(v*m+p-1) interleaved",
          "[strategies][pipeline][sim]") {
  // 8 identical layers of 2 TFLOP per sample, batch 1 per micro-batch, 1-byte activations sent
  // between stages (free communication: ~10 us against ~8 ms of compute per layer), no
  // parameters. With uniform stages every forward takes t_f, every backward t_b = 2 t_f, and the
  // flush lasts (m + p - 1)(t_f + t_b) for GPipe and 1F1B: the first micro-batch's forward
  // crosses p - 1 stages before the last stage starts, and the last backward crosses them back.
  // Each stage computes m (t_f + t_b), so bubble = (p - 1) / (m + p - 1). Interleaved with v
  // chunks: each chunk is 1/v of a stage's work and the ramp shrinks to (p - 1)/v of a
  // micro-batch: bubble = ((p - 1)/v) / (m + (p - 1)/v) = (p - 1) / (v m + p - 1).
  // Uniform stages also need the recv kernels spinning on the p2p streams not to take SMs from
  // the compute kernels: compute-communication interference is off (nccl_sms 0).
  const int p = 4, m = 8;
  const std::vector<std::string> no_interference{
      "cluster.gpu={\"base\":\"A100-SXM4-80GB\",\"nccl_sms\":0}"};
  const std::string training =
      "\"global_batch\":8,\"precision\":\"bf16\",\"optimizer\":\"sgd\",\"steps\":1";
  for (const char* sched : {"gpipe", "1f1b"}) {
    const Run run = simulate(parse(
        uniform_scenario(
            4, 8, 2e12, 0, 1, 0,
            std::string("\"kind\":\"pipeline\",\"pp\":4,\"micro_batch_size\":1,\"schedule\":\"") +
                sched + "\"",
            training),
        no_interference));
    const double expected = (p - 1.0) / (m + p - 1.0);  // 3/11 = 0.2727
    for (int g = 0; g < p; ++g) CHECK(bubble_fraction(run, g) == Approx(expected).epsilon(0.01));
  }
  const Run il =
      simulate(parse(uniform_scenario(4, 8, 2e12, 0, 1, 0,
                                      "\"kind\":\"pipeline\",\"pp\":4,\"micro_batch_size\":1,"
                                      "\"schedule\":\"interleaved\",\"virtual_stages\":2",
                                      training),
                     no_interference));
  const double expected = (p - 1.0) / (2.0 * m + p - 1.0);  // 3/19 = 0.158
  for (int g = 0; g < p; ++g) CHECK(bubble_fraction(il, g) == Approx(expected).epsilon(0.01));
}

TEST_CASE(
    "pipeline in-flight activations: GPipe m, 1F1B p, interleaved first stage 1 + (p-1)/(pv) of "
    "1F1B's",
    "[strategies][pipeline][sim]") {
  // 8 layers saving A = 1 MiB per sample each, p = 4 stages, m = 8 micro-batches of 1 sample.
  // Stage 0 holds, at its peak, (in-flight micro-batches) x (layers per chunk) x A:
  //   GPipe: m = 8 micro-batches x 2 layers -> 16 A
  //   1F1B: p = 4 micro-batches x 2 layers -> 8 A
  //   interleaved v = 2: (p - 1) * 2 + (v - 1) p + 1 = 11 chunk-micro-batches x 1 layer = 11 A
  //     = 8 A x (1 + (p - 1)/(p v)) = 8 A x 11/8 (Korthikanti et al. 2022, section 4.2.3)
  const double A = 1 << 20;
  const std::string training =
      "\"global_batch\":8,\"precision\":\"bf16\",\"optimizer\":\"sgd\",\"steps\":1";
  auto peak = [&](const std::string& extra) {
    const Run run = simulate(parse(uniform_scenario(
        4, 8, 1e10, A, 1, 0, "\"kind\":\"pipeline\",\"pp\":4,\"micro_batch_size\":1," + extra,
        training)));
    return peak_in(run, 0, {MemCategory::kActivations});
  };
  CHECK(peak("\"schedule\":\"gpipe\"") == static_cast<Bytes>(16 * A));
  CHECK(peak("\"schedule\":\"1f1b\"") == static_cast<Bytes>(8 * A));
  CHECK(peak("\"schedule\":\"interleaved\",\"virtual_stages\":2") ==
        static_cast<Bytes>(8 * A * (1.0 + 3.0 / 8.0)));
}

// [SECTION] Tensor parallel
// -------------------------------------------------------------------------

namespace {
std::string gpt_scenario(int gpus, const std::string& strategy, int layers = 4) {
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":" + std::to_string(gpus) +
         ",\"gpu\":\"A100-SXM4-80GB\"},\"host\":{\"python\":false},"
         "\"model\":{\"gpt\":{\"layers\":" +
         std::to_string(layers) +
         ",\"hidden\":1024,\"heads\":16,\"seq_len\":512,\"vocab\":32000}},"
         "\"training\":{\"global_batch\":8,\"precision\":\"bf16\",\"optimizer\":\"adam\",\"steps\":"
         "1},\"strategy\":{" +
         strategy + "}}";
}
}  // namespace

TEST_CASE(
    "tensor parallel: 2 all-reduces of b*s*h*e forward and 2 backward per block, SP uses RS/AG",
    "[strategies][tp]") {
  // Megatron: per block, g after attn.proj and after mlp.proj (forward), f before attn.qkv and
  // before mlp.fc (backward): 2 + 2 all-reduces of b*s*h*e bytes. b = micro-batch 8, s = 512,
  // h = 1024, e = 2 (bf16): 8 * 512 * 1024 * 2 = 8 MiB each. The vocabulary-parallel embedding
  // adds one forward all-reduce, the LM head one backward: 2l + 1 each way for l = 4 blocks.
  const Bytes bshe = 8LL * 512 * 1024 * 2;
  const Scenario s = parse(gpt_scenario(2, "\"kind\":\"tensor_parallel\",\"tp\":2"));
  const Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  std::map<std::string, int> count;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kCollective || op.gpu != 0 || p.name_of(op).rfind("tp ", 0) != 0)
      continue;
    CHECK(op.bytes == bshe);
    CHECK(op.collective == CollectiveKind::kAllReduce);
    ++count[to_string(op.phase)];
  }
  CHECK(count["forward"] == 2 * 4 + 1);
  CHECK(count["backward"] == 2 * 4 + 1);
  // Sequence parallelism (Korthikanti et al. 2022, section 4.2.2): each all-reduce becomes a
  // reduce-scatter + all-gather pair of the same b*s*h*e buffer: forward AG before qkv and fc,
  // RS after the two projections; backward the reverse. Per block 2 AG + 2 RS each way.
  const Program sp = lower(
      parse(gpt_scenario(2, "\"kind\":\"tensor_parallel\",\"tp\":2,\"sequence_parallel\":true")));
  std::map<std::pair<std::string, CollectiveKind>, int> c2;
  for (const Op& op : sp.ops) {
    if (op.kind != OpKind::kCollective || op.gpu != 0 || sp.name_of(op).rfind("tp ", 0) != 0)
      continue;
    CHECK(op.bytes == bshe);
    ++c2[{to_string(op.phase), op.collective}];
  }
  CHECK(c2[{"forward", CollectiveKind::kAllGather}] == 2 * 4 + 1);      // + LM head input
  CHECK(c2[{"forward", CollectiveKind::kReduceScatter}] == 2 * 4 + 1);  // + embedding output
  CHECK(c2[{"backward", CollectiveKind::kAllGather}] == 2 * 4 + 1);
  CHECK(c2[{"backward", CollectiveKind::kReduceScatter}] == 2 * 4 + 1);
  CHECK(c2[{"forward", CollectiveKind::kAllReduce}] == 0);
}

TEST_CASE(
    "activations per block by recompute mode and parallelism (Korthikanti et al. 2022, table 2)",
    "[strategies][recompute]") {
  // Per block per sample in bytes (2-byte elements): s = 512, h = 1024, a = 16, t = 2.
  //   none, t = 1:       sh(34 + 5as/h)
  //   none, TP:          sh(10 + 24/t + 5as/(ht))
  //   none, TP + SP:     sh(34/t + 5as/(ht))
  //   selective, TP:     sh(10 + 24/t);   selective, TP + SP: 34 sh/t
  //   full, TP:          2sh;             full, TP + SP:       2sh/t
  const Scenario s = parse(gpt_scenario(2, "\"kind\":\"tensor_parallel\",\"tp\":2"));
  const double sh = 512.0 * 1024, as_h = 16.0 * 512 / 1024, t = 2;
  Segment block;  // block 1: layers 14..26 (embed = 0, block 0 = 1..13)
  block.first = 14;
  block.end = 27;
  REQUIRE(s.model.layers[14].name == "h.1.ln_1");
  REQUIRE(s.model.layers[26].name == "h.1.mlp.residual");
  auto stored = [&](int tp, bool sp, RecomputeMode mode) {
    return stored_activation_bytes_per_sample(s.model, block, tp, sp, mode);
  };
  CHECK(stored(1, false, RecomputeMode::kNone) == Approx(sh * (34 + 5 * as_h)));
  CHECK(stored(2, false, RecomputeMode::kNone) == Approx(sh * (10 + 24 / t + 5 * as_h / t)));
  CHECK(stored(2, true, RecomputeMode::kNone) == Approx(sh * (34 / t + 5 * as_h / t)));
  CHECK(stored(2, false, RecomputeMode::kSelective) == Approx(sh * (10 + 24 / t)));
  CHECK(stored(2, true, RecomputeMode::kSelective) == Approx(sh * 34 / t));
  CHECK(stored(2, false, RecomputeMode::kFull) == Approx(2 * sh));
  CHECK(stored(2, true, RecomputeMode::kFull) == Approx(2 * sh / t));
}

// [SECTION] 3D
// ----------------------------------------------------------------------------------------

TEST_CASE("3D rank order: Megatron's tp-cp-ep-dp-pp by default, overridable", "[strategies][3d]") {
  ParallelSpec ps;
  ps.dp = 2;
  ps.tp = 4;
  ps.pp = 3;
  const RankGrid g(ps);
  using D = ParallelDim;
  auto at = [](int dp, int tp, int pp, int cp = 0) {
    RankCoord c;
    c[D::kDp] = dp;
    c[D::kTp] = tp;
    c[D::kPp] = pp;
    c[D::kCp] = cp;
    return c;
  };
  // rank = tp + t * (dp + d * pp) (cp, ep of size 1 add nothing): TP groups are 4 consecutive
  // ranks (one node of 8 holds two), DP peers are t = 4 apart, pipeline stages t * d = 8 apart.
  CHECK(g.group(g.rank(at(1, 0, 2)), {D::kTp}) == std::vector<int>{20, 21, 22, 23});
  CHECK(g.group(g.rank(at(0, 3, 1)), {D::kDp}) == std::vector<int>{11, 15});
  CHECK(g.rank(at(1, 2, 2)) == 2 + 4 * (1 + 2 * 2));
  CHECK(g.coord(22)[D::kTp] == 2);
  CHECK(g.coord(22)[D::kDp] == 1);
  CHECK(g.coord(22)[D::kPp] == 2);
  ps.rank_order = {D::kDp, D::kTp, D::kPp};
  const RankGrid h(ps);
  CHECK(h.group(0, {D::kDp}) == std::vector<int>{0, 1});
  CHECK(h.group(0, {D::kTp}) == std::vector<int>{0, 2, 4, 6});
  const Scenario s =
      parse(gpt_scenario(8, "\"kind\":\"3d\",\"tp\":2,\"pp\":2,\"rank_order\":\"dp-tp-pp\""));
  CHECK(s.strategy.parallel.dp == 2);
  CHECK(s.strategy.parallel.rank_order.front() == ParallelDim::kDp);
}

TEST_CASE("Rank grid over five dimensions: groups along any set, Megatron's tp-cp-dp-pp strides",
          "[strategies][grid]") {
  using D = ParallelDim;
  ParallelSpec ps;
  ps.tp = 2;
  ps.cp = 2;
  ps.dp = 2;
  ps.pp = 2;
  const RankGrid g(ps);
  // Strides in tp-cp-ep-dp-pp order: tp 1, cp 2, (ep 4, size 1), dp 4, pp 8.
  CHECK(g.size() == 16);
  CHECK(g.stride(D::kCp) == 2);
  CHECK(g.stride(D::kDp) == 4);
  CHECK(g.stride(D::kPp) == 8);
  // Rank 13 = tp 1 + 2 (cp 0) + 4 (dp 1) + 8 (pp 1). Its CP peers differ by the cp stride 2; its
  // gradient group spans dp x cp (Megatron's data_parallel_group with context parallelism): the
  // four ranks with tp 1, pp 1.
  CHECK(g.group(13, {D::kCp}) == std::vector<int>{13, 15});
  CHECK(g.group(13, {D::kDp, D::kCp}) == std::vector<int>{9, 11, 13, 15});
  CHECK(g.group(13, {D::kCp, D::kDp}) == std::vector<int>{9, 11, 13, 15});  // a set: any order
  // Every group along {dp, cp}, the others (tp, pp) counted with pp fastest.
  std::vector<int> firsts;
  g.for_each_group({D::kDp, D::kCp}, [&](const std::vector<int>& rks, const RankCoord&) {
    firsts.push_back(rks[0]);
  });
  CHECK(firsts == std::vector<int>{0, 8, 1, 9});
  // Llama 3's order [TP, CP, PP, DP]: pp before dp, so DP peers are t c p = 8 apart.
  ps.rank_order = {D::kTp, D::kCp, D::kPp, D::kDp};
  CHECK(RankGrid(ps).group(0, {D::kDp}) == std::vector<int>{0, 8});
  // The expert grid of MoE Parallel Folding over the same 16 ranks: etp 1 x ep 4 x edp 1 in the
  // default order (tp read as etp, dp as edp): EP groups of 4 consecutive ranks fold over tp x cp.
  ps.rank_order = {D::kTp, D::kCp, D::kEp, D::kDp, D::kPp};
  ps.ep = 4;
  const RankGrid e = RankGrid::expert(ps);
  CHECK(e.size() == 16);
  CHECK(e.size(D::kEdp) == 2);  // tp cp dp / (etp ep) = 8 / 4
  CHECK(e.group(5, {D::kEp}) == std::vector<int>{4, 5, 6, 7});
}

TEST_CASE("3D lowering simulates: dp 2 x tp 2 x pp 2 with 1F1B, every GPU computes",
          "[strategies][3d][sim]") {
  // Full fidelity (no rank symmetry), so that every GPU has its own ops.
  const Run run =
      simulate(parse(gpt_scenario(8, "\"kind\":\"3d\",\"tp\":2,\"pp\":2,\"micro_batch_size\":1"),
                     {"simulation.symmetry=off"}));
  CHECK(run.s.strategy.parallel.micro_batches == 4);  // 8 / (dp 2 x 1)
  for (int g = 0; g < 8; ++g) {
    int fwd = 0;
    for (const Op& op : run.p.ops)
      fwd += op.gpu == g && op.kind == OpKind::kCompute && op.phase == Phase::kForward;
    CHECK(fwd > 0);
  }
}

// [SECTION] ZeRO / FSDP
// --------------------------------------------------------------------------------

TEST_CASE("ZeRO model-state memory per stage: 16Psi, 4Psi+12Psi/N, 2Psi+14Psi/N, 16Psi/N",
          "[strategies][zero][sim]") {
  // fp16 + Adam: W = 2, G = 2, K = 4 (master) + 8 (moments) = 12 bytes per parameter (ZeRO,
  // section 5). Psi = 4 layers x 2^20 parameters, N = 4 ranks. The peak over the step of
  // params + grads + optimizer (the gathered parameters and unsharded gradient buckets are
  // transient communication buffers, category comm_buffers):
  //   stage 0: 16 Psi; stage 1: 4 Psi + 12 Psi/N; stage 2: 2 Psi + 14 Psi/N; stage 3: 16 Psi/N
  // at rest, and from stage 1 on DeepSpeed's optimizer step converts the gradient partition to
  // fp32 (docs/memory.md, "Optimizer step temporaries": stage_1_and_2.py's single_grad_partition,
  // stage3.py's sub-group partition): + 4 Psi/N during the step, so the peaks are
  //   stage 1: 4 Psi + 16 Psi/N; stage 2: 2 Psi + 18 Psi/N; stage 3: 20 Psi/N.
  const double psi = 4.0 * (1 << 20), n = 4;
  const double expected[4] = {16 * psi, 4 * psi + 16 * psi / n, 2 * psi + 18 * psi / n,
                              20 * psi / n};
  for (int stage = 0; stage <= 3; ++stage) {
    const Run run = simulate(
        parse(uniform_scenario(
                  4, 4, 1e9, 1024, 1024, 1 << 20,
                  "\"kind\":\"zero\",\"zero_stage\":" + std::to_string(stage),
                  "\"global_batch\":8,\"precision\":\"fp16\",\"optimizer\":\"adam\",\"steps\":2"),
              {"simulation.symmetry=off"}));  // every GPU its own ops
    CAPTURE(stage);
    const double step_tmp = stage >= 1 ? 4 * psi / n : 0;
    CHECK(
        model_state_bytes(static_cast<std::int64_t>(psi), run.s.training, stage, 4).params +
            model_state_bytes(static_cast<std::int64_t>(psi), run.s.training, stage, 4).grads +
            model_state_bytes(static_cast<std::int64_t>(psi), run.s.training, stage, 4).optimizer ==
        static_cast<Bytes>(expected[stage] - step_tmp));
    for (int g = 0; g < 4; ++g) {
      CHECK(peak_in(run, g, {MemCategory::kParams, MemCategory::kGrads, MemCategory::kOptimizer}) ==
            static_cast<Bytes>(expected[stage]));
    }
  }
}

TEST_CASE("ZeRO-3 / FSDP replace the all-reduce by reduce-scatter + all-gathers",
          "[strategies][zero]") {
  const std::string training =
      "\"global_batch\":8,\"precision\":\"bf16\",\"optimizer\":\"adam\",\"steps\":1";
  auto count = [](const Program& p, CollectiveKind k) {
    int c = 0;
    for (const Op& op : p.ops)
      c += op.kind == OpKind::kCollective && op.gpu == 0 && op.collective == k;
    return c;
  };
  // 4 layers of 2^20 parameters = 4 modules, m = 1, one step (DeepSpeed's first: recording, no
  // prefetch): ZeRO-3 gathers each module before its forward and again before its backward (8
  // all-gathers); the gradients (4 x 2^20 < reduce_bucket_size 5e8) go in one reduce-scatter at
  // the backward's end, or one per layer with a bucket of 2^20; shard_grad_op gathers once.
  const Program z3 = lower(parse(uniform_scenario(4, 4, 1e9, 1024, 1024, 1 << 20,
                                                  "\"kind\":\"zero\",\"zero_stage\":3", training)));
  CHECK(count(z3, CollectiveKind::kAllGather) == 8);
  CHECK(count(z3, CollectiveKind::kReduceScatter) == 1);
  CHECK(count(z3, CollectiveKind::kAllReduce) == 0);
  const Program z3b = lower(parse(uniform_scenario(
      4, 4, 1e9, 1024, 1024, 1 << 20,
      "\"kind\":\"zero\",\"zero_stage\":3,\"reduce_bucket_size\":1048576", training)));
  CHECK(count(z3b, CollectiveKind::kReduceScatter) == 4);
  const Program sgo = lower(
      parse(uniform_scenario(4, 4, 1e9, 1024, 1024, 1 << 20,
                             "\"kind\":\"fsdp\",\"fsdp_sharding\":\"shard_grad_op\"", training)));
  CHECK(count(sgo, CollectiveKind::kAllGather) == 4);
  CHECK(count(sgo, CollectiveKind::kReduceScatter) == 4);
  const Program z0 = lower(parse(uniform_scenario(4, 4, 1e9, 1024, 1024, 1 << 20,
                                                  "\"kind\":\"zero\",\"zero_stage\":0", training)));
  CHECK(count(z0, CollectiveKind::kAllReduce) == 4);
}

// [SECTION] FLOPs and model parallel
// ----------------------------------------------------------------

TEST_CASE(
    "model and hardware FLOPs: 72Bslh^2(1+s/6h+V/12lh), full recompute 96Bslh^2(1+s/6h+V/16lh)",
    "[strategies][flops]") {
  const Scenario s =
      parse(gpt_scenario(2, "\"kind\":\"tensor_parallel\",\"tp\":2,\"recompute\":\"full\""));
  const double B = 8, sl = 512, l = 4, h = 1024, V = 32000;
  CHECK(model_flops_per_step(s) ==
        Approx(72 * B * sl * l * h * h * (1 + sl / (6 * h) + V / (12 * l * h))));
  CHECK(hardware_flops_per_step(s) ==
        Approx(96 * B * sl * l * h * h * (1 + sl / (6 * h) + V / (16 * l * h))));
  const Scenario sel =
      parse(gpt_scenario(2, "\"kind\":\"tensor_parallel\",\"tp\":2,\"recompute\":\"selective\""));
  // selective: + 4 B s^2 h l (QK^T and attention x values run again)
  CHECK(hardware_flops_per_step(sel) ==
        Approx(model_flops_per_step(sel) + 4 * B * sl * sl * h * l));
  CHECK(lower(s).model_flops_per_step == Approx(model_flops_per_step(s)));
}

TEST_CASE("selective recompute re-runs the attention core before its backward",
          "[strategies][recompute]") {
  // Megatron checkpoints the whole core attention: before h.i.attn.av.bwd, GPU 0 re-runs scores,
  // softmax, dropout and av forward, in that order, holding what selective recompute dropped:
  // 5as^2 per sample in 2-byte units (softmax output 2as^2, dropout mask as^2, dropout output
  // 2as^2; Korthikanti et al. 2022, section 4.1), split over t = 2 heads-wise. With b = 8
  // samples, a = 16, s = 512, bf16: 5 * 16 * 512^2 * 8 / 2 = 83,886,080 B per block.
  const Program p = lower(
      parse(gpt_scenario(2, "\"kind\":\"tensor_parallel\",\"tp\":2,\"recompute\":\"selective\"")));
  REQUIRE(validate_program(p).empty());
  std::vector<std::string> seq;  // GPU 0's compute ops of block 1, in issue order
  int allocs = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != 0) continue;
    if (op.kind == OpKind::kAlloc && p.name_of(op) == "recomputed attention") {
      CHECK(op.bytes == 5LL * 16 * 512 * 512 * 8 / 2);
      ++allocs;
    }
    if (op.kind == OpKind::kCompute && p.name_of(op).rfind("h.1.", 0) == 0)
      seq.push_back(p.name_of(op));
  }
  CHECK(allocs == 4);  // one per block
  const auto at = std::find(seq.begin(), seq.end(), "h.1.attn.scores.recompute");
  REQUIRE(seq.end() - at >= 6);
  const std::vector<std::string> want{"h.1.attn.scores.recompute",
                                      "h.1.attn.softmax.recompute",
                                      "h.1.attn.dropout.recompute",
                                      "h.1.attn.av.recompute",
                                      "h.1.attn.av.bwd",
                                      "h.1.attn.dropout.bwd"};
  CHECK(std::vector<std::string>(at, at + 6) == want);
  int recomputes = 0;
  for (const Op& op : p.ops) recomputes += op.gpu == 0 && op.phase == Phase::kRecompute;
  CHECK(recomputes == 4 * 4);  // 4 kernels in each of the 4 blocks
}

TEST_CASE("model parallel: one GPU computes at a time without micro-batches",
          "[strategies][model_parallel][sim]") {
  const Run run = simulate(parse(uniform_scenario(
      2, 4, 1e11, 1024, 1 << 20, 1000, "\"kind\":\"model_parallel\",\"split_at\":[\"l2\"]",
      "\"global_batch\":8,\"precision\":\"bf16\",\"optimizer\":\"sgd\",\"steps\":1")));
  std::vector<std::pair<TimeNs, TimeNs>> gpu0, gpu1;
  for (const Op& op : run.p.ops) {
    if (op.kind != OpKind::kCompute ||
        (op.phase != Phase::kForward && op.phase != Phase::kBackward))
      continue;
    const OpTiming& t = run.r.timings[static_cast<std::size_t>(op.id)];
    (op.gpu == 0 ? gpu0 : gpu1).push_back({t.start_ns, t.end_ns});
    CHECK((run.p.name_of(op)[1] < '2') == (op.gpu == 0));  // l0, l1 on GPU 0; l2, l3 on GPU 1
  }
  for (const auto& a : gpu0) {
    for (const auto& b : gpu1) CHECK((a.second <= b.first || b.second <= a.first));
  }
}

// [SECTION] Bad input
// ------------------------------------------------------------------------------------

TEST_CASE("inconsistent parallel requests are InputErrors naming the keys",
          "[strategies][parser]") {
  auto err = [](const std::string& json) {
    try {
      parse(json);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // dp * tp * pp != GPUs
  CHECK(err(gpt_scenario(8, "\"kind\":\"3d\",\"dp\":2,\"tp\":2,\"pp\":3")).find("dp * tp * pp") !=
        std::string::npos);
  // heads (16) not divisible by tp (3)
  CHECK(err(gpt_scenario(3, "\"kind\":\"tensor_parallel\",\"tp\":3")).find("model.gpt.heads") !=
        std::string::npos);
  // layers (4) not divisible by pp * v = 2 * 3
  CHECK(err(gpt_scenario(
                2,
                "\"kind\":\"pipeline\",\"pp\":2,\"schedule\":\"interleaved\",\"virtual_stages\":3"))
            .find("pp * virtual_stages") != std::string::npos);
  // interleaving with fewer micro-batches (global 8 / mbs 8 = 1) than stages
  CHECK(
      err(gpt_scenario(
              2,
              "\"kind\":\"pipeline\",\"pp\":2,\"micro_batch_size\":8,\"schedule\":\"interleaved\""))
          .find("multiple of strategy.pp") != std::string::npos);
  // a dimension the kind does not have
  CHECK(err(gpt_scenario(2, "\"kind\":\"pipeline\",\"tp\":2")).find("strategy.tp") !=
        std::string::npos);
  // a misspelt key gets a hint
  CHECK(err(gpt_scenario(2, "\"kind\":\"pipeline\",\"shedule\":\"gpipe\"")).find("schedule") !=
        std::string::npos);
  // ZeRO-2 with a pipeline
  CHECK(err(gpt_scenario(4, "\"kind\":\"3d\",\"pp\":2,\"zero_stage\":2")).find("zero_stage") !=
        std::string::npos);
}
