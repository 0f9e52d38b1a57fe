// backends/common/module_loader.hpp.
#include "backends/common/module_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace csim::backend {
namespace {

// The folder of the object that holds this code, found by dladdr: the executable for simrun and
// simview, which link the run library statically; the clustersim Python module inside an
// interpreter, whose executable (/proc/self/exe) is python3 and says nothing of where the build
// put the modules.
const char kAnchor = 0;

}  // namespace

std::string module_anchor_dir() {
  Dl_info info{};
  if (dladdr(&kAnchor, &info) == 0 || !info.dli_fname || !*info.dli_fname) return {};
  std::error_code ec;
  const std::filesystem::path object = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::string() : object.parent_path().string();
}

namespace {

std::string binary_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// Where the module may be, in the order tried: beside the object holding this code, then beside
// the executable (when another), then the build tree.
std::vector<std::string> candidates(const ModuleSpec& spec) {
  if (const char* env = std::getenv(spec.env_var); env && *env) return {env};
  std::vector<std::string> c;
  std::vector<std::string> dirs{module_anchor_dir()};
  if (const std::string exe = binary_dir(); exe != dirs.front()) dirs.push_back(exe);
  for (const std::string& dir : dirs) {
    if (dir.empty()) continue;
    c.push_back(dir + "/../lib/" + spec.file);
    c.push_back(dir + "/" + spec.file);
  }
#ifdef CSIM_MODULE_BUILD_DIR
  c.push_back(std::string(CSIM_MODULE_BUILD_DIR) + "/" + spec.file);  // the build tree
#endif
  return c;
}

}  // namespace

std::string find_module_file(const ModuleSpec& spec, std::string* why) {
  std::string tried;
  for (const std::string& path : candidates(spec)) {
    if (access(path.c_str(), F_OK) == 0) {
      std::error_code ec;
      const std::filesystem::path clean = std::filesystem::weakly_canonical(path, ec);
      return ec ? path : clean.string();
    }
    tried += (tried.empty() ? "" : ", ") + path;
  }
  *why = std::string(spec.what) + " " + spec.file + " is not found (looked for " + tried + ")";
  return {};
}

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
