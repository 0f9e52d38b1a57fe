// Helpers shared by the tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace csim::test {

// The source tree: $CSIM_SOURCE_DIR when set (a copy of the tree on another machine, e.g. the GPU
// check's), else the one this binary was built from.
inline std::string source_dir() {
  const char* env = std::getenv("CSIM_SOURCE_DIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(CSIM_SOURCE_DIR);
}
inline std::string repo_path(const std::string& rel) {
  return source_dir() + "/" + rel;
}
inline std::string scenario_path(const std::string& name) {
  return repo_path("scenarios/" + name);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// <tmp>/csim_tree_<tag>/<name>, the tag a hash of this build tree's path (cmake/source_dir.cmake):
// the same path in every process of one tree, another in each other tree or clone, so two trees
// testing at once (release and asan, or two clones) never write, or remove, each other's files.
// The folder <tmp>/csim_tree_<tag> is created; <name> is not.
inline std::filesystem::path tmp_path(const std::string& name) {
  const std::filesystem::path tree = std::filesystem::temp_directory_path() /
                                     (std::string("csim_tree_") + ::csim::build::build_tree_tag());
  std::error_code ignored;  // another process of the tree may create it at the same time
  std::filesystem::create_directories(tree, ignored);
  return tree / name;
}

// An empty directory tmp_path(<prefix><name>), removed first if a previous run left it.
inline std::filesystem::path fresh_dir(const std::string& prefix, const std::string& name) {
  const std::filesystem::path d = tmp_path(prefix + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace csim::test
