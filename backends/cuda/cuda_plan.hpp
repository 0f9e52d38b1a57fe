// What the CUDA runtime (cuda_runtime.cpp) prepares at open, computed from the Program alone: the
// GPU -> CUDA device map, the size of every buffer per device, the square GEMMs that stand in for
// compute ops, the NCCL communicators needed, and the collective ops that one host thread issues
// for several GPUs. No CUDA call here, so all of it is unit-tested on machines without a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/program.hpp"
#include "core/units.hpp"

namespace csim::cuda {

// Largest single buffer (device or host) the runtime allocates. An op that moves more repeats the
// work in chunks of this size, so the bytes it moves stay right. 256 MiB copies and NCCL
// collectives already run at full bandwidth, and GEMMs on 256 MiB operands (fp16: 11584^3) at full
// throughput, while what the runtime takes from the GPU for its own buffers (3 GEMM operands + 2
// scratch regions, at most 1.25 GiB) stays small next to the Program's own allocations.
inline constexpr Bytes kMaxBufferBytes = 256 * kMiB;

// GEMM edge sizes are multiples of this (tensor-core tiles divide it; no ragged edge tiles).
inline constexpr std::int64_t kGemmAlign = 64;

// NCCL buffers hold float32 (ncclFloat): the count of a collective is bytes / 4.
inline constexpr Bytes kCollectiveElemBytes = 4;

// Compute ops the runtime runs as a cuBLAS GEMM: GEMM, attention and convolution with FLOPs. The
// others (element-wise, or no FLOPs) move their bytes with a device copy.
bool is_gemm_like(const core::Op& op);

// Bytes of one GEMM operand element: 2 for fp16 / bf16, 4 for fp32 and tf32 (stored as fp32).
int gemm_elem_bytes(core::Dtype d);

// Largest multiple of kGemmAlign whose square matrix of `elem_bytes` elements fits in `cap_bytes`
// (at least kGemmAlign).
std::int64_t max_gemm_size(int elem_bytes, Bytes cap_bytes);

// Edge sizes n of the square GEMMs (2·n³ FLOPs each) that stand in for `flops`: one GEMM of
// n = cbrt(flops / 2) rounded to kGemmAlign (at least kGemmAlign) when it fits `max_size`;
// otherwise as many max_size GEMMs as fit in `flops`, then one GEMM for the rest (omitted when the
// rest rounds below kGemmAlign). Empty for flops <= 0.
std::vector<std::int64_t> plan_gemm_sizes(double flops, std::int64_t max_size);

// Number of chunks of at most `chunk_bytes` that move `total` bytes (0 for nothing to move).
inline std::int64_t chunk_count(Bytes total, Bytes chunk_bytes) {
  return total <= 0 ? 0 : (total + chunk_bytes - 1) / chunk_bytes;
}

struct DevicePlan {
  int gpu = -1;                    // global GPU index this CUDA device runs
  Bytes gemm_operand_bytes = 0;    // each of the GEMM operands A, B, C
  Bytes scratch_region_bytes = 0;  // each of the two scratch regions (source, destination)
  Bytes pinned_host_bytes = 0;     // H2D pinned / D2H staging buffer
  Bytes pageable_host_bytes = 0;   // H2D pageable source
  // Largest sum of live kAlloc bytes, walking the ops in program order (frees matched as the
  // runtime matches them): the memory pool is grown to it at open. Program order interleaves
  // threads, so this approximates the peak the run reaches.
  Bytes peak_alloc_bytes = 0;
  std::set<std::pair<core::Dtype, std::int64_t>> gemm_shapes;  // distinct (dtype, n), for warm-up
};

// A collective group with ops in this process: all its members are local GPUs.
struct GroupPlan {
  int group = -1;
  std::vector<int> devices;                      // local device of each rank (group.gpus order)
  std::map<core::CollectiveKind, Bytes> chunks;  // largest chunk of each kind, for warm-up
};

// Collective ops of one instance that one host thread issues for several GPUs (DataParallel's
// broadcast_coalesced from the main thread). NCCL may block inside a call until the other ranks
// arrive, so one thread must issue them together between ncclGroupStart and ncclGroupEnd.
struct CollectiveBatch {
  int instance = -1;
  std::vector<core::OpId> ops;  // in program order; the last one issues the group
};

struct ProcessPlan {
  std::vector<int> gpus;            // gpus[i]: the global GPU that CUDA device i runs
  std::vector<int> device_of_gpu;   // by global GPU: its CUDA device here, -1 outside the process
  std::vector<DevicePlan> devices;  // by CUDA device
  std::vector<char> local_op;       // by op: 1 when it runs on a stream of this process
  std::vector<char> local_stream;   // by stream: 1 when its GPU is in this process
  std::vector<char> gemm_stream;    // by stream: 1 when it runs GEMM-like ops (gets cuBLAS)
  std::vector<GroupPlan> groups;    // groups with collective ops here
  std::vector<int> group_plan_of;   // by group id: index in `groups`, -1 if unused here
  std::vector<CollectiveBatch> batches;
  std::vector<int> batch_of_op;  // by op: index in `batches`, -1 when issued alone
  int local_ops = 0;
};

// Plans a process that drives `gpus` (global indices; CUDA device i runs gpus[i]) on a machine
// with `device_count` CUDA devices. Throws real::DeviceUnavailable when it cannot run here: more
// GPUs than devices, a GPU listed twice, a collective group or peer copy reaching a GPU of another
// process (multi-process launch is not implemented yet), or a rank-symmetric Program (its mirror
// GPUs have no ops to run).
ProcessPlan plan_process(const core::Program& program, const std::vector<int>& gpus,
                         int device_count);

// Rank of `gpu` in `group` (its position in group.gpus), -1 when absent.
int rank_in_group(const core::CommGroup& group, int gpu);

}  // namespace csim::cuda
