// Timeline model: a Trace's events indexed for drawing. Lanes are grouped node → GPU (trace
// process) → lane (stream or host thread); each lane is split into rows by nesting depth so that
// every row holds non-overlapping events sorted by start — which makes their ends sorted too, so
// both the visible range and folding are binary searches (see fold_row). Plain C++, tested
// headless.
//
// Index: [SECTION] Structure, [SECTION] Folding, [SECTION] Queries
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gui/time_axis.hpp"
#include "profiler/trace.hpp"

namespace csim::gui {

// [SECTION] Structure
// -------------------------------------------------------------------------------

struct Span {  // one event as the timeline draws it (24 bytes: a million fit in cache-friendly
               // arrays)
  TimeNs start = 0;         // absolute ns
  TimeNs end = 0;           // start + dur
  std::uint32_t event = 0;  // index into Trace::events
  prof::EventClass cls = prof::EventClass::kOther;
};

struct Row {
  std::vector<Span> spans;  // sorted by start, pairwise disjoint, hence also sorted by end
  // For the colour of folds (fold_row): the distinct classes of `spans` in first-seen order and,
  // when there are two or more, prefix sums of their durations: class_time[k·C + c] = Σ
  // durations of spans[0, k) of class classes[c] (C = classes.size(), k = 0..spans.size()), so a
  // fold's time per class is two lookups whatever its size. Built by index_row_classes (which
  // build_timeline calls); a Row without it still folds right, summing the spans it swallows.
  std::vector<prof::EventClass> classes;
  std::vector<TimeNs> class_time;
};

// Fills `row->classes` and `row->class_time` from `row->spans` (see Row).
void index_row_classes(Row* row);

struct Lane {
  std::int32_t pid = 0, tid = 0;
  std::string name;  // ThreadInfo name, or "tid N"
  prof::LaneRole role = prof::LaneRole::kOther;
  std::vector<Row> rows;  // rows[d]: events at nesting depth d
  std::size_t event_count = 0;
  bool has_gil_wait = false;  // some event is a GIL wait (the compare view keeps such host lanes)
};

struct GpuGroup {  // one trace process (a GPU, or a host process in imported traces)
  std::int32_t pid = 0;
  std::string name;         // "node 0 / GPU 1"
  int node = -1, gpu = -1;  // from ProcessInfo (-1: unknown)
  std::vector<int> lanes;   // indices into TimelineModel::lanes, GPU streams first
};

struct NodeGroup {
  int node = -1;          // -1: processes without a node (imported traces)
  std::string name;       // "node 0", "processes"
  std::vector<int> gpus;  // indices into TimelineModel::gpus, by gpu index then pid
};

// One training iteration as the strip under the ruler shows it (docs/simview.md, "Timeline"):
// the ProfilerStep#N span of the trace's *step thread*, the first host thread that carries
// ProfilerStep annotations in lane order (lowest GPU index, then pid, then the thread's sort
// index, then tid): rank 0's training loop, which is what the PyTorch profiler of rank 0 records
// and what Perfetto shows there. Other threads' and ranks' spans are not merged in: a pipeline's
// stages run different parts of neighbouring steps at once, so the union of every rank's
// ProfilerStep#N overlaps the next step and is longer than a step (gpt_pipeline_8xa100: 965 ms
// for 826 ms steps), and DataParallel's replica threads may carry spans that do not nest.
// Step N missing on the step thread: the union over every thread (min start, max end). Steps are
// then made to tile: a start before the previous step's end is moved to that end.
struct StepMark {
  std::int64_t n = 0;         // N
  TimeNs start = 0, end = 0;  // absolute ns
};

struct TimelineModel {
  std::vector<StepMark> steps;  // by N; drawn as one strip under the ruler, not in the lanes
  std::int32_t step_pid = -1, step_tid = -1;  // the step thread (StepMark); -1 without steps
  std::vector<Lane> lanes;
  std::vector<GpuGroup> gpus;
  std::vector<NodeGroup> nodes;
  TimeNs t_min = 0, t_max = 0;  // extent of all events (0, 0 when there are none)
  std::size_t event_count = 0;  // events placed in lanes

  int lane_of(std::int32_t pid, std::int32_t tid) const;  // -1 when absent
  int gpu_of(std::int32_t pid) const;                     // index into gpus, -1 when absent
};

// Builds the model. Events with negative duration are dropped; zero-length ones are kept.
// ProfilerStep#N annotations become `steps` (StepMark: the step thread's spans) instead of lane
// events: every GPU's training loop carries them, and one strip shows them once. Nesting:
// an event goes one row below the innermost still-open event of its lane (a stack), so an event at
// depth d starts after the previous one at depth d has ended — rows stay disjoint even when a
// trace's events overlap without nesting (they then land one row lower).
TimelineModel build_timeline(const prof::Trace& trace);

// "ProfilerStep#12" → 12 (Kineto's per-iteration annotation); false for other names.
bool profiler_step_number(std::string_view name, std::int64_t* n);

// [SECTION] Folding
// ---------------------------------------------------------------------------------

struct DrawItem {
  double x0 = 0, x1 = 0;    // pixels relative to the plot's left edge (x1 >= x0 + 1 for folds)
  std::uint32_t first = 0;  // index of the first span in the row
  std::uint32_t count = 1;  // spans covered: 1 = one real event, > 1 = a folded block
  // The span's class; for a fold, the class that fills most of it: the largest sum of the
  // covered spans' durations (gaps count for none), ties to the first span's class.
  prof::EventClass cls = prof::EventClass::kOther;
};

// What to draw for `row` in the visible window [0, width_px] of `view`. Spans at least `min_px`
// wide are drawn on their own. A narrower span starts a fold that swallows every following span
// that starts less than `min_px` after the fold's current end and ends less than `min_px` later;
// each step of the fold is a binary search on the (sorted) ends and pushes the fold's end at
// least `min_px` further, so a row costs O(min(visible spans, width / min_px) · log n) whatever
// its size. Example at 1 ns/px, min_px 3: spans [0,1] [2,3] [4,5] [10,30] → one fold [0,5] of 3
// spans, then [10,30] on its own. A fold is coloured by the class filling most of it
// (DrawItem::cls), from the row's class prefix sums: O(classes) per fold.
std::vector<DrawItem> fold_row(const Row& row, const TimeView& view, double width_px,
                               double min_px);

// Appends to `out` instead of returning a vector (the draw loop reuses one buffer per frame).
void fold_row_into(const Row& row, const TimeView& view, double width_px, double min_px,
                   std::vector<DrawItem>* out);

// [SECTION] Queries
// ---------------------------------------------------------------------------------

// Index of the span of `row` containing `t_ns`; else the nearest one within `tolerance_ns`; else
// -1.
int span_at(const Row& row, double t_ns, double tolerance_ns);

// Flows with an end inside `event` (same pid/tid, ts within [start, end]): arrows for the
// selection.
std::vector<int> flows_of_event(const prof::Trace& trace, const prof::TraceEvent& event);

// Label/value pairs describing an event for the tooltip and the details panel: name, class,
// category, lane, start (relative to `origin_ns`), duration, then bytes and achieved GB/s
// (bytes / duration) and FLOPs and achieved TFLOP/s (flops / duration) when the event carries the
// "bytes" / "flops" args, then its other args.
std::vector<std::pair<std::string, std::string>> event_details(const prof::Trace& trace,
                                                               const prof::TraceEvent& event,
                                                               TimeNs origin_ns,
                                                               bool include_all_args);

}  // namespace csim::gui
