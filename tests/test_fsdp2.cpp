// FSDP2 (fully_shard per block + the root), HSDP, FSDP2 x TP and x PP, Megatron's distributed
// optimizer and Megatron-FSDP (core/lowering/fsdp2.cpp), and torchtitan's activation
// checkpointing policies (core/lowering/recompute_policy.cpp). Every expected value is derived in
// a comment first (docs/program.md, "FSDP2" and "Activation recompute").
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/flops.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// A GPT of 4 blocks on one node of `gpus` A100s: h = 1024, 16 heads, s = 512, V = 32000 (tied
// LM head: 0 parameters), bf16 (W = 2, G = 4, master 4) + Adam, global batch 8, one step.
//   block     12h^2 + 13h             = 12,596,224 parameters
//   embedding V h + s h               = 33,292,288;  ln_f 2h = 2,048
//   root      embedding + ln_f        = 33,294,336 (FSDP2's root unit: what no block holds)
//   model     4 blocks + root         = 83,679,232
constexpr std::int64_t kBlock = 12596224, kRoot = 33294336, kModel = 4 * kBlock + kRoot;

std::string gpt(int gpus, const std::string& strategy, const std::string& training_extra = "") {
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":" + std::to_string(gpus) +
         ",\"gpu\":\"A100-SXM4-80GB\"},\"host\":{\"python\":false},\"model\":{\"gpt\":{"
         "\"layers\":4,\"hidden\":1024,\"heads\":16,\"seq_len\":512,\"vocab\":32000}},"
         "\"training\":{\"global_batch\":8,\"precision\":\"bf16\",\"optimizer\":\"adam\","
         "\"steps\":1" +
         training_extra + "},\"strategy\":{" + strategy + "}}";
}
const std::string kFsdp2 = "\"kind\":\"fsdp\",\"fsdp_version\":2";

Scenario parse(const std::string& json) {
  return parse_scenario_string(json, "test.json", {});
}

Program lowered(const std::string& json) {
  Program p = lower(parse(json));
  const std::string problem = validate_program(p);
  INFO(problem);
  REQUIRE(problem.empty());
  return p;
}

std::string parse_error(const std::string& json) {
  try {
    parse(json);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::vector<const Op*> named(const Program& p, int gpu, const std::string& name) {
  std::vector<const Op*> out;
  for (const Op& op : p.ops)
    if (op.gpu == gpu && p.name_of(op) == name) out.push_back(&op);
  return out;
}
int count_bytes(const std::vector<const Op*>& ops, Bytes bytes) {
  return static_cast<int>(
      std::count_if(ops.begin(), ops.end(), [&](const Op* o) { return o->bytes == bytes; }));
}
std::vector<int> group_gpus(const Program& p, const Op& op) {
  return p.groups[static_cast<std::size_t>(op.group)].gpus;
}
// The most bytes allocated under `label` on `gpu` at once, in program order.
Bytes program_order_peak(const Program& p, int gpu, const std::string& label) {
  Bytes now = 0, peak = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != gpu || p.name_of(op) != label) continue;
    if (op.kind == OpKind::kAlloc) now += op.bytes;
    if (op.kind == OpKind::kFree) now -= op.bytes;
    peak = std::max(peak, now);
  }
  return peak;
}

struct Run {
  Scenario s;
  Program p;
  ExecutionResult r;
};
Run simulate(const std::string& json) {
  Run run{parse(json), {}, {}};
  run.p = lower(run.s);
  REQUIRE(validate_program(run.p).empty());
  sim::SimExecutor ex(run.s);
  run.r = ex.run(run.p, RunControl{});
  REQUIRE(run.r.complete);
  return run;
}
Bytes peak_of(const Run& run, int gpu) {
  const MemoryReport rep = memory_timeline(run.p, run.r.timings, run.s.cluster);
  for (const GpuMemory& g : rep.gpus)
    if (g.gpu == gpu) return g.peak_bytes;
  return -1;
}

const std::string kAg = "fsdp all_gather params", kRs = "fsdp reduce_scatter grads",
                  kAr = "fsdp all_reduce grads";

}  // namespace

// [SECTION] FSDP2 ---------------------------------------------------------------------------------

TEST_CASE("FSDP2: per-block all-gathers and reduce-scatters per step, torchtitan's default",
          "[strategies][fsdp2]") {
  // dp 8, m = 8 / 8 = 1. Forward: the root (before the embedding) and the 4 blocks: 5 gathers.
  // Backward: the root again (resharded after forward), blocks 2, 1, 0 (block 3, the last, is
  // kept from its forward by torchtitan's default): 4. So 9 all-gathers per step, of W Psi_u:
  //   block 2 x 12,596,224 = 25,192,448 B (7 of them), root 2 x 33,294,336 = 66,588,672 B (2).
  // One reduce-scatter per unit in fp32 (reduce_dtype default): 5, block 50,384,896 B (4), root
  // 133,177,344 B (1); all on the dp group of the 8 GPUs. No ZeRO or DDP collectives.
  const Program p = lowered(gpt(8, kFsdp2));
  const auto ag = named(p, 0, kAg), rs = named(p, 0, kRs);
  CHECK(ag.size() == 9);
  CHECK(count_bytes(ag, 2 * kBlock) == 7);
  CHECK(count_bytes(ag, 2 * kRoot) == 2);
  CHECK(rs.size() == 5);
  CHECK(count_bytes(rs, 4 * kBlock) == 4);
  CHECK(count_bytes(rs, 4 * kRoot) == 1);
  CHECK(group_gpus(p, *ag.front()) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(named(p, 0, "zero all_gather params").empty());
  CHECK(named(p, 0, "dp all_reduce grads").empty());
  // At rest: the fp32 shard of every parameter, ceil(83,679,232 / 8) = 10,459,904 x 4 B.
  const auto params = named(p, 0, "model parameters");
  REQUIRE(params.size() == 1);
  CHECK(params.front()->bytes == 10459904LL * 4);
  // 16 Psi / N for bf16 + Adam (4 + 4 + 8), against ZeRO-3's 18 Psi / N.
  const TrainingSpec t = parse(gpt(8, kFsdp2)).training;
  const ModelStateBytes f2 = fsdp2_state_bytes(kModel, t, 8, false);
  const ModelStateBytes z3 = model_state_bytes(kModel, t, 3, 8);
  CHECK(f2.params + f2.grads + f2.optimizer == 16 * 10459904LL);
  CHECK(z3.params + z3.grads + z3.optimizer == 18 * 10459904LL);
}

TEST_CASE("FSDP2: the all-gather stream waits on copy-out events, two units ahead at most",
          "[strategies][fsdp2]") {
  // _fsdp_param_group.py, wait_for_unshard: in forward the all-gather streams wait on the
  // previous unit's copy-out event before the next all-gather (implicit prefetch), in backward
  // on the current unit's. Forward units: the root (gathered before the embedding), blocks 0..3;
  // block k's gather is issued as the prefetch at block k-1's start, after block k-2's copy-out
  // was recorded: its alloc ("fsdp2 unsharded params", on the dp stream) waits for the compute
  // op before block k-2's first kernel. Block 0 (prefetched at the root: no earlier unit) and
  // block 1 (prefetched at block 0: the root's event, recorded before any kernel of the step)
  // wait for nothing; block 2 waits for the embedding's kernel, block 3 for block 0's last.
  const Program p = lowered(gpt(8, kFsdp2));
  std::vector<const Op*> fwd;
  for (const Op* o : named(p, 0, "fsdp2 unsharded params"))
    if (o->kind == OpKind::kAlloc && o->step == 1 && fwd.size() < 5) fwd.push_back(o);
  REQUIRE(fwd.size() == 5);  // root, blocks 0..3
  CHECK(fwd[0]->bytes == 2 * kRoot);
  for (int k = 0; k < 2; ++k) CHECK(fwd[static_cast<std::size_t>(k + 1)]->deps.empty());
  for (int k = 2; k < 4; ++k) {
    const Op& a = *fwd[static_cast<std::size_t>(k + 1)];
    REQUIRE(a.deps.size() == 1);
    CHECK(a.deps[0].kind == DepKind::kStreamWaits);
    const Op& e = p.ops[static_cast<std::size_t>(a.deps[0].op)];
    CHECK(e.kind == OpKind::kCompute);
    CHECK(e.phase == Phase::kForward);
    const std::string name = p.name_of(e);
    CHECK((name.rfind("h.", 0) == 0) == (k == 3));  // block 2: the embedding; 3: a block's
    if (k == 3) CHECK(name.rfind("h.0.", 0) == 0);
  }
  // Backward: the root is gathered again at the head, block 3 was kept; blocks 2, 1, 0 are each
  // prefetched at the next block's start and wait for the op before its backward kernels (the
  // head's, block 3's, block 2's): 3 waits on backward kernels.
  int bwd_waits = 0;
  for (const Op* o : named(p, 0, "fsdp2 unsharded params"))
    if (o->kind == OpKind::kAlloc && o->step == 1 && o->phase == Phase::kMemory && !o->deps.empty())
      bwd_waits += p.ops[static_cast<std::size_t>(o->deps[0].op)].phase == Phase::kBackward;
  CHECK(bwd_waits == 3);
}

TEST_CASE("FSDP2: reshard_after_forward false gathers once per unit and holds more",
          "[strategies][fsdp2]") {
  // Never resharding after forward: 5 gathers in the forward, none in the backward (against 9).
  // Gathered parameters at once, in program order: by default the root and two blocks (the
  // current one and the one prefetched): 66,588,672 + 2 x 25,192,448 = 116,973,568 B; without
  // resharding all five units stay from the end of the forward: 66,588,672 + 4 x 25,192,448 =
  // 167,358,464 B, so 2 blocks (50,384,896 B) more, and a higher simulated peak.
  const std::string def = gpt(8, kFsdp2),
                    never = gpt(8, kFsdp2 + ",\"reshard_after_forward\":false");
  const Program pd = lowered(def), pn = lowered(never);
  CHECK(named(pn, 0, kAg).size() == 5);
  CHECK(named(pn, 0, kRs).size() == 5);
  CHECK(program_order_peak(pd, 0, "fsdp2 unsharded params") == 116973568);
  CHECK(program_order_peak(pn, 0, "fsdp2 unsharded params") == 167358464);
  // true: every block resharded, the last too: forward 5, backward 5.
  CHECK(named(lowered(gpt(8, kFsdp2 + ",\"reshard_after_forward\":true")), 0, kAg).size() == 10);
  CHECK(peak_of(simulate(never), 0) > peak_of(simulate(def), 0));
}

TEST_CASE("FSDP2: reduce_dtype fp32 moves twice the bytes of bf16", "[strategies][fsdp2]") {
  // The reduce-scatter input is the unit's gradients in reduce_dtype: 4 B/param (torchtitan's
  // default fp32) against 2 (bf16): a block's 50,384,896 B against 25,192,448 B.
  const Program p32 = lowered(gpt(8, kFsdp2));
  const Program p16 = lowered(gpt(8, kFsdp2 + ",\"reduce_dtype\":\"bf16\""));
  const auto fp32 = named(p32, 0, kRs), bf16 = named(p16, 0, kRs);
  REQUIRE(fp32.size() == bf16.size());
  for (std::size_t k = 0; k < fp32.size(); ++k) CHECK(fp32[k]->bytes == 2 * bf16[k]->bytes);
  CHECK(count_bytes(bf16, 2 * kBlock) == 4);
  CHECK(fp32.front()->dtype == Dtype::kFp32);
  CHECK(bf16.front()->dtype == Dtype::kBf16);
}

TEST_CASE("HSDP: shard within 4 ranks, all-reduce the shard across 2 replicas",
          "[strategies][fsdp2]") {
  // dp 8, replicate 2: S = 4. Shard groups {0..3}, {4..7}; replica groups {j, j + 4}. Per unit:
  // the reduce-scatter over the shard group, then an all-reduce of the fp32 shard,
  // ceil(Psi_u / 4) x 4 B: a block's 12,596,224 B, the root's 33,294,336 B: 5 all-reduces.
  // At rest ceil(83,679,232 / 4) = 20,919,808 parameters x 4 B. HSDP runs without rank symmetry.
  const Program p = lowered(gpt(8, kFsdp2 + ",\"replicate\":2"));
  const auto ag = named(p, 0, kAg), rs = named(p, 0, kRs), ar = named(p, 0, kAr);
  CHECK(ag.size() == 9);
  CHECK(group_gpus(p, *ag.front()) == std::vector<int>{0, 1, 2, 3});
  CHECK(group_gpus(p, *rs.front()) == std::vector<int>{0, 1, 2, 3});
  REQUIRE(ar.size() == 5);
  CHECK(group_gpus(p, *ar.front()) == std::vector<int>{0, 4});
  CHECK(count_bytes(ar, 4 * (kBlock / 4)) == 4);
  CHECK(count_bytes(ar, 4 * (kRoot / 4)) == 1);
  CHECK(group_gpus(p, *named(p, 5, kAr).front()) == std::vector<int>{1, 5});
  CHECK(named(p, 0, "model parameters").front()->bytes == 20919808LL * 4);
  CHECK(p.symmetry.images.empty());
  simulate(gpt(8, kFsdp2 + ",\"replicate\":2"));
}

TEST_CASE("FSDP2 x TP: the TP-local parameters sharded over the dp group", "[strategies][fsdp2]") {
  // tp 2 x dp 4, rank = tp + 2 dp: GPU 0's dp group is {0, 2, 4, 6}. A block's gather moves its
  // TP-local parameters (shard_layer's split), 2 B each; the TP all-reduces stay in line.
  const Scenario s = parse(gpt(8, kFsdp2 + ",\"tp\":2"));
  CHECK(s.strategy.parallel.dp == 4);
  std::int64_t local = 0;
  for (int i = 0; i < static_cast<int>(s.model.layers.size()); ++i)
    if (s.model.layers[static_cast<std::size_t>(i)].block == 0)
      local += shard_layer(s.model, i, 2, false).params;
  CHECK(local < kBlock);
  const Program p = lowered(gpt(8, kFsdp2 + ",\"tp\":2"));
  const auto ag = named(p, 0, kAg);
  CHECK(ag.size() == 9);
  CHECK(group_gpus(p, *ag.front()) == std::vector<int>{0, 2, 4, 6});
  CHECK(count_bytes(ag, 2 * local) == 7);
  CHECK_FALSE(named(p, 0, "tp all_reduce").empty());
  simulate(gpt(8, kFsdp2 + ",\"tp\":2"));
}

TEST_CASE("FSDP2 x PP: gathered once per step and reduced once, per stage", "[strategies][fsdp2]") {
  // pp 2 x dp 4, micro-batches of 1: m = 8 / 4 = 2. Stage 0 holds the root (the embedding) and
  // blocks 0, 1; stage 1 blocks 2, 3 and its root (ln_f, 2,048 parameters). Under pp torchtitan
  // does not reshard after forward and the pipelining stage defers resharding and gradient sync
  // to the last micro-batch: 3 gathers and 3 reduce-scatters per stage per step (not per
  // micro-batch). GPU 0's group: {0, 1, 2, 3} (rank = dp + 4 pp).
  const Program p = lowered(gpt(8, kFsdp2 + ",\"pp\":2"));
  const auto ag0 = named(p, 0, kAg), rs0 = named(p, 0, kRs);
  CHECK(ag0.size() == 3);
  CHECK(rs0.size() == 3);
  CHECK(group_gpus(p, *ag0.front()) == std::vector<int>{0, 1, 2, 3});
  const auto ag4 = named(p, 4, kAg);
  CHECK(ag4.size() == 3);
  CHECK(count_bytes(ag4, 2 * 2048) == 1);
  CHECK(group_gpus(p, *ag4.front()) == std::vector<int>{4, 5, 6, 7});
  // Resharding after every forward (true) re-gathers per micro-batch: 1F1B on stage 0 runs
  // F0 F1 B0 B1; F0 and F1 gather and free the 3 units, B0 gathers them again (kept through B1):
  // 9.
  CHECK(
      named(lowered(gpt(8, kFsdp2 + ",\"pp\":2,\"reshard_after_forward\":true")), 0, kAg).size() ==
      9);
  simulate(gpt(8, kFsdp2 + ",\"pp\":2"));
}

TEST_CASE("ZeRO-3 and FSDP1 with pipeline parallelism stay refused", "[strategies][fsdp2]") {
  CHECK(parse_error(gpt(8, "\"kind\":\"3d\",\"pp\":2,\"zero_stage\":3"))
            .find("ZeRO stage 3 shards gradients per micro-batch, which pipeline parallelism "
                  "(pp 2) does not support") != std::string::npos);
  CHECK(parse_error(gpt(8, "\"kind\":\"fsdp\",\"pp\":2")).find("has no pp dimension") !=
        std::string::npos);
  CHECK(parse_error(gpt(8, kFsdp2 + ",\"pp\":2")).empty());
}

TEST_CASE("Megatron: distributed_optimizer is ZeRO-1, megatron_fsdp gathers every block twice",
          "[strategies][fsdp2]") {
  // distributed_optimizer: true lowers exactly as zero_stage 1.
  const Program dopt = lowered(gpt(8, "\"kind\":\"3d\",\"distributed_optimizer\":true"));
  const Program z1 = lowered(gpt(8, "\"kind\":\"3d\",\"zero_stage\":1"));
  REQUIRE(dopt.ops.size() == z1.ops.size());
  for (std::size_t k = 0; k < z1.ops.size(); ++k)
    CHECK(dopt.name_of(dopt.ops[k]) == z1.name_of(z1.ops[k]));
  // Megatron-FSDP: every unit resharded after forward (root and last block too): 5 + 5 gathers;
  // gradients reduced in the main-grad dtype (bf16 recipe: fp32, 4 B); the state as ZeRO-3:
  // 18 x ceil(Psi / 8).
  const Program mf =
      lowered(gpt(8, "\"kind\":\"3d\",\"distributed_optimizer\":true,\"megatron_fsdp\":true"));
  CHECK(named(mf, 0, kAg).size() == 10);
  CHECK(count_bytes(named(mf, 0, kRs), 4 * kBlock) == 4);
  CHECK(named(mf, 0, "model parameters").front()->bytes == 10459904LL * 2);
}

// [SECTION] Activation checkpointing policies -----------------------------------------------------

TEST_CASE("recompute policies: stored bytes per block, torchtitan's op and every-k policies",
          "[strategies][recompute]") {
  // 2-byte elements, s = 512, h = 1024, a = 16: sh = 524,288, 5as/h = 40, f = 4h.
  // selective_op keeps the block input (ln_1's 2sh), QKV's output (3 e sh = 6sh) and the MLP's
  // first GEMM's (e sf = 8sh): 16 sh = 8,388,608 B per block per sample.
  // full every 2 over 4 blocks checkpoints blocks 1 and 3 (2sh each) and keeps blocks 0 and 2
  // whole (sh (34 + 40) each): 152 sh = 79,691,776 B.
  const Scenario s = parse(gpt(1, "\"kind\":\"3d\""));
  const Segment one{1, 14}, blocks{1, 53};  // embedding = layer 0; 13 layers per block
  CHECK(stored_activation_bytes_per_sample(s.model, one, 1, false, RecomputeMode::kSelectiveOp) ==
        8388608.0);
  CHECK(stored_activation_bytes_per_sample(s.model, blocks, 1, false, RecomputeMode::kFull, 2) ==
        79691776.0);
  // k = 1 is today's full recompute: 4 x 2sh.
  CHECK(stored_activation_bytes_per_sample(s.model, blocks, 1, false, RecomputeMode::kFull, 1) ==
        4.0 * 2 * 524288);
  CHECK(block_checkpointed(1, 2));
  CHECK_FALSE(block_checkpointed(0, 2));
}

TEST_CASE("recompute policies: re-run kernels, FLOPs and the recomputed block",
          "[strategies][recompute]") {
  // One GPU, b = 8, s = 512, h = 1024, a = 16, f = 4h.
  const double s = 512, h = 1024, a = 16, f = 4 * h, b = 8, sh = s * h, sf = s * f, as2 = a * s * s;
  // selective_op re-runs per block all but QKV and mlp.fc: ln_1 5sh, scores 2s^2h, softmax 5as^2,
  // dropout as^2, av 2s^2h, proj 2sh^2, residual 3sh, ln_2 5sh, gelu 8sf, mlp.proj 2sfh,
  // residual 3sh: 11 kernels per block.
  const double per_block = 5 * sh + 2 * s * sh + 5 * as2 + as2 + 2 * s * sh + 2 * sh * h + 3 * sh +
                           5 * sh + 8 * sf + 2 * sf * h + 3 * sh;
  const Program p = lowered(gpt(1, "\"kind\":\"3d\",\"recompute\":\"selective_op\""));
  double flops = 0;
  int kernels = 0;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kCompute || op.phase != Phase::kRecompute) continue;
    ++kernels;
    flops += op.flops;
  }
  CHECK(kernels == 4 * 11);
  CHECK(flops == Approx(4 * b * per_block).epsilon(1e-12));
  // What the block's backward needs beyond what was kept: sh (34 + 40) - 16 sh = 58 sh per
  // sample, 8 x 58 x 524,288 = 243,269,632 B, allocated once per block.
  const auto rb = named(p, 0, "recomputed block");
  REQUIRE(rb.size() == 8);  // 4 allocations and 4 frees
  CHECK(rb.front()->bytes == 243269632);
  // Hardware FLOPs: model + B l (4 s^2 h + 2 s h^2 + 2 s h f).
  const Scenario sc = parse(gpt(1, "\"kind\":\"3d\",\"recompute\":\"selective_op\""));
  CHECK(hardware_flops_per_step(sc) ==
        Approx(model_flops_per_step(sc) + b * 4 * (4 * s * sh + 2 * sh * h + 2 * sh * f)));
  // full every 2: blocks 1 and 3 re-run their 13 kernels: 26; + B floor(4/2) (24 s h^2 + 4 s^2 h).
  const std::string every2 = gpt(1, "\"kind\":\"3d\",\"recompute\":\"full\",\"recompute_every\":2");
  int full_kernels = 0;
  for (const Op& op : lowered(every2).ops)
    full_kernels += op.kind == OpKind::kCompute && op.phase == Phase::kRecompute ? 1 : 0;
  CHECK(full_kernels == 26);
  const Scenario s2 = parse(every2);
  CHECK(hardware_flops_per_step(s2) ==
        Approx(model_flops_per_step(s2) + b * 2 * (24 * sh * h + 4 * s * sh)));
}

TEST_CASE("recompute policies: activation peaks none > every-2 > selective_op > full",
          "[strategies][recompute]") {
  // Kept per sample over the 4 blocks: none 4 x 74sh = 296sh; full every 2 152sh; selective_op
  // 4 x 16sh = 64sh; full 8sh. The activation peak follows the order (the recomputed block adds
  // at most one block's 74sh).
  auto act_peak = [](const std::string& mode) {
    const Run run = simulate(gpt(1, "\"kind\":\"3d\"," + mode));
    const MemoryReport rep = memory_timeline(run.p, run.r.timings, run.s.cluster);
    Bytes peak = 0;
    for (const MemorySample& smp : rep.gpus.front().samples)
      peak = std::max(peak, smp.by_category[static_cast<std::size_t>(MemCategory::kActivations)]);
    return peak;
  };
  const Bytes none = act_peak("\"recompute\":\"none\"");
  const Bytes every2 = act_peak("\"recompute\":\"full\",\"recompute_every\":2");
  const Bytes op = act_peak("\"recompute\":\"selective_op\"");
  const Bytes full = act_peak("\"recompute\":\"full\"");
  CHECK(none > every2);
  CHECK(every2 > op);
  CHECK(op > full);
  // selective_op against none: (296 - 64) sh x 8 kept less, 58 sh x 8 recomputed back at the
  // peak (the first backward block): (232 - 58) x 524,288 x 8 = 729,808,896 B lower at most.
  CHECK(none - op <= 729808896);
}
