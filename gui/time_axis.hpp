// Time axis of the viewer: which interval of the trace is on screen (zoom, pan, fit, box zoom) and
// the ruler's ticks, whose unit adapts from ns to s. Plain C++: no ImGui, tested headless.
#pragma once

#include <string>
#include <vector>

#include "core/units.hpp"

namespace csim::gui {

// The visible interval: a pixel x (relative to the plot's left edge) shows time
// t = start_ns + x * ns_per_px. Doubles keep sub-ns precision while zooming deep into a long trace:
// 2^53 ns is 104 days, far beyond any trace, so the arithmetic stays exact to well below a pixel.
struct TimeView {
  double start_ns = 0;   // time at x = 0
  double ns_per_px = 1;  // zoom: nanoseconds per pixel, > 0

  double time_at(double x_px) const { return start_ns + x_px * ns_per_px; }
  double x_of(double t_ns) const { return (t_ns - start_ns) / ns_per_px; }
  double end_ns(double width_px) const { return time_at(width_px); }
};

inline constexpr double kMinNsPerPx = 1e-3;  // deepest zoom: 1000 px per ns
inline constexpr double kMaxNsPerPx = 1e12;  // widest zoom: ~17 min per pixel

// Zooms by `factor` (> 1 zooms in) keeping the time under `x_px` fixed, as Tracy does with the
// wheel.
void zoom_at(TimeView* v, double x_px, double factor);

// Moves the view so that the content follows a drag of `dx_px` pixels (positive: content moves
// right).
void pan_by(TimeView* v, double dx_px);

// Shows [t0, t1] across `width_px`, with `margin` (a fraction of the width) of empty space each
// side.
void fit(TimeView* v, TimeNs t0, TimeNs t1, double width_px, double margin = 0.02);

// Box zoom: the pixels [x0, x1] (either order) fill the width; a box under 2 px wide is ignored.
void zoom_to_box(TimeView* v, double x0_px, double x1_px, double width_px);

// [SECTION] Ruler
// -----------------------------------------------------------------------------------

struct Tick {
  double t_ns = 0;     // tick time
  bool major = false;  // labelled
  std::string label;   // "1.5 ms" on major ticks, "" on minor ones
};

// The tick spacing: the smallest 1, 2 or 5 × 10^k ns whose spacing is at least `min_px` pixels.
// Example: 40 ns/px and min_px 80 → at least 3200 ns → 5000 ns (5 µs).
double tick_step_ns(double ns_per_px, double min_px);

// Major ticks every tick_step_ns(ns_per_px, min_px), labelled relative to `origin_ns` (the trace's
// first timestamp, so a 1e18-ns epoch base does not print as 1e18), and 4 or 5 minor ticks between.
std::vector<Tick> ruler_ticks(const TimeView& v, double width_px, double origin_ns, double min_px);

// A duration or time offset with a unit chosen from its size: 850 → "850 ns", 1500 → "1.5 µs",
// 2.25e6 → "2.25 ms", 3e9 → "3 s"; `step_ns` (when > 0) fixes the precision so that tick labels
// one step apart differ ("1.20 ms", "1.25 ms").
std::string format_time(double ns, double step_ns = 0);

// Bytes with a binary unit: 1536 → "1.5 KiB", 3.2e9 → "2.98 GiB".
std::string format_bytes(double bytes);

// A rate: 2.5e12 FLOP/s → "2.50 TFLOP/s"; 12e9 B/s → "12.0 GB/s" (decimal, as NVIDIA quotes).
std::string format_rate(double per_s, const char* unit);

}  // namespace csim::gui
