// A tracediff input file read as metrics (profiler/run_metrics_file.hpp; docs/tracediff.md,
// "Inputs").
#include "profiler/run_metrics_file.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <new>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "profiler/chrome_trace_reader.hpp"

namespace csim::prof {
namespace {

std::string gib_text(std::int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB",
                static_cast<double>(bytes) / static_cast<double>(kGiB));
  return buf;
}

bool looks_like_gzip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  return in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

constexpr const char* kInputHint =
    "pass a trace (.json, .json.gz) or a summary written by `simrun --summary`";

// Summaries are small: only files up to this size are looked at as a possible summary JSON.
constexpr std::int64_t kSummaryProbeBytes = 16 * kMiB;

// Metrics of a trace just read, with a note when the reader skipped records.
RunMetrics trace_metrics(const Trace& t, const ReadStats& stats, const std::string& path) {
  if (t.events.empty()) throw InputError(path, "traceEvents", "the trace has no complete events");
  RunMetrics r = extract_metrics(t, path);
  if (stats.skipped_records > 0) {
    r.notes.push_back(std::to_string(stats.skipped_records) +
                      " malformed records skipped (first: " + stats.first_problem + ")");
  }
  return r;
}

RunMetrics load_trace_text(const std::string& text, const std::string& path) {
  ReadStats stats;
  const Trace t = read_chrome_trace_string(text, path, &stats);
  return trace_metrics(t, stats, path);
}

}  // namespace

RunMetrics load_run_metrics(const std::string& path, std::int64_t max_bytes) {
  namespace fs = std::filesystem;
  core::check_input_file(path, "trace or summary file", kInputHint);  // missing, a directory
  std::error_code ec;
  const auto size = static_cast<std::int64_t>(fs::file_size(path, ec));
  if (ec) throw InputError(path, "", "cannot read its size: " + ec.message(), kInputHint);
  if (size == 0) throw InputError(path, "", "the file is empty", kInputHint);
  if (size > max_bytes) {
    throw InputError(path, "",
                     "the file is " + gib_text(size) + ", over the limit of " + gib_text(max_bytes),
                     "raise it with --max-size if this machine has the memory (about 10x the "
                     "uncompressed size)");
  }
  try {
    if (!looks_like_gzip(path) && size <= kSummaryProbeBytes) {
      const std::string text = core::read_text_file(path, "trace or summary file", kInputHint);
      core::check_json_depth(text, path);  // before either parser (docs/limits.md)
      const std::size_t first = text.find_first_not_of(" \t\r\n");
      const bool object = first != std::string::npos && text[first] == '{';
      if (object && text.find("\"traceEvents\"") == std::string::npos) {
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(text);
        } catch (const nlohmann::json::parse_error& e) {
          throw InputError(path, "", std::string("malformed JSON: ") + e.what(),
                           "is the file truncated?");
        }
        if (is_summary_json(j)) return metrics_from_summary(j, path);
        throw InputError(path, "",
                         "neither a trace (no traceEvents) nor a summary (no step_time_s/per_gpu)",
                         "pass a Chrome/Kineto trace or a summary written by `simrun --summary`");
      }
      return load_trace_text(text, path);
    }
    ReadStats stats;
    const Trace t = read_chrome_trace_file(path, &stats);
    return trace_metrics(t, stats, path);
  } catch (const std::bad_alloc&) {
    throw InputError(path, "", "out of memory while reading the file",
                     "lower its size or use a bigger machine");
  }
}

}  // namespace csim::prof
