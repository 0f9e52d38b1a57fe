// Finding and loading the CUDA backend module (backends/cuda/cuda_module.hpp) when a run asks for
// --backend cuda: $CSIM_CUDA_MODULE when set, else libcsim_cuda_backend.so in ../lib next to the
// running binary, next to it, and in the build tree that built it. Loaded once per process.
#pragma once

#include <string>

#include "backends/cuda/cuda_module.hpp"

namespace csim::run {

// The module's table, or null with *why set to one line: what was looked for and why it failed
// ("not found", dlopen's message for missing CUDA libraries, an ABI mismatch).
const cuda::CudaModule* cuda_module(std::string* why);

// The module's table; throws BackendUnavailable with that line and the way out.
const cuda::CudaModule& require_cuda_module();

}  // namespace csim::run
