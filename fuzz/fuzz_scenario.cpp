// Fuzz target: the scenario parser (core::parse_scenario_string, docs/scenario.md).
//
// Input: the scenario JSON text. Bytes after the first NUL, if any, are NUL-separated --set
// overrides ("dotted.path=VALUE"), so that the override path is fuzzed as well; the seed scenarios
// contain no NUL and are read whole.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/scenario/scenario_parser.hpp"
#include "fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::size_t nul = input.find('\0');
  const std::string json = input.substr(0, nul);
  std::vector<std::string> overrides;
  while (nul != std::string::npos) {
    const std::size_t next = input.find('\0', nul + 1);
    overrides.push_back(
        input.substr(nul + 1, next == std::string::npos ? std::string::npos : next - nul - 1));
    nul = next;
  }
  csim::fuzz::run_guarded("fuzz_scenario", [&] {
    const csim::core::Scenario s = csim::core::parse_scenario_string(json, "fuzz.json", overrides);
    (void)s;
  });
  return 0;
}
