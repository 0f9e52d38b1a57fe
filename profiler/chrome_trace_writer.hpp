// Chrome Trace Event JSON writer (docs/trace-format.md). Streams the trace with a space after
// every colon ("rank": 0), sorted deterministically, timestamps in µs relative to base_ns with
// exact ns fractions ("ts": 1234.567). Writes atomically: temporary file, then rename.
#pragma once

#include <ostream>
#include <string>

#include "profiler/trace.hpp"

namespace csim::prof {

void write_chrome_trace(const Trace& trace, std::ostream& out);
// Writes to `path` through `path.tmp.<pid>` and rename; throws std::runtime_error on I/O failure
// (the temporary is removed).
void write_chrome_trace_file(const Trace& trace, const std::string& path);
// One Kineto-style file per rank (GPU process): DIR/rank-<r>.json, each with distributedInfo.
void write_per_rank_traces(const Trace& trace, const std::string& dir);

}  // namespace csim::prof
