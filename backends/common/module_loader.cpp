// backends/common/module_loader.hpp.
#include "backends/common/module_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace csim::backend {
namespace {

std::string binary_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// Where the module may be, in the order tried.
std::vector<std::string> candidates(const ModuleSpec& spec) {
  if (const char* env = std::getenv(spec.env_var); env && *env) return {env};
  std::vector<std::string> c;
  const std::string dir = binary_dir();
  if (!dir.empty()) {
    c.push_back(dir + "/../lib/" + spec.file);
    c.push_back(dir + "/" + spec.file);
  }
#ifdef CSIM_MODULE_BUILD_DIR
  c.push_back(std::string(CSIM_MODULE_BUILD_DIR) + "/" + spec.file);  // the build tree
#endif
  return c;
}

}  // namespace

void* load_module_entry(const ModuleSpec& spec, std::string* why, std::string* loaded) {
  std::string tried;
  for (const std::string& path : candidates(spec)) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | (spec.global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) {
      const char* e = dlerror();
      *why =
          std::string(spec.what) + " " + path + " cannot be loaded: " + (e ? e : "dlopen failed");
      return nullptr;
    }
    if (loaded) *loaded = path;
    void* entry = dlsym(h, spec.entry);
    if (!entry) *why = std::string(spec.what) + " " + path + " is not this build's (rebuild it)";
    return entry;
  }
  *why = std::string(spec.what) + " " + spec.file + " is not found (looked for " + tried + ")";
  return nullptr;
}

}  // namespace csim::backend
