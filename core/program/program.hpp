// Program: the lowered form of a Scenario and the contract between lowering and the executors.
// Both the simulator (backends/sim) and the CUDA executor (backends/cuda) run the same Program.
//
// Execution semantics (docs/program.md):
//  * Ops are listed in `ops` in the order their host thread issues them; a thread issues its ops
//    one after another. Issuing costs python_ns (GIL held, when the process has a GIL) then
//    dispatch_ns (GIL released); both need a CPU core of the node.
//  * An op with a GPU stream is enqueued when issued and runs on the GPU when (a) the previous op
//    of its stream finished, (b) launch latency after its issue passed, (c) its kStreamWaits deps
//    finished. A HostWork/Marker op runs on the host thread itself.
//  * A kHostWaits dep blocks the issuing thread before issue until the dep finished (a
//    synchronisation, a thread join, a batch handed over by a data-loader worker).
//  * The ops of one collective instance (one per participating GPU) transfer data only once all
//    of them have started; each GPU's kernel occupies its stream from its own start to the end.
//  * Alloc/Free change a GPU's allocated bytes when they run on their stream (stream-ordered, as
//    cudaMallocAsync/cudaFreeAsync); they take no time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/program/string_pool.hpp"
#include "core/scenario/scenario.hpp"
#include "core/units.hpp"

namespace csim::core {

using OpId = std::int32_t;
inline constexpr OpId kNoOp = -1;

enum class OpKind : std::uint8_t {
  kCompute,
  kCopy,
  kCollective,
  kHostWork,
  kMarker,
  kAlloc,
  kFree
};
const char* to_string(OpKind k);

enum class CopyKind : std::uint8_t { kH2DPinned, kH2DPageable, kD2H, kD2D, kPeer };
const char* to_string(CopyKind k);

enum class CollectiveKind : std::uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kScatter,
  kGather,
  kAllToAll,
  kSendRecv
};
const char* to_string(CollectiveKind k);

// CollectiveAlgo and NcclProto: core/scenario/scenario.hpp (the scenario's "nccl" object forces
// them).

enum class MemCategory : std::uint8_t {
  kParams,
  kGrads,
  kOptimizer,
  kActivations,
  kBuffers,
  kGatheredOutputs,
  kCommBuffers,
  kWorkspace,
  kAutogradGraph  // a graph kept alive across steps (training.leaks.loss_as_tensor, docs/memory.md)
};
inline constexpr int kNumMemCategories = 9;
const char* to_string(MemCategory c);

enum class StreamRole : std::uint8_t { kCompute, kComm, kCopy };
const char* to_string(StreamRole r);

enum class DepKind : std::uint8_t { kStreamWaits, kHostWaits };

// What part of a training step an op belongs to (Op::phase; the trace's "phase" arg,
// docs/trace-format.md). One table gives every value its spelling (to_string / parse_phase).
enum class Phase : std::uint8_t {
  kNone,   // "": ops built by hand without one
  kSetup,  // step 0: parameters, buffers, the process group
  kData,   // the data loader and the input copy
  kForward,
  kBackward,
  kRecompute,  // a forward re-run right before the backward that needs it
  kLoss,
  kOptimizer,
  kSync,           // loss.item(), the step's end
  kMemory,         // allocations, frees, empty_cache()
  kScatter,        // DataParallel: inputs scattered to the replicas
  kReplicate,      // DataParallel: the module broadcast to the replicas
  kParallelApply,  // DataParallel: the replica threads
  kGather,         // DataParallel: outputs gathered on the output device
  kReduce,         // DataParallel: gradients reduced onto device 0
  kCalibration,    // calibration micro-programs (calibration/)
};
inline constexpr int kNumPhases = 16;
const char* to_string(Phase p);
// The Phase spelled `s` (to_string's inverse); false when none is.
bool parse_phase(std::string_view s, Phase* out);

struct Dep {
  OpId op = kNoOp;
  DepKind kind = DepKind::kStreamWaits;
};

struct ProcessDesc {
  int id = 0;
  int node = 0;
  std::string name;     // "python (rank 0)", "dataloader worker 3 (rank 1)"
  bool has_gil = true;  // Python with a GIL (false: C++ or free-threaded)
};

struct ThreadDesc {
  int id = 0;
  int process = 0;
  int gpu = 0;       // GPU this thread drives; its events appear under that GPU in traces
  std::string name;  // "main", "replica 2", "autograd device 1", "dataloader worker 0"
};

struct StreamDesc {
  int id = 0;
  int gpu = 0;  // global GPU index
  StreamRole role = StreamRole::kCompute;
  std::string name;  // "compute", "nccl", "copy"
};

struct CommGroup {
  int id = 0;
  std::vector<int> gpus;  // global GPU indices, in rank order within the group
  std::string name;       // "dp", "world", "data_parallel"
  // An all-to-all's traffic over this group when it is not NCCL's uniform one (S / p from every
  // member to every member): member a sends S x a2a_shares[a p + c] to member c, S the op's
  // bytes (DeepEP's pattern: core/lowering/deepep_pattern.hpp; docs/cost-model.md, "Weighted
  // all-to-all"). Empty: uniform.
  std::vector<double> a2a_shares;
  // SMs a communication kernel of this group holds while it runs; -1: the GPU's nccl_sms (NCCL
  // collectives; DeepEP's kernels hold strategy.deepep_sms: docs/cost-model.md, "Resource
  // sharing").
  int comm_sms = -1;
};

// The fields are ordered to pack (168 bytes): lowering writes and the block path reads hundreds of
// thousands of ops, so the op's size is their cost (docs/block-eval.md, "Speed").
struct Op {
  OpId id = kNoOp;
  int thread = 0;   // issuing host thread
  int stream = -1;  // GPU stream; -1 for kHostWork / kMarker
  int gpu = 0;      // GPU it runs on (kHostWork: GPU whose thread runs it)
  int step = 0;     // training step (1-based); 0 = setup
  OpKind kind = OpKind::kCompute;
  Phase phase = Phase::kNone;                     // annotation
  ComputeKind compute_kind = ComputeKind::kGemm;  // kCompute
  Dtype dtype = Dtype::kFp32;                     // kCompute; kCollective: the element type
  NameId name;             // in Program::names: "fc.fwd", "bucket 0 all_reduce", "scatter[2]"
  TimeNs python_ns = 0;    // host time holding the GIL
  TimeNs dispatch_ns = 0;  // host time without the GIL (dispatch + launch call)
  std::vector<Dep> deps;

  // kCompute
  double flops = 0;  // floating-point operations
  // > 0: the fraction of peak this kernel reaches at scale, replacing the kind curve's
  // max_efficiency (a fused attention kernel's own figure: docs/attention.md, "Efficiency");
  // 0 = the GPU's curve for compute_kind.
  double max_efficiency = 0;
  // A GEMM's shape and which of its products the op runs (docs/cost-model.md, "GEMM shape");
  // gemm.m == 0: no shape, the kind curve applies.
  GemmShape gemm;
  // kCompute: bytes of memory traffic; kCopy / kCollective: payload bytes per GPU (the buffer
  // size, as nccl-tests' "size"); kAlloc / kFree: bytes allocated or released
  Bytes bytes = 0;
  GemmPass gemm_pass = GemmPass::kForward;                 // kCompute with a GEMM shape
  CopyKind copy_kind = CopyKind::kPeer;                    // kCopy
  CollectiveKind collective = CollectiveKind::kAllReduce;  // kCollective
  CollectiveAlgo algo = CollectiveAlgo::kAuto;             // kCollective

  // kCopy
  int peer_gpu = -1;  // kPeer / kD2D: the source GPU (destination is `gpu`)

  // kCollective
  int group = -1;     // CommGroup id
  int root = -1;      // global GPU index for rooted collectives
  int instance = -1;  // ops with the same instance form one collective

  // kAlloc / kFree
  MemCategory mem_category = MemCategory::kActivations;
  // kFree: the framework called record_stream on the block for the free's stream (DeepSpeed's
  // free_param, FSDP1's _free_unsharded_flat_param and _free_low_precision_sharded_param): when
  // that stream is not the allocation's, the caching allocator reuses the block only once the
  // free has run there (docs/memory.md, "Allocation backpressure"). False: the block is reusable
  // when the host frees it.
  bool record_stream = false;

  // When >= 0, the op occupies its stream for exactly this long instead of being costed: a
  // stand-in for work that needs GPUs outside the Program (a collective or a peer copy, with no
  // group or peer; core/program/program_slice.hpp), or a kernel, copy or collective replayed from
  // a profiler trace at its measured duration (docs/replay.md, "Durations").
  TimeNs fixed_ns = -1;

  // annotations (and `phase`, above)
  std::int64_t batch = -1;  // samples this op works on (forward ops: the replica's share)
};
static_assert(sizeof(Op) <= 168, "Op packs into 168 bytes (field order above)");

// The SMs `op`'s kernel holds (a collective or send/recv on `group`, null for a stand-in without
// a group): the group's comm_sms, else
// the GPU's nccl_sms, a send/recv at most NCCL's 2 channels per peer (docs/cost-model.md,
// "Resource sharing").
int comm_kernel_sms(const GpuSpec& gpu, const CommGroup* group, const Op& op);

// Rank symmetry (docs/program.md, "Rank symmetry"). When enabled, the Program holds ops for
// representative GPUs only; every other active GPU is the mirror image of one of them under one of
// `images` and runs the same ops at the same times. Collectives and copies still move the whole
// cluster's traffic: an executor starts each transfer's mirror images too. Empty: every active GPU
// has its own ops (full fidelity).
struct RankSymmetry {
  // images[m][g]: the GPU that GPU g becomes under mirror m; images[0] is the identity; -1 for GPUs
  // the program does not use. The mirrors form a group (closed under composition).
  std::vector<std::vector<int>> images;
  // Per GPU: 1 + the number of GPUs it stands for (a representative), 0 for a mirrored or unused
  // GPU. Without symmetry every active GPU counts 1.
  std::vector<int> weight_of_gpu;
  bool enabled() const { return !images.empty(); }
};

struct Program {
  std::string strategy_label;  // "data_parallel (4 GPUs)", "ddp (what-if: thread launcher)"
  int world_gpus = 0;          // GPUs in the cluster
  int gpus_per_node = 1;
  std::vector<int> active_gpus;  // GPUs the program uses
  int steps = 0;
  std::int64_t samples_per_step = 0;
  std::vector<ProcessDesc> processes;
  std::vector<ThreadDesc> threads;
  std::vector<StreamDesc> streams;
  std::vector<CommGroup> groups;
  std::vector<Op> ops;  // in issue order per thread
  StringPool names;     // the ops' names (Op::name; docs/program.md, "Names")
  std::vector<std::string> warnings;
  RankSymmetry symmetry;  // empty unless the lowering collapsed mirror-image ranks
  // The processes' caching allocator maps pages into growing segments
  // (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; training.allocator.expandable_segments,
  // docs/memory.md): read by the caching-allocator model (core/program/caching_allocator.hpp).
  bool expandable_segments = false;

  int collective_instances = 0;     // number of distinct Op::instance values
  double model_flops_per_step = 0;  // MFU numerator, all GPUs (core/model/flops.hpp)
  double hardware_flops_per_step =
      0;  // HFU numerator: model FLOPs + recompute (core/model/flops.hpp)

  // An op's name as text (docs/program.md, "Names"): the one accessor every reader uses, so a
  // structured name (a pattern and its micro-batch field) reads exactly as the text it stands for.
  std::string name_of(const Op& op) const { return names.str(op.name); }
  std::string name_of(OpId id) const { return names.str(ops[static_cast<std::size_t>(id)].name); }
  // The same text appended to `out` (a writer that reuses one buffer allocates nothing per op).
  void append_name(const Op& op, std::string& out) const { names.append(op.name, out); }
};

// Structural checks (deps point backwards or to other threads, streams exist, collective instances
// have one op per group member...). Returns an empty string when valid, else the first problem.
std::string validate_program(const Program& p);

}  // namespace csim::core
