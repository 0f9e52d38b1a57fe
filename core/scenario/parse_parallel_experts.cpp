// Expert parallelism's keys (core/scenario/parse_parallel.hpp; docs/scenario.md, "strategy:
// expert parallelism"): strategy.ep splits each MoE block's routed experts over ep ranks, folded
// into the dense layers' tp x cp x dp ranks as Megatron-Core's MoE Parallel Folding does (Liu et
// al. 2025): the expert layers' grid is etp x ep x edp x pp over the same ranks, edp = tp cp dp /
// (etp ep). What is modelled (docs/program.md, "Expert parallel"): etp >= 1 (its own checks in
// parse_parallel_etp.cpp; tp > 1 under sequence parallelism), the kinds whose gradient reduction
// and optimizer sharding the expert-data-parallel groups take over (3d, pipeline and zero, with
// zero_stage <= 2: Megatron's distributed optimizer, DeepSpeed's ZeRO-2), and FSDP2 sharding the
// experts over them (refuse_expert_sharding).
#include <algorithm>

#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

namespace {

const std::vector<std::string> kDispatcherNames = {"alltoall", "allgather", "deepep"};

// The nodes one expert-parallel group spans: its ranks i x stride (i < ep) on the expert grid,
// stride the product of the sizes before ep in rank_order (tp read as etp, dp as edp, cp dropped:
// RankGrid::expert), rank r on GPU r of the strategy's GPUs.
int ep_group_nodes(const ParallelInput& in, const ParallelSpec& ps) {
  int stride = 1;
  for (ParallelDim d : ps.rank_order) {
    if (d == ParallelDim::kEp) break;
    if (d == ParallelDim::kTp) stride *= ps.etp;
    if (d == ParallelDim::kDp) stride *= ps.tp * ps.cp * ps.dp / (ps.etp * ps.ep);
    if (d == ParallelDim::kPp) stride *= ps.pp;
  }
  const int per_node = std::max(1, in.cluster.gpus_per_node);
  int nodes = 0, last = -1;
  for (int i = 0; i < ps.ep; ++i) {
    const int node = i * stride / per_node;
    if (node != last) ++nodes;
    last = node;
  }
  return nodes;
}

// strategy.moe_dispatcher and deepep_sms (docs/scenario.md, "strategy: expert parallelism").
// DeepEP's internode kernels write over RDMA (NVSHMEM over InfiniBand or RoCE with GPUDirect
// RDMA: DeepEP's README, "Requirements"): an EP group spanning nodes needs such NICs.
void read_dispatcher(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  ps.moe_dispatcher = static_cast<MoeDispatcher>(o.choice("moe_dispatcher", kDispatcherNames, 0));
  const int sm_count = in.cluster.gpu.sm_count;
  ps.deepep_sms = static_cast<int>(o.integer("deepep_sms", ps.deepep_sms, 1, 1 << 16));
  if (ps.moe_dispatcher != MoeDispatcher::kDeepEp) {
    if (o.has("deepep_sms"))
      ctx.warn(o.at("deepep_sms"), "changes nothing: strategy.moe_dispatcher is not deepep");
    return;
  }
  if (sm_count > 0 && ps.deepep_sms >= sm_count) {
    ctx.fail(o.at("deepep_sms"),
             "deepep_sms " + std::to_string(ps.deepep_sms) + " leaves no SM of the " +
                 std::to_string(sm_count) + " for compute",
             "give fewer SMs to DeepEP's kernels (DeepSeek-V3 gives 20 of an H800's 132)");
  }
  if (ps.ep <= 1) return;
  const ClusterSpec& c = in.cluster;
  const bool rdma = c.nics_per_node > 0 &&
                    (c.nic.stack == NicStack::kInfiniband || c.nic.stack == NicStack::kRoce);
  const int nodes = ep_group_nodes(in, ps);
  if (nodes > 1 && !rdma) {
    ctx.fail_conflict(
        {o.at("moe_dispatcher"),
         c.nics_per_node > 0 ? "cluster.nic.stack" : "cluster.nics_per_node"},
        "deepep across " + std::to_string(nodes) +
            " nodes needs RDMA NICs (InfiniBand or RoCE), "
            "the cluster has " +
            (c.nics_per_node > 0 ? std::string(to_string(c.nic.stack)) + " NICs" : "no NICs"),
        "keep each expert-parallel group inside one node (ep <= gpus_per_node), or use "
        "moe_dispatcher alltoall (NCCL runs over any network)");
  }
}

// strategy.moe_a2a_overlap (docs/scenario.md; docs/program.md, "MoE all-to-all overlap"). 1f1b
// pairs a steady-state forward with another micro-batch's backward, which needs all-to-alls to
// hide (ep > 1, the alltoall or deepep dispatcher: Megatron-Core's overlap supports those, not
// the allgather one) and a schedule with a steady phase (1F1B or interleaved; pp 1 runs
// Megatron's combined_1f1b_schedule_for_no_pipelining, the same pairing).
void read_a2a_overlap(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  ps.moe_a2a_overlap = static_cast<MoeA2aOverlap>(o.choice("moe_a2a_overlap", {"none", "1f1b"}, 0));
  if (ps.moe_a2a_overlap == MoeA2aOverlap::kNone) return;
  if (ps.ep <= 1) {
    ctx.fail(o.at("moe_a2a_overlap"),
             "moe_a2a_overlap 1f1b needs expert parallelism (strategy.ep > 1): without it there "
             "is no dispatch or combine to overlap",
             "give strategy.ep > 1, or remove moe_a2a_overlap");
  }
  if (ps.moe_dispatcher == MoeDispatcher::kAllGather) {
    ctx.fail_conflict({o.at("moe_a2a_overlap"), o.at("moe_dispatcher")},
                      "moe_a2a_overlap 1f1b with moe_dispatcher allgather is not modelled "
                      "(Megatron-Core overlaps the alltoall and flex/DeepEP dispatchers)",
                      "use moe_dispatcher alltoall or deepep, or moe_a2a_overlap none");
  }
  // Megatron-Core's combined 1F1B; torchtitan's FSDP2 and DeepSpeed's ZeRO-2 run one micro-batch's
  // pass at a time (their expert sharding: refuse_expert_sharding).
  if (ps.fsdp2.enabled || ps.zero_stage == 2) {
    ctx.fail_conflict({o.at("moe_a2a_overlap"), o.at(o.has("zero_stage") ? "zero_stage" : "kind")},
                      "moe_a2a_overlap 1f1b is Megatron-Core's (combined_1f1b); FSDP2 and ZeRO-2 "
                      "do not pair micro-batches",
                      "use kind 3d or pipeline for the overlap, or moe_a2a_overlap none");
  }
  if (ps.pp > 1 && ps.schedule == PipelineSchedule::kGpipe) {
    ctx.fail_conflict({o.at("moe_a2a_overlap"), o.at("schedule")},
                      "moe_a2a_overlap 1f1b pairs the steady 1F1B phase's forward and backward; "
                      "GPipe has no such phase",
                      "use schedule 1f1b or interleaved, or moe_a2a_overlap none");
  }
}

// The sharding frameworks whose expert sharding over the expert-data-parallel ranks is modelled
// (docs/program.md, "Expert parallel", "FSDP2 and ZeRO-2 with expert parallelism"): Megatron's
// (3d, pipeline, zero with zero_stage <= 1: the distributed optimizer), DeepSpeed's ZeRO-2
// (zero_stage 2) and torchtitan's FSDP2 (kind fsdp, fsdp_version 2, without HSDP).
void refuse_expert_sharding(const ParallelInput& in, const ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const std::string ep = "ep " + std::to_string(ps.ep);
  const bool fsdp2 = in.kind == StrategyKind::kFsdp && ps.fsdp2.enabled;
  if (ps.fsdp2.megatron) {
    ctx.fail_conflict({o.at("ep"), o.at("megatron_fsdp")},
                      ep + " with megatron_fsdp is not modelled (Megatron-FSDP's sharding of the "
                           "experts over the expert-data-parallel group)",
                      "use kind fsdp with fsdp_version 2 (torchtitan's FSDP2 shards the experts "
                      "over edp), or distributed_optimizer without megatron_fsdp");
  }
  if (fsdp2 && ps.fsdp2.replicate > 1) {
    ctx.fail_conflict({o.at("ep"), o.at("replicate")},
                      ep + " with HSDP (replicate " + std::to_string(ps.fsdp2.replicate) +
                          ") is not modelled (torchtitan shards the experts over efsdp and "
                          "replicates them over dp_replicate)",
                      "use replicate 1: FSDP2 then shards the experts over all edp ranks");
  }
  if (in.kind == StrategyKind::kZero && ps.zero_stage == 3) {
    ctx.fail_conflict({o.at("ep"), o.at("zero_stage")},
                      ep + " with ZeRO stage 3: DeepSpeed refuses a mixture of experts at stage 3 "
                           "(deepspeed/runtime/engine.py, _configure_zero_optimizer: \"MoE not "
                           "supported with Stage 3\")",
                      "use zero_stage 2 (DeepSpeed-MoE partitions the experts' gradients and "
                      "optimizer state over edp), or kind fsdp with fsdp_version 2");
  }
  const bool kind_ok = in.kind == StrategyKind::k3d || in.kind == StrategyKind::kPipeline ||
                       in.kind == StrategyKind::kZero || fsdp2;
  if (!kind_ok || (ps.zero_stage > 2 && !fsdp2)) {
    ctx.fail_conflict(
        {o.at("ep"), o.at(o.has("zero_stage") ? "zero_stage" : "kind")},
        ep + " under strategy.kind " + to_string(in.kind) +
            (ps.zero_stage > 1 ? " zero_stage " + std::to_string(ps.zero_stage) : std::string()) +
            " is not modelled yet (the experts' sharding over the expert-data-parallel ranks)",
        "use kind 3d or pipeline (Megatron: distributed_optimizer true shards the optimizer "
        "state of the experts over edp), kind zero with zero_stage <= 2, or kind fsdp with "
        "fsdp_version 2");
  }
}

}  // namespace

void validate_experts(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const MoeConfig& moe = in.model.transformer_config.moe;
  ps.ep = static_cast<int>(o.integer("ep", 1, 1, 1 << 16));
  ps.etp = static_cast<int>(o.integer("etp", 1, 1, 1 << 16));
  // tp > 1: the dense layers split by tensor parallelism, the EP group folded over the tp ranks
  // too. Megatron-Core requires sequence parallelism there (arguments.py: "When using MoE and
  // tensor parallelism, sequence parallelism must be used"), so each tp rank routes its own
  // s / tp tokens. With ep 1 the experts must then be split by tp (Megatron's default etp = tp,
  // parse_parallel_etp.cpp); whole experts replicated over the tp ranks are not modelled.
  if (moe.any() && ps.tp > 1 && (!ps.sequence_parallel || (ps.ep <= 1 && ps.etp != ps.tp))) {
    ctx.fail_conflict({o.at(ps.sequence_parallel ? "ep" : "sequence_parallel"), o.at("tp"),
                       "model.transformer.moe"},
                      "tp " + std::to_string(ps.tp) + " with a mixture of experts needs " +
                          (ps.sequence_parallel ? "ep > 1 or etp = tp" : "sequence_parallel true") +
                          ": each tp rank routes its own s / tp tokens, and the experts are "
                          "either spread over an expert-parallel group or split by etp = tp",
                      ps.sequence_parallel
                          ? "give ep > 1 (Megatron-Core's MoE Parallel Folding spreads the "
                            "experts over tp x cp x dp ranks), etp = tp, or use tp 1"
                          : "set sequence_parallel true (Megatron-Core requires it for MoE "
                            "with tp > 1), or use tp 1");
  }
  if (ps.ep == 1) {
    // Without expert parallelism every expert is on every rank: uneven shares change no rank's
    // work (the grouped GEMM's total is the same).
    if (moe.any() && moe.routing.kind != RoutingKind::kBalanced)
      ctx.warn(model_key_path(ctx, "moe.routing"),
               "routing imbalance changes nothing without expert parallelism (strategy.ep is 1)");
    if (moe.any() && moe.capacity_factor > 0)
      ctx.warn(model_key_path(ctx, "moe.capacity_factor"),
               "the capacity applies under expert parallelism only: with strategy.ep 1 every "
               "routed copy is computed (the summary still reports the share a capacity would "
               "drop)");
    read_dispatcher(in, ps);
    read_a2a_overlap(in, ps);
    return;
  }
  if (!moe.any()) {
    ctx.fail(o.at("ep"), "ep " + std::to_string(ps.ep) + " needs a mixture of experts",
             "give model.transformer.moe (or an MoE model.hf_config), or remove strategy.ep");
  }
  refuse_expert_sharding(in, ps);
  if (std::find(ps.rank_order.begin(), ps.rank_order.end(), ParallelDim::kEp) ==
      ps.rank_order.end()) {
    ctx.fail_conflict(
        {o.at("ep"), o.at("rank_order")},
        "strategy.rank_order leaves out ep (strategy.ep is " + std::to_string(ps.ep) + ")",
        "name ep in rank_order, e.g. \"tp-cp-ep-dp-pp\" (Megatron's default)");
  }
  if (moe.experts % ps.ep != 0) {
    ctx.fail_conflict({o.at("ep"), model_key_path(ctx, "moe.experts")},
                      "ep " + std::to_string(ps.ep) + " does not divide the " +
                          std::to_string(moe.experts) + " experts",
                      "use an ep that divides moe.experts, so every rank holds as many experts");
  }
  const int folded = ps.tp * ps.cp * ps.dp;
  if (folded % (ps.ep * ps.etp) != 0) {
    ctx.fail_conflict({o.at("ep"), o.at("dp")},
                      "etp x ep = " + std::to_string(ps.ep * ps.etp) +
                          " does not divide tp x cp x dp = " + std::to_string(folded) +
                          ", the ranks the expert layers fold into",
                      "use an ep dividing tp x cp x dp (the rest is the expert-data-parallel "
                      "size edp)");
  }
  read_dispatcher(in, ps);
  read_a2a_overlap(in, ps);
}

}  // namespace csim::core::parse
