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
  std::int64_t skipped_records = 0;  // malformed events
  std::string first_problem;         // description of the first skipped record
  std::int64_t counters = 0;         // "C" samples read, and those made of [memory] events
  std::int64_t memory_events = 0;    // Kineto profile_memory "[memory]" instants read as the GPU's
                                     // "memory" / "memory reserved" counters (docs/trace-format.md)
  std::int64_t flows = 0;            // "s"/"f" pairs matched
  std::int64_t ignored_records = 0;  // well-formed records with no place in a Trace: instant
                                     // events, non-integer pids ("Spans"), unpaired flow ends
  bool clustersim_file = false;      // written by our writer (top-level "clustersim" key)
};

// Reads PATH; gzip-compressed files (detected by their magic bytes, e.g. Kineto's .json.gz) are
// inflated through zlib first.
Trace read_chrome_trace_file(const std::string& path, ReadStats* stats = nullptr);
Trace read_chrome_trace_string(const std::string& json, const std::string& name_for_errors,
                               ReadStats* stats = nullptr);

}  // namespace csim::prof
