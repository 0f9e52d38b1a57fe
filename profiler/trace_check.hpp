// A strict checker of Chrome Trace Event JSON as written (docs/trace-format.md, "Checking a
// trace"): it parses the file itself, not our Trace model, so it checks what Perfetto, chrome://
// tracing and HTA actually read. Rules:
//
//  - every element of traceEvents is an object with a legal `ph`;
//  - `ts` is a finite number on every event but metadata; `dur` of an X event is a finite number
//    >= 0;
//  - `pid` (and `tid` on thread-scoped events) are integers, and every pid/tid used has a
//    `process_name` / `thread_name` metadata event;
//  - counter (`C`) args are all numbers;
//  - each flow, keyed by (cat, id) and named alike at both ends, has exactly one start (`s`) and
//    one end (`f`); the start binds to the slice enclosing it on its thread, the end to the
//    enclosing slice when `"bp": "e"` (Kineto's), else to the next slice starting at or after it
//    (as Perfetto binds them); neither end is unbound; the end is not before the start, nor bound
//    to a slice starting before the start's slice;
//  - the slices (X, and B/E pairs) of one thread are nested or disjoint;
//  - a device event (cat kernel, gpu_memcpy, gpu_memset) does not start before its launch (the
//    cuda_runtime/cuda_driver slice with the same `correlation` arg).
//
// A problem names the event: its name, pid, tid and ts (µs, as written).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace csim::prof {

enum class CheckRule {
  kJson,          // not JSON, no traceEvents, an element that is not an object
  kPhase,         // missing or illegal ph
  kTimestamp,     // ts missing or not a finite number
  kDuration,      // dur missing, not a number, or negative
  kPidTid,        // pid/tid missing or not an integer
  kNaming,        // a pid or (pid, tid) without process_name / thread_name metadata
  kCounter,       // a counter arg that is not a number
  kFlowPairing,   // not exactly one start and one end, or ends named differently
  kFlowBinding,   // a flow end bound to no slice
  kFlowOrder,     // a flow ending before it starts
  kNesting,       // two slices of one thread overlapping without nesting, or E without B
  kCausality,     // a device event starting before its launch
  kLaunchMissing  // (options.require_launch_in_file) a device event whose launch is elsewhere
};
inline constexpr std::size_t kNumCheckRules = 13;
const char* to_string(CheckRule r);

struct TraceCheckOptions {
  // Per-rank files: every device event with a correlation id has its launch in the same file.
  bool require_launch_in_file = false;
  std::size_t max_messages = 20;  // problems beyond this are counted, not described
};

struct TraceCheckResult {
  std::vector<std::string> messages;  // the first max_messages problems, one line each
  std::array<std::size_t, kNumCheckRules> count{};  // problems by rule
  std::size_t events = 0, slices = 0, flows = 0, device_events = 0, launches_checked = 0;

  std::size_t problems() const;
  bool ok() const { return problems() == 0; }
  // "ok: N events, ..." or the problem counts by rule and the messages, one per line.
  std::string report() const;
};

TraceCheckResult check_chrome_trace_string(std::string_view json,
                                           const TraceCheckOptions& options = {});
// Reads the file (plain JSON, as we write it). A file that cannot be checked at all throws
// csim::InputError naming it: missing or unreadable (the OS error), a directory, binary or
// gzip-compressed, nested deeper than core::kMaxJsonDepth (docs/limits.md). A file that is not
// JSON or has no traceEvents is a kJson problem of the result.
TraceCheckResult check_chrome_trace_file(const std::string& path,
                                         const TraceCheckOptions& options = {});

// Per-rank files (write_per_rank_traces): each file checked alone, and across the files every
// device event's launch, when some file has it, in the event's own file (kLaunchMissing); flows
// are self-contained already by the one-start-one-end rule. Messages are prefixed with the file's
// name. Throws as check_chrome_trace_file for a file that cannot be read.
TraceCheckResult check_per_rank_files(const std::vector<std::string>& paths,
                                      const TraceCheckOptions& options = {});

}  // namespace csim::prof
