// The CUDA DeviceRuntime (backends/real/device_runtime.hpp): runs a Program's stream ops on real
// GPUs of one process and times them with CUDA events. Each op is replaced by work of the same
// size, not by the framework's kernels:
//   compute (GEMM, attention, conv)  square cuBLAS GEMMs whose FLOPs add up to op.flops
//   compute (element-wise, no FLOPs) a device-to-device copy of op.bytes / 2 (reads and writes
//                                    op.bytes in all, like a memory-bound kernel)
//   copy                             cudaMemcpyAsync / cudaMemcpyPeerAsync of op.bytes
//   collective                       NCCL on float32 buffers of op.bytes per GPU (nccl-tests size)
//   alloc / free                     cudaMallocAsync / cudaFreeAsync of op.bytes
// One process drives all its GPUs from its host threads (threads mode: one NCCL communicator per
// GPU and group from ncclCommInitAll). Only the runtime API, cuBLAS and NCCL are linked, never the
// driver library, so binaries start on machines without a GPU and report it through
// DeviceUnavailable.
#pragma once

#include <memory>
#include <string>

#include "backends/real/device_runtime.hpp"

namespace csim::cuda {

// A runtime for this machine's CUDA devices. Throws real::DeviceUnavailable, with one line naming
// what was looked for and the CUDA error, when there is no usable GPU (no driver, no device).
std::unique_ptr<real::DeviceRuntime> make_cuda_runtime();

// One line on the CUDA devices here, for tools: the DeviceUnavailable message of
// make_cuda_runtime() when there is none, else "N CUDA device(s): <name of device 0>, compute
// capability X.Y, driver D, runtime R".
std::string cuda_probe_line();

}  // namespace csim::cuda
