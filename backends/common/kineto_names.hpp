// Names and args as the PyTorch profiler (Kineto, CUPTI) and NCCL write them, for the events the
// trace builder makes of Program ops (docs/trace-format.md, "Kineto conventions"), so that tools
// written for PyTorch-profiler traces (HTA, Perfetto's queries, simview) classify them right.
#pragma once

#include <cstdint>
#include <string>

#include "core/program/program.hpp"
#include "profiler/json_raw_format.hpp"

namespace csim::backend {

// CUPTI's memcpy kind and memory kinds as Kineto names them ("Memcpy HtoD (Pinned -> Device)"):
// H2D pinned / pageable, "Memcpy DtoH (Device -> Pageable)", "Memcpy DtoD (Device -> Device)",
// and "Memcpy PtoP (Device -> Device)" for a copy between two GPUs (DataParallel's scatter and
// gather). A D2H copy of ours lands in pageable memory (PyTorch's .cpu() / .item()).
prof::PlainStr kineto_memcpy_name(core::CopyKind k);
// Kineto's name of a memset activity (CUPTI memory kind device).
inline constexpr const char* kKinetoMemsetName = "Memset (Device)";

// c10::ScalarType's name, as PyTorch's record_param_comms writes "dtype": "Float", "Half",
// "BFloat16" (TF32 runs on fp32 tensors: "Float").
prof::PlainStr torch_dtype_name(core::Dtype d);

// NCCL's type suffix in kernel names (src/device/generate.py all_tys): f32, f16, bf16, f8e4m3.
const char* nccl_type_name(core::Dtype d);

// The CUDA kernel NCCL 2.28 launches for a collective: generate.py's best_kernel() specialises
// one kernel per (collective, type) for the reductions, named RING_LL (TREE_LL for an all-reduce
// on the tree algorithm) whatever algorithm and protocol the work uses,
// "ncclDevKernel_AllReduce_Sum_f32_RING_LL"; all-gather and broadcast without a type,
// "ncclDevKernel_AllGather_RING_LL"; point-to-point work (send/recv and what PyTorch builds from
// it: gather, scatter, all-to-all) "ncclDevKernel_SendRecv". The algorithm and protocol actually
// used go into args. The rules, with their NCCL sources: kineto_names.cpp.
std::string nccl_kernel_name(core::CollectiveKind k, core::Dtype d, core::CollectiveAlgo algo);

// "Collective name" as PyTorch's record_param_comms writes it: allreduce, _allgather_base,
// _reduce_scatter_base, broadcast, reduce, scatter, gather, alltoall_base, sendrecv.
prof::PlainStr torch_collective_name(core::CollectiveKind k);

// NCCL's spelling of an algorithm and protocol in args (the NCCL_ALGO_* names of
// src/include/plugin/nccl_tuner.h): RING, TREE, NVLS, COLLNET_DIRECT, NVLS_TREE, PAT; LL, LL128,
// SIMPLE. Our hierarchical (intra-node reduce-scatter, inter-node ring, intra-node all-gather) is
// not an NCCL algorithm: "HIERARCHICAL". nullptr for kAuto (direct patterns: no algorithm).
const char* nccl_algo_name(core::CollectiveAlgo a);
const char* nccl_proto_name(core::NcclProto p);

// "In msg nelems" / "Out msg nelems" of a collective moving `bytes` per GPU (nccl-tests' size:
// the larger buffer) of `dtype` over `ranks` GPUs: all-gather receives ranks x its input,
// reduce-scatter sends ranks x its output; the others have equal input and output.
struct MsgNelems {
  std::int64_t in = 0, out = 0;
};
MsgNelems msg_nelems(core::CollectiveKind k, core::Dtype d, Bytes bytes, int ranks);

// The runtime (or driver) call that launches an op's GPU work, and its Kineto category.
// Kernels: cudaLaunchKernel; copies: cudaMemcpyAsync; NCCL 2.2x launches its kernels through the
// driver, cuLaunchKernelEx (src/enqueue.cc ncclLaunchKernel), which Kineto records as
// "cuda_driver" (NCCL 2.17 used the runtime's cudaLaunchKernelExC).
struct LaunchCall {
  prof::PlainStr name;
  prof::PlainStr cat;
};
LaunchCall launch_call(core::OpKind k);

}  // namespace csim::backend
