// The CUDA DeviceRuntime (backends/real/device_runtime.hpp): runs a Program's stream ops on real
// GPUs of one process and times them with CUDA events. Each op is replaced by work of the same
// size, not by the framework's kernels:
//   compute (GEMM, attention, conv)  cuBLAS GEMMs of op.flops: m = n aligned, k = flops / 2mn,
//                                    on random operands (gemm_proxy.hpp)
//   compute (element-wise, no FLOPs) a device-to-device copy of op.bytes / 2 (reads and writes
//                                    op.bytes in all, like a memory-bound kernel)
//   copy                             cudaMemcpyAsync / cudaMemcpyPeerAsync of op.bytes
//   collective                       NCCL on float32 buffers of op.bytes per GPU (nccl-tests size)
//   alloc / free                     cudaMallocAsync / cudaFreeAsync of op.bytes
//   simulated elsewhere (--ranks)    the stream held for op.fixed_ns (stream_delays.cpp)
// A process drives its GPUs from its host threads: every GPU of the run (launch mode threads: one
// NCCL communicator per GPU and group from ncclCommInitAll), or its share of them (modes processes
// and mpi, e.g. one GPU per process as in DDP: groups reaching other processes get their
// communicators from ncclCommInitRank with an id the launcher shares, CudaOptions::shared_nccl_id).
// Each op's completion is reported to the executor by a poller thread (set_completion_callback).
// Only the runtime API, cuBLAS and NCCL are linked, never the driver library, so binaries start on
// machines without a GPU and report it through BackendUnavailable.
#pragma once

#include <cstdint>
#include <functional>
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

  // Multi-process runs (launch modes processes and mpi): the NCCL unique id of communicator group
  // `group` (Program::groups index), shared by every process of the group. open() calls it for
  // each group with collective ops here and members in other processes, in ascending group order;
  // `make` creates an id (ncclGetUniqueId) and is run by whichever process the exchange picks (the
  // group's first member). Both strings hold the 128 raw bytes of an ncclUniqueId
  // (NCCL_UNIQUE_ID_BYTES). Unset: one process drives every GPU of each group (ncclCommInitAll),
  // and open() throws BackendUnavailable for a group with members elsewhere.
  std::function<std::string(int group, const std::function<std::string()>& make)> shared_nccl_id =
      nullptr;
};

// A runtime for this machine's CUDA devices. Throws BackendUnavailable, with one line naming
// what was looked for and the CUDA error, when there is no usable GPU (no driver, no device).
// With options.cupti, open() throws BackendUnavailable when CUPTI cannot trace.
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

// One line on the CUDA devices here, for tools: the BackendUnavailable message of
// make_cuda_runtime() when there is none, else "N CUDA device(s): <name of device 0>, compute
// capability X.Y, driver D, runtime R".
std::string cuda_probe_line();

}  // namespace csim::cuda
