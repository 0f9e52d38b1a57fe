// Golden outputs: every case in traces/goldens.txt regenerated and compared byte for byte
// (the simulator is deterministic). After an intended change: scripts/refresh-goldens.sh.
#include <catch2/catch.hpp>

#include "run/golden.hpp"
#include "tests/test_support.hpp"

using namespace csim;

TEST_CASE("golden outputs of the bundled scenarios are reproduced exactly", "[golden]") {
  const auto cases = run::read_golden_list(test::repo_path("traces/goldens.txt"));
  REQUIRE(cases.size() >= 5);
  for (const auto& c : cases) {
    // Large scenarios (minutes under the sanitizers) are compared byte for byte by their own
    // CTest test, golden_tracediff:<golden>, labelled "large" (tests/CMakeLists.txt).
    if (c.large) continue;
    SECTION(c.golden) {
      const std::string expected = test::read_file(test::repo_path("traces/" + c.golden));
      REQUIRE_FALSE(expected.empty());
      const std::string actual = run::render_golden(c, test::repo_path("scenarios"));
      // Compare without dumping megabytes on failure: find the first differing line.
      if (actual != expected) {
        std::size_t i = 0;
        while (i < actual.size() && i < expected.size() && actual[i] == expected[i]) ++i;
        const std::size_t line_start =
            expected.rfind('\n', i) == std::string::npos ? 0 : expected.rfind('\n', i) + 1;
        FAIL(c.golden << " differs at byte " << i << ", line: " << expected.substr(line_start, 160)
                      << "\n(run scripts/refresh-goldens.sh if the change is intended)");
      }
    }
  }
}
