// Loading a trace and deriving its models (document.hpp).
#include "gui/document.hpp"

#include <chrono>

#include "core/error.hpp"

namespace csim::gui {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::unique_ptr<Document> make_document(prof::Trace trace, std::string label, std::string path) {
  const auto t0 = std::chrono::steady_clock::now();
  auto d = std::make_unique<Document>();
  d->label = std::move(label);
  d->path = std::move(path);
  d->trace = std::move(trace);
  d->summary = prof::summarize(d->trace);
  d->timeline = build_timeline(d->trace);
  d->memory = build_memory(d->trace, d->summary);
  d->stats = build_stats(d->trace, d->summary);
  d->index_s = seconds_since(t0);
  return d;
}

std::unique_ptr<Document> load_document(const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  prof::ReadStats stats;
  // A missing file, a directory, a binary or too deeply nested one: the reader's InputError.
  prof::Trace trace = prof::read_chrome_trace_file(path, &stats);
  // A well-formed JSON document with nothing to draw ("[]", {"traceEvents": []}, an array of
  // records that are not trace events): nothing to show, so it is refused rather than drawn
  // as an empty window.
  if (trace.events.empty() && trace.counters.empty()) {
    std::string what = "no trace events to show";
    if (stats.skipped_records > 0)
      what += " (" + std::to_string(stats.skipped_records) +
              " records are not trace events; the first: " + stats.first_problem + ")";
    else if (stats.ignored_records > 0)
      what += " (" + std::to_string(stats.ignored_records) +
              " records have no place on a timeline: instant events, unpaired flow ends)";
    throw InputError(path, "traceEvents", what,
                     "open a Chrome trace written by simrun -o, simrun --per-rank or the PyTorch "
                     "profiler (docs/simview.md)");
  }
  const double read_s = seconds_since(t0);
  auto d = make_document(std::move(trace), base_name(path), path);
  d->read_stats = stats;
  d->read_s = read_s;
  return d;
}

}  // namespace csim::gui
