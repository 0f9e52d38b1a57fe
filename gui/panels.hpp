// The viewer's panels other than the timeline (Dear ImGui): memory, statistics and compare.
// Each draws into the current window; the models they read are built in document.cpp.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "gui/document.hpp"
#include "gui/kernel_compare_model.hpp"
#include "gui/time_axis.hpp"
#include "gui/timeline_view.hpp"

namespace csim::gui {

struct MemoryViewState {
  // One y scale for every GPU (default), or each lane up to its own peak (memory_model.hpp).
  MemoryScale scale = MemoryScale::kShared;
  bool scale_to_capacity = false;  // y axis up to the usable capacity (else: the largest peak)
  float plot_h = 110;              // px per GPU
};

// Per GPU: allocated bytes stacked by category over time (sharing `view`, relative to the
// trace's first event, with the timeline) on a GiB axis with gridlines, capacity line, peak marker,
// device_ids[0] / output_device highlighted with the imbalance, and the OOM point.
void draw_memory_view(const Document& doc, TimeView* view, MemoryViewState* state,
                      float label_width);

// Headline figures and per-GPU breakdown bars (compute, communication, copy, GIL wait, idle).
void draw_stats_view(const Document& doc);

// Two or three traces stacked on one time axis (each relative to its own first event, or lined
// up at the start of a chosen step), compact lanes, then the table of their differences.
// Below the timelines, per filter, every GPU's time in the matching kernels as bars, A's and B's
// on one scale (kernel_compare_model.hpp); the defaults show a mixture of experts' expert
// kernels and its expert-parallel all-to-alls.
struct CompareState {
  TimeView view;                // shared; trace i draws it shifted by its alignment offset
  std::int64_t align_step = 0;  // 0: first events line up; N: ProfilerStep#N starts line up
  std::vector<TimelineView> timelines;
  bool fit_pending = true;
  // One strip per GPU (every GPU collapsed); -1: decide on the first frame (on when a trace has
  // 8 GPUs or more), 0 off, 1 on.
  int gpu_strips = -1;
  std::vector<std::array<char, 96>> filters;  // '|'-separated substrings (kernel_matches)
  // The kernel panel: -1 decide on the first frame (open when some trace has matching kernels),
  // 0 closed, 1 open.
  int kernel_panel = -1;
  struct Cached {
    const Document* doc = nullptr;
    std::string filter;
    KernelComparison k;
  };
  std::vector<Cached> cache;  // compare_kernels() is a pass over every event: once per filter
};
void draw_compare_view(const std::vector<const Document*>& docs, CompareState* state,
                       TimelineSelection* selection);

}  // namespace csim::gui
