#include "backends/cuda/cuda_errors.hpp"

#include "backends/real/device_runtime.hpp"

namespace csim::cuda {

namespace {

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_?";
}

}  // namespace

std::string error_text(cudaError_t e) {
  return "error " + std::to_string(static_cast<int>(e)) + " (" + cudaGetErrorString(e) + ")";
}

std::string error_text(cublasStatus_t s) {
  return "status " + std::to_string(static_cast<int>(s)) + " (" + cublas_status_name(s) + ": " +
         cublasGetStatusString(s) + ")";
}

std::string error_text(ncclResult_t r) {
  return "ncclResult " + std::to_string(static_cast<int>(r)) + " (" + ncclGetErrorString(r) + ")";
}

std::string op_label(const core::Op& op, std::string_view name) {
  return "op " + std::to_string(op.id) + " '" + std::string(name) + "' on GPU " +
         std::to_string(op.gpu);
}

void throw_op_error(const char* call, const std::string& text, const std::string& op_label) {
  throw real::DeviceError(std::string(call) + " failed: " + text + " (" + op_label + ")");
}

void throw_open_error(const char* call, const std::string& text, const std::string& where) {
  throw BackendUnavailable(std::string(call) + " failed: " + text + " (" + where + ")");
}

}  // namespace csim::cuda
