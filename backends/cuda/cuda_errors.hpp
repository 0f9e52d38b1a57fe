// Error text for CUDA runtime, cuBLAS and NCCL status codes, and the two ways the CUDA runtime
// reports them (backends/real/device_runtime.hpp): BackendUnavailable while it starts up,
// real::DeviceError, naming the op, while the run goes on. Internal to backends/cuda.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <string_view>
#include <type_traits>

#include "core/program/program.hpp"

namespace csim::cuda {

// "error 35 (CUDA driver version is insufficient for CUDA runtime version)"
std::string error_text(cudaError_t e);
// "status 13 (CUBLAS_STATUS_EXECUTION_FAILED: the GPU program failed to execute)"
std::string error_text(cublasStatus_t s);
// "ncclResult 2 (unhandled system error)"
std::string error_text(ncclResult_t r);

inline bool failed(cudaError_t e) {
  return e != cudaSuccess;
}
inline bool failed(cublasStatus_t s) {
  return s != CUBLAS_STATUS_SUCCESS;
}
inline bool failed(ncclResult_t r) {
  return r != ncclSuccess;
}

// "op 12 'fc.fwd' on GPU 3" (`name`: the op's, Program::name_of)
std::string op_label(const core::Op& op, std::string_view name);

// Throws real::DeviceError "<call> failed: <text> (<op label>)". A CUDA error is also cleared
// from the thread's last-error slot, so a non-sticky one (an out-of-memory) does not resurface
// in the next unrelated check.
[[noreturn]] void throw_op_error(const char* call, const std::string& text,
                                 const std::string& op_label);

// Throws BackendUnavailable "<call> failed: <text> (<where>)".
[[noreturn]] void throw_open_error(const char* call, const std::string& text,
                                   const std::string& where);

template <typename Status>
void check_op(Status s, const char* call, const std::string& op_label) {
  if (failed(s)) {
    if constexpr (std::is_same_v<Status, cudaError_t>) cudaGetLastError();
    throw_op_error(call, error_text(s), op_label);
  }
}

template <typename Status>
void check_open(Status s, const char* call, const std::string& where) {
  if (failed(s)) {
    if constexpr (std::is_same_v<Status, cudaError_t>) cudaGetLastError();
    throw_open_error(call, error_text(s), where);
  }
}

}  // namespace csim::cuda
