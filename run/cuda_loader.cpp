// run/cuda_loader.hpp.
#include "run/cuda_loader.hpp"

#include <mutex>

#include "backends/common/module_loader.hpp"
#include "core/error.hpp"

namespace csim::run {
namespace {

struct Loaded {
  const cuda::CudaModule* module = nullptr;
  std::string why;
};

Loaded load() {
  const backend::ModuleSpec spec{"the cuda backend module", "libcsim_cuda_backend.so",
                                 "CSIM_CUDA_MODULE", "csim_cuda_module", false};
  Loaded l;
  std::string path;
  using Entry = const cuda::CudaModule* (*)();
  const auto entry = reinterpret_cast<Entry>(backend::load_module_entry(spec, &l.why, &path));
  if (!entry) return l;
  const cuda::CudaModule* m = entry();
  if (!m || m->abi != cuda::kCudaModuleAbi) {
    l.why = std::string(spec.what) + " " + path + " is not this build's (rebuild it)";
    return l;
  }
  l.module = m;  // never dlclose'd: runtimes made by it may live until exit
  return l;
}

}  // namespace

const cuda::CudaModule* cuda_module(std::string* why) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (!loaded.module && why) *why = loaded.why;
  return loaded.module;
}

const cuda::CudaModule& require_cuda_module() {
  std::string why;
  const cuda::CudaModule* m = cuda_module(&why);
  if (!m) throw BackendUnavailable(why + "; use --backend sim or --backend standin");
  return *m;
}

}  // namespace csim::run
