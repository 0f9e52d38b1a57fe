// Fuzz target: the tracediff tolerance file (prof::parse_tolerance_rules, docs/tracediff.md
// "Tolerance file"), then the wildcard matching of the rules it yields against a few metric keys.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "profiler/trace_diff.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  csim::fuzz::run_guarded("fuzz_tolerances", [&] {
    csim::prof::Tolerances tol;
    tol.rules = csim::prof::parse_tolerance_rules(text, "fuzz.txt");
    static const char* const kKeys[] = {"step_time", "peak_memory/gpu0", "time/compute/host/gemm",
                                        "critical_path/comm", ""};
    for (const char* key : kKeys) {
      (void)tol.for_metric(key, csim::prof::Unit::kSeconds);
      (void)tol.for_metric(key, csim::prof::Unit::kBytes);
    }
    // The first patterns as keys: exercises '*' backtracking on fuzzer-made keys too (bounded, as
    // every key is matched against every rule).
    for (std::size_t i = 0; i < tol.rules.size() && i < 64; ++i) {
      (void)tol.for_metric(tol.rules[i].pattern, csim::prof::Unit::kRatio);
    }
  });
  return 0;
}
