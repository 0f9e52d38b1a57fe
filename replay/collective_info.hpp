// What a collective kernel is, from the CPU ops around its launch (docs/replay.md,
// "Collectives"): its kind, element type, size and group. Read from record_param_comms
// (PyTorch >= 2.1: Collective name, In/Out msg nelems, dtype, Group size, Process Group Ranks /
// Name, Global rank start / stride) where it says them; else inferred from the nccl:<op> and
// c10d::<op> ops' Input Dims and Input type (PyTorch 1.13-2.0, record_shapes=True), the element
// type from the kernel's name, the group size from an all-gather's output / input and otherwise
// the job's world (the default process group).
#pragma once

#include <string>
#include <vector>

#include "core/program/program.hpp"
#include "replay/kineto_tokenizer.hpp"

namespace csim::replay {

enum class SizeSource : std::uint8_t { kNone, kRecordParamComms, kInputDims };
enum class GroupSource : std::uint8_t { kNone, kRead, kAllGatherRatio, kWorld };

struct CollectiveInfo {
  core::CollectiveKind kind = core::CollectiveKind::kAllReduce;
  core::Dtype dtype = core::Dtype::kFp32;
  Bytes bytes = 0;  // the nccl-tests "size" (0: unknown)
  SizeSource size_source = SizeSource::kNone;
  int group_size = -1;  // ranks in the group (-1: unknown)
  GroupSource group_source = GroupSource::kNone;
  std::vector<int> ranks;  // the group's global ranks (empty: unknown)
  std::string group_key;   // one name per process group: "pg 3", "ranks 0,2", "size 8"
};

// `ops`: the CPU ops that cover the launch call (record_param_comms, nccl:*, c10d::* and any
// other), innermost first; `world`: distributedInfo.world_size (-1 when absent).
CollectiveInfo collective_info(const std::vector<const Record*>& ops, const std::string& kernel,
                               int world);

// A CPU op that belongs to a collective's launch (nccl:*, c10d::* and record_param_comms),
// as opposed to the wait for it (c10d::wait, record_param_comms "wait").
bool is_comm_op(const Record& r);
bool is_wait_op(const Record& r);

// "Input Dims" as a list of tensors' shapes ("[[8,1024],[],[3]]" -> {{8,1024},{},{3}}); a tensor
// list or a scalar is an empty shape. Empty on text that is not such a list.
std::vector<std::vector<std::int64_t>> parse_dims(const std::string& json);
// Bytes per element of an "Input type" entry ("float" 4, "c10::BFloat16" 2, "long" 8, ...), or
// of the type an NCCL kernel's name ends with (_float, _f32, _bf16, _int8_t, ...); 0: unknown.
Bytes input_type_bytes(const std::string& type);
Bytes kernel_type_bytes(const std::string& kernel);

}  // namespace csim::replay
