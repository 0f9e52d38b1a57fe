// The entry point of libcsim_cuda_backend.so (backends/cuda/cuda_module.hpp).
#include "backends/cuda/cuda_module.hpp"

namespace {

std::unique_ptr<csim::real::DeviceRuntime> make_runtime(const csim::cuda::CudaOptions& o) {
  return csim::cuda::make_cuda_runtime(o);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const csim::cuda::CudaModule* csim_cuda_module() {
  static const csim::cuda::CudaModule m{csim::cuda::kCudaModuleAbi, &csim::cuda::cuda_probe_line,
                                        &make_runtime, &csim::cuda::take_cupti_capture};
  return &m;
}
