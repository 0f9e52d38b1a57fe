// Out-of-line parts of the scenario data model (core/scenario/scenario.hpp). Formulas:
// docs/scenario.md.
#include "core/scenario/scenario.hpp"

#include <algorithm>

namespace csim::core {

// [SECTION] NCCL spellings (the scenario's "nccl" object) ---------------------------------------

const std::vector<std::string>& collective_algo_names() {
  static const std::vector<std::string> kNames{"auto",         "ring",    "tree",     "nvls",
                                               "hierarchical", "collnet", "nvlstree", "pat"};
  return kNames;
}

const std::vector<std::string>& nccl_proto_names() {
  static const std::vector<std::string> kNames{"auto", "LL", "LL128", "Simple"};
  return kNames;
}

const char* to_string(CollectiveAlgo a) {
  return collective_algo_names()[static_cast<std::size_t>(a)].c_str();
}

const char* to_string(NcclProto p) {
  return nccl_proto_names()[static_cast<std::size_t>(p)].c_str();
}

const char* to_string(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
      return "fp32";
    case Dtype::kTf32:
      return "tf32";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kFp8:
      return "fp8";
  }
  return "?";
}

// Storage size of one element. tf32 is a compute mode of fp32 tensors: stored in 4 bytes.
int dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
      return 4;
    case Dtype::kTf32:
      return 4;
    case Dtype::kFp16:
      return 2;
    case Dtype::kBf16:
      return 2;
    case Dtype::kFp8:
      return 1;
  }
  return 4;
}

const char* to_string(ComputeKind k) {
  switch (k) {
    case ComputeKind::kGemm:
      return "gemm";
    case ComputeKind::kElementwise:
      return "elementwise";
    case ComputeKind::kConv:
      return "conv";
    case ComputeKind::kAttention:
      return "attention";
  }
  return "?";
}

double GpuSpec::peak_flops_per_s(Dtype d) const {
  switch (d) {
    case Dtype::kFp32:
      return peak_fp32_flops_per_s;
    case Dtype::kTf32:
      return peak_tf32_flops_per_s;
    case Dtype::kFp16:
      return peak_fp16_flops_per_s;
    case Dtype::kBf16:
      return peak_bf16_flops_per_s;
    case Dtype::kFp8:
      return peak_fp8_flops_per_s;
  }
  return 0.0;
}

const char* to_string(IntraNodeKind k) {
  switch (k) {
    case IntraNodeKind::kPcie:
      return "pcie";
    case IntraNodeKind::kNvlinkMesh:
      return "nvlink_mesh";
    case IntraNodeKind::kNvswitch:
      return "nvswitch";
  }
  return "?";
}

std::int64_t ModelSpec::total_params() const {
  std::int64_t n = 0;
  for (const LayerSpec& l : layers) n += l.params;
  return n;
}

std::int64_t ModelSpec::active_params() const {
  std::int64_t n = 0;
  for (const LayerSpec& l : layers) n += l.params - l.inactive_params;
  return n;
}

std::int64_t ModelSpec::total_buffer_elems() const {
  std::int64_t n = 0;
  for (const LayerSpec& l : layers) n += l.buffer_elems;
  return n;
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kAmp:
      return "amp";
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp8:
      return "fp8";
  }
  return "?";
}

// Bytes per parameter by precision recipe (docs/scenario.md, "training.precision"):
//   fp32: 4 weights + 4 grads, compute fp32
//   amp (torch.autocast): fp32 weights and grads (4 + 4); kernels run in amp_dtype
//   bf16: bf16 weights (2) + fp32 main grads (4) + fp32 master copy (4)  (Megatron bf16 recipe)
//   fp16: fp16 weights (2) + fp16 grads (2) + fp32 master copy (4)       (Micikevicius et al. 2018)
//   fp8:  as bf16 (the FP8 weight copies and scaling state are counted apart, docs/fp8.md)
// Optimizer state (adam 8 B/param, sgd momentum 4 B/param) is counted by the memory model, not
// here.
PrecisionBytes precision_bytes(Precision p, Dtype amp_dtype) {
  PrecisionBytes b;
  switch (p) {
    case Precision::kFp32:
      b = {4, 4, 0, Dtype::kFp32};
      break;
    case Precision::kAmp:
      b = {4, 4, 0, amp_dtype};
      break;
    case Precision::kBf16:
      b = {2, 4, 4, Dtype::kBf16};
      break;
    case Precision::kFp16:
      b = {2, 2, 4, Dtype::kFp16};
      break;
    case Precision::kFp8:
      b = {2, 4, 4, Dtype::kBf16};  // non-FP8 kernels run in bf16
      break;
  }
  return b;
}

const char* to_string(Framework f) {
  switch (f) {
    case Framework::kPlain:
      return "plain";
    case Framework::kTorchtitan:
      return "torchtitan";
    case Framework::kMegatronTe:
      return "megatron_te";
    case Framework::kHf:
      return "hf";
  }
  return "?";
}

const char* to_string(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdam:
      return "adam";
  }
  return "?";
}

bool is_parallel_kind(StrategyKind k) {
  return k == StrategyKind::kModelParallel || k == StrategyKind::kPipeline ||
         k == StrategyKind::kTensorParallel || k == StrategyKind::k3d || k == StrategyKind::kZero ||
         k == StrategyKind::kFsdp;
}

const char* to_string(StrategyKind k) {
  switch (k) {
    case StrategyKind::kSingle:
      return "single";
    case StrategyKind::kDataParallel:
      return "data_parallel";
    case StrategyKind::kDdp:
      return "ddp";
    case StrategyKind::kModelParallel:
      return "model_parallel";
    case StrategyKind::kPipeline:
      return "pipeline";
    case StrategyKind::kTensorParallel:
      return "tensor_parallel";
    case StrategyKind::k3d:
      return "3d";
    case StrategyKind::kZero:
      return "zero";
    case StrategyKind::kFsdp:
      return "fsdp";
  }
  return "?";
}

const char* to_string(TpRole r) {
  switch (r) {
    case TpRole::kReplicated:
      return "replicated";
    case TpRole::kColumn:
      return "column";
    case TpRole::kRow:
      return "row";
    case TpRole::kSharded:
      return "sharded";
    case TpRole::kVocabInput:
      return "vocab_input";
    case TpRole::kVocabOutput:
      return "vocab_output";
  }
  return "?";
}

const char* to_string(PipelineSchedule s) {
  switch (s) {
    case PipelineSchedule::kGpipe:
      return "gpipe";
    case PipelineSchedule::k1f1b:
      return "1f1b";
    case PipelineSchedule::kInterleaved:
      return "interleaved";
    case PipelineSchedule::kDualPipeV:
      return "dualpipev";
  }
  return "?";
}

const char* recompute_module::name(int bit) {
  static const char* const kNames[kCount] = {"core_attn", "moe_act", "layernorm",     "mla_up_proj",
                                             "mlp",       "moe",     "shared_experts"};
  return bit >= 0 && bit < kCount ? kNames[bit] : "?";
}

const char* to_string(RecomputeMode m) {
  switch (m) {
    case RecomputeMode::kNone:
      return "none";
    case RecomputeMode::kSelective:
      return "selective";
    case RecomputeMode::kFull:
      return "full";
    case RecomputeMode::kSelectiveOp:
      return "selective_op";
  }
  return "?";
}

const char* to_string(ReshardPolicy r) {
  switch (r) {
    case ReshardPolicy::kDefault:
      return "default";
    case ReshardPolicy::kAlways:
      return "always";
    case ReshardPolicy::kNever:
      return "never";
  }
  return "?";
}

const char* to_string(FsdpSharding f) {
  switch (f) {
    case FsdpSharding::kFullShard:
      return "full_shard";
    case FsdpSharding::kShardGradOp:
      return "shard_grad_op";
  }
  return "?";
}

const char* to_string(Zero3Fetch f) {
  switch (f) {
    case Zero3Fetch::kAsync:
      return "async";
    case Zero3Fetch::kSynchronous:
      return "synchronous";
  }
  return "?";
}

const char* to_string(ParallelDim d) {
  switch (d) {
    case ParallelDim::kTp:
      return "tp";
    case ParallelDim::kCp:
      return "cp";
    case ParallelDim::kEp:
      return "ep";
    case ParallelDim::kDp:
      return "dp";
    case ParallelDim::kPp:
      return "pp";
    case ParallelDim::kEtp:
      return "etp";
    case ParallelDim::kEdp:
      return "edp";
  }
  return "?";
}

const char* to_string(MoeDispatcher d) {
  switch (d) {
    case MoeDispatcher::kAllToAll:
      return "alltoall";
    case MoeDispatcher::kAllGather:
      return "allgather";
    case MoeDispatcher::kDeepEp:
      return "deepep";
  }
  return "?";
}

const char* to_string(MoeA2aOverlap o) {
  switch (o) {
    case MoeA2aOverlap::kNone:
      return "none";
    case MoeA2aOverlap::k1f1b:
      return "1f1b";
  }
  return "?";
}

const char* to_string(CpComm c) {
  switch (c) {
    case CpComm::kP2p:
      return "p2p";
    case CpComm::kAllGather:
      return "all_gather";
    case CpComm::kA2a:
      return "a2a";
    case CpComm::kA2aP2p:
      return "a2a+p2p";
  }
  return "?";
}

int ParallelSpec::size(ParallelDim d) const {
  switch (d) {
    case ParallelDim::kTp:
      return tp;
    case ParallelDim::kCp:
      return cp;
    case ParallelDim::kEp:
      return ep;
    case ParallelDim::kDp:
      return dp;
    case ParallelDim::kPp:
      return pp;
    case ParallelDim::kEtp:
      return etp;
    case ParallelDim::kEdp:
      return tp * cp * dp / (etp * ep);
  }
  return 1;
}

// usable = memory - cuda_context - (communicates ? nccl_buffers : 0) - workspace, floored at 0
// (docs/scenario.md, "Usable memory").
Bytes usable_memory_bytes(const ClusterSpec& c, bool communicates) {
  Bytes usable = c.gpu.memory_bytes - c.reserve.cuda_context_bytes - c.reserve.workspace_bytes;
  if (communicates) usable -= c.reserve.nccl_buffers_bytes;
  return std::max<Bytes>(usable, 0);
}

}  // namespace csim::core
