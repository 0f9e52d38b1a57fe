// Zoom arithmetic, ruler ticks and unit formatting (time_axis.hpp).
#include "gui/time_axis.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace csim::gui {
namespace {

// Decimals for three significant digits, judged on the value as printed (9.9996 prints "10.0").
int three_digits(double x) {
  const double a = std::fabs(x);
  return a >= 99.95 ? 0 : (a >= 9.995 ? 1 : 2);
}

}  // namespace

void zoom_at(TimeView* v, double x_px, double factor) {
  if (!(factor > 0)) return;
  const double t = v->time_at(x_px);
  v->ns_per_px = std::clamp(v->ns_per_px / factor, kMinNsPerPx, kMaxNsPerPx);
  // Keep t under the cursor: t = start + x * ns_per_px.
  v->start_ns = t - x_px * v->ns_per_px;
}

void pan_by(TimeView* v, double dx_px) {
  v->start_ns -= dx_px * v->ns_per_px;
}

void fit(TimeView* v, TimeNs t0, TimeNs t1, double width_px, double margin) {
  if (width_px < 1) width_px = 1;
  double span = static_cast<double>(t1 - t0);
  if (span <= 0) span = 1000;  // a single instant: show 1 µs around it
  const double usable = width_px * (1.0 - 2.0 * margin);
  v->ns_per_px = std::clamp(span / std::max(usable, 1.0), kMinNsPerPx, kMaxNsPerPx);
  v->start_ns = static_cast<double>(t0) - width_px * margin * v->ns_per_px;
}

void zoom_to_box(TimeView* v, double x0_px, double x1_px, double width_px) {
  const double lo = std::min(x0_px, x1_px), hi = std::max(x0_px, x1_px);
  if (hi - lo < 2 || width_px < 1) return;
  const double t0 = v->time_at(lo), t1 = v->time_at(hi);
  v->ns_per_px = std::clamp((t1 - t0) / width_px, kMinNsPerPx, kMaxNsPerPx);
  v->start_ns = t0;
}

// [SECTION] Ruler
// -----------------------------------------------------------------------------------

double tick_step_ns(double ns_per_px, double min_px) {
  const double want = std::max(ns_per_px * min_px, 1e-3);
  double decade = std::pow(10.0, std::floor(std::log10(want)));
  for (;;) {
    for (const double m : {1.0, 2.0, 5.0}) {
      if (m * decade >= want * (1 - 1e-12)) return m * decade;
    }
    decade *= 10;
  }
}

std::vector<Tick> ruler_ticks(const TimeView& v, double width_px, double origin_ns, double min_px) {
  std::vector<Tick> ticks;
  const double step = tick_step_ns(v.ns_per_px, min_px);
  // 1·10^k and 5·10^k steps split into 5 minor intervals, 2·10^k into 4.
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  const int minor_per_major = std::lround(mantissa) == 2 ? 4 : 5;
  const double minor = step / minor_per_major;
  const double rel0 = v.start_ns - origin_ns;
  const double rel1 = v.end_ns(width_px) - origin_ns;
  // Iterate over integer multiples so that tick positions do not drift by accumulated rounding.
  const auto first = static_cast<long long>(std::floor(rel0 / minor));
  const auto last = static_cast<long long>(std::ceil(rel1 / minor));
  if (last - first > 100000) return ticks;  // degenerate width; never happens with min_px >= 1
  for (long long k = first; k <= last; ++k) {
    const double rel = static_cast<double>(k) * minor;
    Tick t;
    t.t_ns = origin_ns + rel;
    t.major = k % minor_per_major == 0;
    if (t.major) t.label = format_time(rel, step);
    ticks.push_back(std::move(t));
  }
  return ticks;
}

std::string format_time(double ns, double step_ns) {
  struct Unit {
    double ns;
    const char* name;
  };
  static constexpr Unit kUnits[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "\xC2\xB5s"}, {1, "ns"}};
  const double mag = std::max(std::fabs(ns), step_ns);
  const Unit* u = &kUnits[3];
  for (const Unit& c : kUnits) {
    if (mag >= c.ns) {
      u = &c;
      break;
    }
  }
  int decimals = 0;
  if (step_ns > 0) {
    decimals = static_cast<int>(std::ceil(std::log10(u->ns / step_ns) - 1e-9));
  } else {
    const double x = std::fabs(ns) / u->ns;
    decimals = x >= 100 ? 0 : (x >= 10 ? 1 : 2);
  }
  decimals = std::clamp(decimals, 0, 9);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, ns / u->ns, u->name);
  return buf;
}

std::string format_bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  double x = bytes;
  while (std::fabs(x) >= 1024 && i < 4) {
    x /= 1024;
    ++i;
  }
  char buf[48];
  if (i == 0) {
    std::snprintf(buf, sizeof buf, "%.0f B", x);
  } else {
    std::snprintf(buf, sizeof buf, "%.*f %s", three_digits(x), x, kUnits[i]);
  }
  return buf;
}

std::string format_rate(double per_s, const char* unit) {
  static constexpr struct {
    double scale;
    const char* prefix;
  } kPrefixes[] = {{1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}};
  for (const auto& p : kPrefixes) {
    if (std::fabs(per_s) >= p.scale || p.scale == 1) {
      const double x = per_s / p.scale;
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.*f %s%s", three_digits(x), x, p.prefix, unit);
      return buf;
    }
  }
  return {};
}

}  // namespace csim::gui
