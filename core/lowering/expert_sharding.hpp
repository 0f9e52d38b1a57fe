// A sharded unit's parameters split by the group that shards them (docs/program.md, "FSDP2 and
// ZeRO-2 with expert parallelism"): under expert parallelism the routed experts' over the
// expert-data-parallel group, the rest over the data-parallel (FSDP shard) group. Internal to
// core/lowering; used by the FSDP2 piece (fsdp2.cpp) and ZeRO-2's reduce-scatters (zero_fsdp.cpp).
//
//   torchtitan (torchtitan/distributed/fsdp.py, apply_fsdp_to_decoder, commit b5bcd76c): an MoE
//   block is one fully_shard unit whose shard_placement_fn puts each routed-expert parameter on
//   the edp mesh ("efsdp", torchtitan/distributed/parallel_dims.py, build_mesh: the sparse mesh
//   (pp, dp_replicate, efsdp, ep), efsdp = dp_shard cp tp / ep) and every other parameter on the
//   dense "fsdp" mesh (dp_shard x cp): the unit's all-gather and reduce-scatter run once per mesh.
//   DeepSpeed ZeRO-2 (deepspeed/runtime/zero/stage_1_and_2.py, DeepSpeedZeroOptimizer.__init__):
//   a MoE parameter group's partitions and gradient reduce-scatter use the expert data-parallel
//   group (groups._get_expert_data_parallel_group), the others the data-parallel group.
#pragma once

#include <cstdint>
#include <vector>

#include "core/lowering/hybrid_emitter.hpp"

namespace csim::core::hybrid {

struct UnitPart {
  std::int64_t params = 0;  // this rank's parameters of the unit in the part (after tp and ep)
  int group = -1;           // the group that shards them (-1: not sharded, one rank)
  bool expert = false;      // the routed experts' part (over edp)
};

// The unit's dense part (params - expert_params over `dense_group`), then its experts' part
// (expert_params over the rank's edp group) when it has any.
std::vector<UnitPart> unit_parts(const RankState& r, std::int64_t params,
                                 std::int64_t expert_params, int dense_group);
// The parameters of the parts that are sharded (whose gathers and reductions run).
std::int64_t sharded_params(const std::vector<UnitPart>& parts);

// One collective per sharded part with parameters, on the rank's dp stream, in order; each named
// "<label> <kind> <what>", the experts' "<label> edp <kind> <what>"; `bytes_per_param` each
// element's bytes; the first waits for `deps`, the next for the previous (the stream orders
// them). Returns the last (kNoOp: none).
OpId part_collectives(Emitter& e, RankState& r, const std::vector<UnitPart>& parts,
                      const char* label, CollectiveKind k, const char* what, Bytes bytes_per_param,
                      Dtype dtype, std::vector<Dep> deps, StepPhase phase);

}  // namespace csim::core::hybrid
