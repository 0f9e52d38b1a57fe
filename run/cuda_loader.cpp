// run/cuda_loader.hpp.
#include "run/cuda_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "core/error.hpp"

namespace csim::run {
namespace {

constexpr const char* kModuleFile = "libcsim_cuda_backend.so";

std::string binary_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// Where the module may be, in the order tried.
std::vector<std::string> candidates() {
  if (const char* env = std::getenv("CSIM_CUDA_MODULE"); env && *env) return {env};
  std::vector<std::string> c;
  const std::string dir = binary_dir();
  if (!dir.empty()) {
    c.push_back(dir + "/../lib/" + kModuleFile);  // an installed or bundled layout (bin/, lib/)
    c.push_back(dir + "/" + kModuleFile);
  }
#ifdef CSIM_CUDA_MODULE_BUILD_DIR
  c.push_back(std::string(CSIM_CUDA_MODULE_BUILD_DIR) + "/" + kModuleFile);  // the build tree
#endif
  return c;
}

struct Loaded {
  const cuda::CudaModule* module = nullptr;
  std::string why;
};

Loaded load() {
  Loaded l;
  std::string tried;
  for (const std::string& path : candidates()) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      l.why = "the cuda backend module " + path + " cannot be loaded: " + (e ? e : "dlopen failed");
      return l;
    }
    using Entry = const cuda::CudaModule* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(h, "csim_cuda_module"));
    const cuda::CudaModule* m = entry ? entry() : nullptr;
    if (!m || m->abi != cuda::kCudaModuleAbi) {
      l.why = "the cuda backend module " + path + " is not this build's (rebuild it)";
      return l;
    }
    l.module = m;  // never dlclose'd: runtimes made by it may live until exit
    return l;
  }
  l.why = "the cuda backend module " + std::string(kModuleFile) + " is not found (looked for " +
          tried + ")";
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
