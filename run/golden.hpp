// Golden outputs of bundled scenarios (traces/goldens.txt): the list, and rendering one golden
// exactly as it is stored. Used by tests/test_golden.cpp and tools/golden_refresh.
#pragma once

#include <string>
#include <vector>

namespace csim::run {

struct GoldenCase {
  std::string golden;                  // file name under traces/
  std::string scenario;                // file name under scenarios/
  std::vector<std::string> overrides;  // --set values
  bool full_trace = false;             // .trace.json (else .summary.json)
  bool large = false;                  // 4th column "large": checked by its own CTest only
};

std::vector<GoldenCase> read_golden_list(const std::string& path);
// The golden's bytes as simrun would write them for this case.
std::string render_golden(const GoldenCase& c, const std::string& scenarios_dir);

}  // namespace csim::run
