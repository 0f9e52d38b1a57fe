// One tracediff input file as metrics (docs/tracediff.md, "Inputs"): a Chrome/Kineto trace (.json
// or .json.gz) or a summary JSON from `simrun --summary`, told apart by content. tracediff and the
// Python module's diff read their inputs here.
#pragma once

#include <cstdint>
#include <string>

#include "core/units.hpp"
#include "profiler/trace_diff.hpp"

namespace csim::prof {

inline constexpr std::int64_t kDefaultMaxRunFileBytes = 4 * kGiB;  // tracediff --max-size default

// Throws csim::InputError naming PATH for a missing, oversized (over `max_bytes`), truncated or
// malformed file, or one without events.
RunMetrics load_run_metrics(const std::string& path,
                            std::int64_t max_bytes = kDefaultMaxRunFileBytes);

}  // namespace csim::prof
