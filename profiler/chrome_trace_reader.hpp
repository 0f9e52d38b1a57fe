// Chrome Trace Event JSON reader (ours and, by issue 3, PyTorch-profiler traces).
// Bad records inside a trace are counted and skipped (ReadStats); a file that is not a trace at
// all (malformed JSON, truncated, no traceEvents) throws csim::InputError naming the file.
#pragma once

#include <cstdint>
#include <string>

#include "profiler/trace.hpp"

namespace csim::prof {

struct ReadStats {
  std::int64_t events = 0;
  std::int64_t skipped_records = 0;   // malformed events
  std::string first_problem;          // description of the first skipped record
};

Trace read_chrome_trace_file(const std::string& path, ReadStats* stats = nullptr);
Trace read_chrome_trace_string(const std::string& json, const std::string& name_for_errors,
                               ReadStats* stats = nullptr);

}  // namespace csim::prof
