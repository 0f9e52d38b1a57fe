// Helpers shared by the tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace csim::test {

inline std::string repo_path(const std::string& rel) { return std::string(CSIM_SOURCE_DIR) + "/" + rel; }
inline std::string scenario_path(const std::string& name) { return repo_path("scenarios/" + name); }

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An empty directory <tmp>/<prefix><name>, removed first if a previous run left it.
inline std::filesystem::path fresh_dir(const std::string& prefix, const std::string& name) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() / (prefix + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace csim::test
