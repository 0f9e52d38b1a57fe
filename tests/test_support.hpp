// Helpers shared by the tests.
#pragma once

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

}  // namespace csim::test
