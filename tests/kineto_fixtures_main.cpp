// main of tests_kineto_fixtures (tests/kineto_fixtures.hpp): the Catch2 session when every
// fixture is present; otherwise one line saying which is missing and exit 77, which CTest reports
// as a skip. Listing the cases (catch_discover_tests runs --list-test-names-only when the
// executable is built) works either way, so each case is registered, and each is skipped
// visibly on a clone without the fixtures.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <filesystem>
#include <iostream>
#include <string_view>

#include "kineto_fixtures.hpp"

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    listing = listing || std::string_view(argv[i]).rfind("--list", 0) == 0;
  if (!listing) {
    for (const char* f : csim::test::kKinetoFixtures) {
      const std::string path = csim::test::kineto_fixture(f);
      if (!std::filesystem::exists(path)) {
        std::cout << "SKIPPED: the real PyTorch-profiler trace " << path
                  << " is absent (it may not be committed; CI has ../shared/fixtures/kineto/ "
                     "beside the checkout; set CSIM_KINETO_FIXTURES to another folder)\n";
        return 77;
      }
    }
  }
  return Catch::Session().run(argc, argv);
}
