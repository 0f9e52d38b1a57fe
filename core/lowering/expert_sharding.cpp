// A sharded unit's parts by sharding group (expert_sharding.hpp; docs/program.md, "FSDP2 and
// ZeRO-2 with expert parallelism").
#include "core/lowering/expert_sharding.hpp"

#include <string>

namespace csim::core::hybrid {

std::vector<UnitPart> unit_parts(const RankState& r, std::int64_t params,
                                 std::int64_t expert_params, int dense_group) {
  std::vector<UnitPart> parts{{params - expert_params, dense_group, false}};
  if (expert_params > 0) parts.push_back({expert_params, r.group[ParallelDim::kEdp], true});
  return parts;
}

std::int64_t sharded_params(const std::vector<UnitPart>& parts) {
  std::int64_t n = 0;
  for (const UnitPart& p : parts)
    if (p.group >= 0) n += p.params;
  return n;
}

OpId part_collectives(Emitter& e, RankState& r, const std::vector<UnitPart>& parts,
                      const char* label, CollectiveKind k, const char* what, Bytes bytes_per_param,
                      Dtype dtype, std::vector<Dep> deps, StepPhase phase) {
  OpId last = kNoOp;
  for (const UnitPart& p : parts) {
    if (p.group < 0 || p.params == 0) continue;
    if (last != kNoOp) deps = {{last, DepKind::kStreamWaits}};
    const std::string dim = p.expert ? std::string(label) + " edp" : std::string(label);
    last = e.coll(r, r.stream[ParallelDim::kDp], op_names::collective(dim.c_str(), k, what), k,
                  p.group, p.params * bytes_per_param, std::move(deps), phase);
    e.builder().set_dtype(last, dtype);
    deps.clear();
  }
  return last;
}

}  // namespace csim::core::hybrid
