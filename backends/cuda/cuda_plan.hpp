// What the CUDA runtime (cuda_runtime.cpp) prepares at open, computed from the Program alone: the
// GPU -> CUDA device map, the size of every buffer per device, the GEMMs that stand in for compute
// ops (gemm_proxy.hpp), the NCCL communicators needed (and which NCCL ranks this process holds in
// each), and the collective ops that one host thread issues for several GPUs. No CUDA call here, so
// all of it is unit-tested on machines without a GPU.
//
// Slots: the GPUs a process drives are numbered 0..n-1 in the order open() was given them (its
// `gpus`); per-device state is indexed by slot. cuda_devices() says which CUDA device each slot
// runs on, which need not be the slot (a process of a multi-process run that drives only GPU 3 of
// a node runs on CUDA device 3).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "backends/cuda/gemm_proxy.hpp"
#include "core/program/program.hpp"
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

// The GEMMs that stand in for a compute op (gemm_proxy.hpp), at its dtype's element size and the
// buffer cap.
std::vector<GemmShape> plan_op_gemms(const core::Op& op);

// NCCL calls with a root rank: broadcast, reduce, scatter, gather.
bool is_rooted(core::CollectiveKind kind);

// Number of chunks of at most `chunk_bytes` that move `total` bytes (0 for nothing to move).
inline std::int64_t chunk_count(Bytes total, Bytes chunk_bytes) {
  return total <= 0 ? 0 : (total + chunk_bytes - 1) / chunk_bytes;
}

struct DevicePlan {
  int gpu = -1;                    // global GPU index this slot runs
  Bytes gemm_operand_bytes = 0;    // each of the GEMM operands A, B, C
  Bytes scratch_region_bytes = 0;  // each of the two scratch regions (source, destination)
  Bytes pinned_host_bytes = 0;     // H2D pinned / D2H staging buffer
  Bytes pageable_host_bytes = 0;   // H2D pageable source
  // Largest sum of live kAlloc bytes, walking the ops in program order (frees matched as the
  // runtime matches them): the memory pool is grown to it at open. Program order interleaves
  // threads, so this approximates the peak the run reaches.
  Bytes peak_alloc_bytes = 0;
  std::set<std::pair<core::Dtype, GemmShape>> gemm_shapes;  // distinct ones, for warm-up
  // Compute ops whose proxy GEMMs execute more than 1 % off the op's FLOPs (ops under 409,600
  // FLOPs: k rounds to a few, or up to 1), and the largest such ratio executed / op FLOPs.
  int gemm_ops_off = 0;
  double gemm_worst_ratio = 1.0;
};

// A collective group with ops in this process, as NCCL sees it: NCCL rank r is group.gpus[r]
// (nranks = the group's size), and this process holds the ranks of the members it drives, one
// communicator each. A group with every member here gets its communicators from ncclCommInitAll;
// one with members in other processes (spans_processes) from ncclCommInitRank with a unique id
// that every process of the group shares (CudaOptions::shared_nccl_id).
//   group.gpus = {0, 1, 2, 3}, this process drives GPUs 2 and 3 in slots 0 and 1:
//   nranks 4, ranks {2, 3}, slots {0, 1}, spans_processes
struct GroupPlan {
  int group = -1;                // Program::groups index
  int nranks = 0;                // the group's size, over every process
  std::vector<int> ranks;        // NCCL rank of each member driven here, ascending
  std::vector<int> slots;        // its slot (parallel to `ranks`)
  bool spans_processes = false;  // some member is driven by another process
  // Largest chunk of each kind over the ops of every member, this process's or not: every process
  // of the group warms up the same collectives in the same order, as NCCL needs.
  std::map<core::CollectiveKind, Bytes> chunks;
  // The NCCL root ranks the rooted kinds (is_rooted) use, over every member's ops likewise (an op
  // without a root uses rank 0): the warm-up runs each kind once per root, so a scatter or gather
  // from rank 3 does not set up its connections inside the timed run.
  std::map<core::CollectiveKind, std::set<int>> roots;

  // Index of NCCL rank `rank` in `ranks` (= in the runtime's communicators), -1 when another
  // process holds it.
  int local_index(int rank) const;
};

// Collective ops of one instance that one host thread issues for several GPUs (DataParallel's
// broadcast_coalesced from the main thread). NCCL may block inside a call until the other ranks
// arrive, so one thread must issue them together between ncclGroupStart and ncclGroupEnd.
struct CollectiveBatch {
  int instance = -1;
  std::vector<core::OpId> ops;  // in program order; the last one issues the group
};

struct ProcessPlan {
  std::vector<int> gpus;            // gpus[slot]: the global GPU that slot runs
  std::vector<int> cuda_device;     // cuda_device[slot]: its CUDA device (cuda_devices())
  std::vector<int> slot_of_gpu;     // by global GPU: its slot here, -1 outside the process
  std::vector<DevicePlan> devices;  // by slot
  std::vector<char> local_op;       // by op: 1 when it runs on a stream of this process
  std::vector<char> local_stream;   // by stream: 1 when its GPU is in this process
  std::vector<char> gemm_stream;    // by stream: 1 when it runs GEMM-like ops (gets cuBLAS)
  std::vector<char> delay_stream;   // by stream: 1 when it holds ops simulated elsewhere
  std::vector<GroupPlan> groups;    // groups with collective ops here, by ascending group id
  std::vector<int> group_plan_of;   // by group id: index in `groups`, -1 if unused here
  std::vector<CollectiveBatch> batches;
  std::vector<int> batch_of_op;  // by op: index in `batches`, -1 when issued alone
  int local_ops = 0;
};

// The CUDA device of each GPU a process drives (result[i] for gpus[i]), on a machine with
// `device_count` devices, for a cluster of `cluster_gpus` GPUs in nodes of `gpus_per_node`:
//   - the whole cluster fits on this machine (cluster_gpus <= device_count): device = GPU index,
//     so the processes of a run on one machine never share a device;
//   - else, the GPUs are all on one node: device = GPU % gpus_per_node (one machine per node,
//     as mpirun or torchrun start them);
//   - else: device i for gpus[i] (one process drives GPUs of several nodes on one machine).
// Throws BackendUnavailable when this machine has too few devices, naming the device needed
// and the count found.
std::vector<int> cuda_devices(const std::vector<int>& gpus, int cluster_gpus, int gpus_per_node,
                              int device_count);

// `group` as NCCL ranks of this process: slot_of_gpu maps a global GPU to its slot here (-1, or
// past the end: driven elsewhere). Chunks are left empty. Throws BackendUnavailable when the
// group lists a GPU twice or has no member here.
GroupPlan plan_group(const core::CommGroup& group, const std::vector<int>& slot_of_gpu);

// Plans a process that drives `gpus` (global indices, in slot order) on a machine with
// `device_count` CUDA devices. Collective groups may span processes (GroupPlan::spans_processes)
// when `shared_nccl_ids` (the launcher shares NCCL ids: CudaOptions::shared_nccl_id). Throws
// BackendUnavailable when it cannot run here: too few devices (cuda_devices), a GPU listed
// twice, a group reaching another process without shared ids, a peer copy from a GPU of another
// process, or a rank-symmetric Program (its mirror GPUs have no ops to run).
ProcessPlan plan_process(const core::Program& program, const std::vector<int>& gpus,
                         int device_count, bool shared_nccl_ids = false);

// Rank of `gpu` in `group` (its position in group.gpus), -1 when absent.
int rank_in_group(const core::CommGroup& group, int gpu);

}  // namespace csim::cuda
