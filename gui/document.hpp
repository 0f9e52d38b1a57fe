// One trace open in the viewer with everything derived from it: summary, timeline, memory and
// statistics models. Built once when the trace is loaded or simulated; the views only read it.
#pragma once

#include <memory>
#include <string>

#include "gui/memory_model.hpp"
#include "gui/stats_model.hpp"
#include "gui/timeline_model.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/summary.hpp"
#include "profiler/trace.hpp"

namespace csim::gui {

struct Document {
  std::string label;  // shown in tabs and the compare view ("dp.json", "DDP, processes")
  std::string path;   // file it came from ("" when simulated in the viewer)
  prof::Trace trace;
  prof::ReadStats read_stats;
  prof::Summary summary;
  TimelineModel timeline;
  MemoryModel memory;
  StatsModel stats;
  double read_s = 0;   // reading the file (s)
  double index_s = 0;  // building the models (s)
};

// Builds the models of `trace` (summary, timeline, memory, statistics).
std::unique_ptr<Document> make_document(prof::Trace trace, std::string label,
                                        std::string path = {});

// Reads `path` (plain or gzip-compressed Chrome trace JSON) and builds its models; throws
// csim::InputError when the file cannot be read (missing, a directory, nested past the JSON
// limit), is not a trace, or holds no event to show ("[]").
std::unique_ptr<Document> load_document(const std::string& path);

// The file name without directories: "/tmp/dp.json" → "dp.json".
std::string base_name(const std::string& path);

}  // namespace csim::gui
