// The whole simview UI for one frame (Dear ImGui, no backend): the open traces, the tabs
// (timeline, memory, statistics, compare) and the scenario panel. The GLFW/OpenGL window around it
// is in app.cpp; tests and the benchmark drive Viewer::frame() directly.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gui/document.hpp"
#include "gui/panels.hpp"
#include "gui/scenario_runner.hpp"
#include "gui/timeline_view.hpp"

namespace csim::gui {

enum class Tab { kTimeline, kMemory, kStats, kCompare };

// "timeline", "memory", "stats" (or "statistics"), "compare"; false otherwise.
bool parse_tab(const std::string& s, Tab* out);

class Viewer {
 public:
  // Adds a trace; it becomes the active one.
  void add_document(std::unique_ptr<Document> doc);
  std::size_t document_count() const { return docs_.size(); }
  const Document* active_document() const;

  // Reads `path` as the scenario the panel edits (throws csim::InputError on a bad file).
  void set_scenario(const std::string& path);
  // Simulates the scenario with the panel's knobs; the result replaces the previous simulated
  // trace. False (and the message in the panel) when parsing or simulating failed.
  bool simulate_scenario();
  // Simulates the three launch / GIL variants of the current knobs and shows them in Compare.
  bool run_variants();
  const std::string& scenario_message() const { return sim_message_; }

  // Zooms the timeline and memory views (and Compare, on the first trace's step) to step N
  // (ProfilerStep#N) from the next frame on; false when the active trace has no such step.
  bool show_step(std::int64_t n);
  // Zooms the timeline and memory views to [start_ns, end_ns] after the active trace's first event.
  void show_range(double start_ns, double end_ns);

  // Shows `t` from the next frame on.
  void select_tab(Tab t);

  // Draws the full UI in a window covering [0, 0, width, height].
  void frame(float width, float height);

  TimeView& time_view() { return view_; }
  MemoryViewState& memory_view_state() { return memory_; }
  TimelineView& timeline() { return timeline_; }
  TimelineSelection& selection() { return selection_; }
  CompareState& compare_state() { return compare_; }

 private:
  void activate(int index);
  void draw_top_bar();
  void draw_scenario_panel();
  void draw_timeline_tab();
  std::vector<const Document*> compare_documents() const;

  std::vector<std::unique_ptr<Document>> docs_;
  std::vector<bool> variant_;  // parallel to docs_: produced by run_variants()
  int active_ = -1;
  int scenario_doc_ = -1;  // index of the trace simulate_scenario() produced

  TimeView view_;  // relative to the active trace's first event
  TimelineView timeline_;
  MemoryViewState memory_;
  CompareState compare_;
  TimelineSelection selection_;
  Tab tab_ = Tab::kTimeline;
  bool force_tab_ = false;
  std::int64_t pending_step_ = -1;                 // show_step() waiting for the plot width
  double range_start_ns_ = 0, range_end_ns_ = -1;  // show_range() waiting for it (end < 0: none)
  bool fit_pending_ = true;                        // fit the whole active trace on the next frame

  std::string scenario_path_;
  core::Scenario scenario_;
  ScenarioKnobs knobs_;
  bool auto_simulate_ = true;
  std::string sim_message_;
  bool sim_ok_ = true;
};

}  // namespace csim::gui
