// The real PyTorch-profiler (Kineto) traces the tests read. They may not be committed: they live
// in ../shared/fixtures/kineto/ beside a checkout that has them (CI's), and a clone of the
// repository alone has none. Every case that reads one is in the executable tests_kineto_fixtures
// (tests/CMakeLists.txt), whose main (kineto_fixtures_main.cpp) exits 77 when a fixture is absent:
// CTest reports each of its cases as "Skipped" (SKIP_RETURN_CODE 77; Catch2 2.13 has no SKIP),
// never as passed.
#pragma once

#include <cstdlib>
#include <string>

namespace csim::test {

// The fixture folder: $CSIM_KINETO_FIXTURES when set, else the CMake cache variable of the same
// name (default ${PROJECT_SOURCE_DIR}/../shared/fixtures/kineto; tests/source_dir.hpp).
inline std::string kineto_fixture_dir() {
  const char* env = std::getenv("CSIM_KINETO_FIXTURES");
  return env != nullptr && *env != '\0' ? std::string(env)
                                         : std::string(::csim::build::kineto_fixtures_dir());
}

inline std::string kineto_fixture(const std::string& name) {
  return kineto_fixture_dir() + "/" + name;
}

// Every file the cases of tests_kineto_fixtures read.
constexpr const char* kKinetoFixtures[] = {"sampled_rank-0.json.gz", "sampled_rank-1.json.gz",
                                           "diff_control.json.gz",   "diff_test.json.gz",
                                           "nccl_data.json.gz",      "df_index_resolver.json.gz"};

}  // namespace csim::test
