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

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/real/device_runtime.hpp"
#include "profiler/cupti/cupti_records.hpp"

namespace csim::cuda {

struct CudaOptions {
  // Trace the run with CUPTI (profiler/cupti/cupti_tracer.hpp): every kernel, memcpy, memset and
  // NCCL launch from the end of open()'s warm-up to finish(), each mapped to the op that issued
  // it. Off, the runtime makes no CUPTI call and pays one pointer test per enqueue.
  bool cupti = false;
};

// A runtime for this machine's CUDA devices. Throws real::DeviceUnavailable, with one line naming
// what was looked for and the CUDA error, when there is no usable GPU (no driver, no device).
// With options.cupti, open() throws DeviceUnavailable when CUPTI cannot trace.
std::unique_ptr<real::DeviceRuntime> make_cuda_runtime(const CudaOptions& options = {});

// What a traced run recorded (CudaOptions::cupti), for cupti::append_to_trace.
struct CuptiCapture {
  std::vector<cupti::Record> records;      // `gpu` set; collective kernels given their GPU's op
  std::int64_t clock_zero_ns = 0;          // the run's time origin on the host steady clock
  std::map<std::string, int> gpu_of_uuid;  // "GPU-8c3f..." -> global GPU index, for NVML
};
// Moves the records out of `runtime` after its run (stopping the tracer if finish() did not run).
// Empty when `runtime` is not a CUDA runtime made with CudaOptions::cupti.
CuptiCapture take_cupti_capture(real::DeviceRuntime& runtime);

// One line on the CUDA devices here, for tools: the DeviceUnavailable message of
// make_cuda_runtime() when there is none, else "N CUDA device(s): <name of device 0>, compute
// capability X.Y, driver D, runtime R".
std::string cuda_probe_line();

}  // namespace csim::cuda
