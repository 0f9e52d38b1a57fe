// docs/trace-format.md, "Kineto conventions". Sources: Kineto's CuptiActivity (memcpy and
// memset names), PyTorch's ParamCommsUtils (collective args), NCCL 2.28 src/device/generate.py
// (kernel names: best_kernel) and src/enqueue.cc (launch API, the kernel launched).
#include "backends/common/kineto_names.hpp"

namespace csim::backend {

using core::CollectiveKind;

prof::PlainStr kineto_memcpy_name(core::CopyKind k) {
  switch (k) {
    case core::CopyKind::kH2DPinned: return "Memcpy HtoD (Pinned -> Device)";
    case core::CopyKind::kH2DPageable: return "Memcpy HtoD (Pageable -> Device)";
    case core::CopyKind::kD2H: return "Memcpy DtoH (Device -> Pageable)";
    case core::CopyKind::kD2D: return "Memcpy DtoD (Device -> Device)";
    case core::CopyKind::kPeer: return "Memcpy PtoP (Device -> Device)";
  }
  return "Memcpy";
}

prof::PlainStr torch_dtype_name(core::Dtype d) {
  switch (d) {
    case core::Dtype::kFp32:
    case core::Dtype::kTf32: return "Float";
    case core::Dtype::kFp16: return "Half";
    case core::Dtype::kBf16: return "BFloat16";
    case core::Dtype::kFp8: return "Float8_e4m3fn";  // torch.float8_e4m3fn (docs/fp8.md)
  }
  return "Float";
}

const char* nccl_type_name(core::Dtype d) {
  switch (d) {
    case core::Dtype::kFp32:
    case core::Dtype::kTf32: return "f32";
    case core::Dtype::kFp16: return "f16";
    case core::Dtype::kBf16: return "bf16";
    case core::Dtype::kFp8: return "f8e4m3";  // NCCL 2.24's ncclFloat8e4m3 (docs/fp8.md)
  }
  return "f32";
}

// NCCL 2.28's kernel for one collective (v2.28.9-1; docs/trace-format.md, "Kineto conventions",
// "NCCL kernel names"). ncclLaunchKernel (src/enqueue.cc) launches plan->kernelFn =
// ncclDevKernelForFunc[task->devFuncId], the kernel src/device/generate.py's best_kernel() gives
// the function (coll, redop, ty, algo, proto):
//   SendRecv                          -> ncclDevKernel_SendRecv
//   AllGather, Broadcast              -> ncclDevKernel_<coll>_RING_LL (no redop, no type)
//   AllReduce, Reduce, ReduceScatter  -> ncclDevKernel_<coll>_Sum_<ty>_<TREE if algo == TREE
//                                        else RING>_LL (whatever the redop)
// then equivalent_primary() (signed integer types to unsigned; our dtypes are floating point).
// Only the (RING, LL) and (TREE, LL) functions are kernels of their own
// (ncclDevKernelForFuncIsSpecialized); every other algorithm (NVLS, NVLS_TREE, COLLNET_DIRECT,
// COLLNET_CHAIN, PAT) and protocol (LL128, SIMPLE) runs inside its collective and type's kernel
// through ncclDevFuncTable, so neither is in the name. TREE is a function of AllReduce only
// (algos_of_coll): a Reduce or ReduceScatter is always _RING_LL. Gather, scatter and all-to-all
// run as point-to-point work, SendRecv, whether PyTorch groups ncclSend / ncclRecv itself or
// calls 2.28's ncclAlltoAll / ncclGather / ncclScatter (ncclEnqueueCheck's taskAppend splits
// them into p2pTaskAppend sends and receives). Not named here: the kernels of symmetric-memory
// windows (ncclSymkDevKernel_*, src/device/symmetric/generate.py) and the copy-engine
// collectives, both only for buffers registered with NCCL_WIN_COLL_SYMMETRIC.
std::string nccl_kernel_name(CollectiveKind k, core::Dtype d, core::CollectiveAlgo algo) {
  const auto reduction = [&](const char* coll, bool has_tree) {
    const bool tree = has_tree && algo == core::CollectiveAlgo::kTree;
    return std::string("ncclDevKernel_") + coll + "_Sum_" + nccl_type_name(d) +
           (tree ? "_TREE_LL" : "_RING_LL");
  };
  switch (k) {
    case CollectiveKind::kAllReduce:
      return reduction("AllReduce", true);
    case CollectiveKind::kReduceScatter:
      return reduction("ReduceScatter", false);
    case CollectiveKind::kReduce:
      return reduction("Reduce", false);
    case CollectiveKind::kAllGather:
      return "ncclDevKernel_AllGather_RING_LL";
    case CollectiveKind::kBroadcast:
      return "ncclDevKernel_Broadcast_RING_LL";
    case CollectiveKind::kScatter:
    case CollectiveKind::kGather:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSendRecv:
      return "ncclDevKernel_SendRecv";
  }
  return "ncclDevKernel_SendRecv";
}

prof::PlainStr torch_collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "allreduce";
    case CollectiveKind::kReduceScatter: return "_reduce_scatter_base";
    case CollectiveKind::kAllGather: return "_allgather_base";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kAllToAll: return "alltoall_base";
    case CollectiveKind::kSendRecv: return "sendrecv";
  }
  return "sendrecv";
}

const char* nccl_algo_name(core::CollectiveAlgo a) {
  switch (a) {
    case core::CollectiveAlgo::kAuto: return nullptr;
    case core::CollectiveAlgo::kRing: return "RING";
    case core::CollectiveAlgo::kTree: return "TREE";
    case core::CollectiveAlgo::kNvls: return "NVLS";
    case core::CollectiveAlgo::kHierarchical: return "HIERARCHICAL";
    case core::CollectiveAlgo::kCollnet: return "COLLNET_DIRECT";
    case core::CollectiveAlgo::kNvlsTree: return "NVLS_TREE";
    case core::CollectiveAlgo::kPat: return "PAT";
  }
  return nullptr;
}

const char* nccl_proto_name(core::NcclProto p) {
  switch (p) {
    case core::NcclProto::kAuto: return nullptr;
    case core::NcclProto::kLL: return "LL";
    case core::NcclProto::kLL128: return "LL128";
    case core::NcclProto::kSimple: return "SIMPLE";
  }
  return nullptr;
}

MsgNelems msg_nelems(CollectiveKind k, core::Dtype d, Bytes bytes, int ranks) {
  const std::int64_t n = static_cast<std::int64_t>(bytes) / core::dtype_bytes(d);
  const std::int64_t p = ranks > 0 ? ranks : 1;
  switch (k) {
    case CollectiveKind::kAllGather: return {n / p, n};
    case CollectiveKind::kReduceScatter: return {n, n / p};
    default: return {n, n};
  }
}

LaunchCall launch_call(core::OpKind k) {
  switch (k) {
    case core::OpKind::kCompute: return {"cudaLaunchKernel", "cuda_runtime"};
    case core::OpKind::kCopy: return {"cudaMemcpyAsync", "cuda_runtime"};
    case core::OpKind::kCollective: return {"cuLaunchKernelEx", "cuda_driver"};
    default: return {"cuda_runtime", "cuda_runtime"};
  }
}

}  // namespace csim::backend
