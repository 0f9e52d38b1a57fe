// The CUDA backend as a module loaded at run time (docs/real-execution.md, "The CUDA module"):
// libcsim_cuda_backend.so holds backends/cuda, CUPTI and the CUDA, cuBLAS and NCCL libraries they
// link, so that simrun maps none of them unless --backend cuda is asked for. run/cuda_loader.cpp
// dlopens it and calls csim_cuda_module(), the one exported symbol, for this table. The module is
// built by the same build as the program that loads it (same compiler, flags and headers), so the
// table passes C++ types; kCudaModuleAbi guards against a stale module left in place.
#pragma once

#include <memory>
#include <string>

#include "backends/cuda/cuda_runtime.hpp"

namespace csim::cuda {

inline constexpr int kCudaModuleAbi = 1;

struct CudaModule {
  int abi = kCudaModuleAbi;
  std::string (*probe_line)() = nullptr;  // cuda_probe_line
  std::unique_ptr<real::DeviceRuntime> (*make_runtime)(const CudaOptions&) = nullptr;
  CuptiCapture (*take_capture)(real::DeviceRuntime&) = nullptr;  // take_cupti_capture
};

}  // namespace csim::cuda

// The module's entry point (backends/cuda/cuda_module.cpp).
extern "C" const csim::cuda::CudaModule* csim_cuda_module();
