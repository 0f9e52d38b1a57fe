// tracediff: compare traces (or their summaries) of a training setup and fail on regression.
// The whole command line lives here so tests can run it in-process; tools/tracediff.cpp is main().
// Metrics, tolerances and output: docs/tracediff.md; CI use: docs/ci.md.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "profiler/run_metrics_file.hpp"
#include "profiler/trace_diff.hpp"

namespace csim::app {

// Exit codes (also printed by --help).
inline constexpr int kDiffOk = 0;          // every metric within tolerance (improvements allowed)
inline constexpr int kDiffRegression = 1;  // at least one metric worse beyond its tolerance
inline constexpr int kDiffBadInput = 2;    // unreadable/malformed/oversized file, bad option
inline constexpr int kDiffInternal = 3;    // a bug

inline constexpr std::int64_t kDefaultMaxInputBytes = prof::kDefaultMaxRunFileBytes;  // --max-size

// One input file as metrics (prof::load_run_metrics): a Chrome/Kineto trace (.json or .json.gz) or
// a summary JSON from `simrun --summary`, told apart by content. Throws csim::InputError naming
// PATH for a missing, oversized, truncated or malformed file, or one without events.
prof::RunMetrics load_run(const std::string& path, std::int64_t max_bytes = kDefaultMaxInputBytes);

int tracediff_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace csim::app
