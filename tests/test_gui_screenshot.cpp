// Checks a simview screenshot (run by gui/screenshot_test.sh under Xvfb): the image is not blank,
// shows events in the class colours, and its lane column has one role swatch per lane the
// timeline model builds from the same trace — the expected lanes, in the expected roles.
// Usage: test_gui_screenshot_check SHOT.png TRACE.json
#include <array>
#include <cstdio>
#include <memory>
#include <set>

#include <stb_image.h>

#include "gui/event_style.hpp"
#include "gui/timeline_model.hpp"
#include "profiler/chrome_trace_reader.hpp"

using namespace csim;
using namespace csim::gui;

namespace {

constexpr std::array<prof::LaneRole, 5> kRoles = {prof::LaneRole::kCompute, prof::LaneRole::kComm,
                                                  prof::LaneRole::kCopy, prof::LaneRole::kHost,
                                                  prof::LaneRole::kOther};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SHOT.png TRACE.json\n", argv[0]);
    return 2;
  }
  int w = 0, h = 0, n = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> img(stbi_load(argv[1], &w, &h, &n, 4),
                                                      stbi_image_free);
  if (!img) {
    std::fprintf(stderr, "FAIL: cannot read %s\n", argv[1]);
    return 1;
  }
  auto px = [&](int x, int y) {
    const unsigned char* p = img.get() + (static_cast<std::size_t>(y) * w + x) * 4;
    return rgba(p[0], p[1], p[2]);
  };
  int failures = 0;

  // Not blank: many distinct colours, and compute-coloured event pixels.
  std::set<Rgba> colours;
  long compute_px = 0;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const Rgba c = px(x, y);
      colours.insert(c);
      compute_px += c == class_colour(prof::EventClass::kCompute);
    }
  }
  std::printf("%dx%d, %zu distinct colours, %ld compute pixels\n", w, h, colours.size(),
              compute_px);
  if (colours.size() < 20) {
    std::printf("FAIL: the image looks blank\n");
    ++failures;
  }
  if (compute_px < 200) {  // the golden Linear(5->2) run is launch-bound: few, thin kernels
    std::printf("FAIL: fewer than 200 pixels are compute events\n");
    ++failures;
  }

  // Lanes: count role swatches (runs of >= 4 px of the exact colour) down each column of the
  // lane-name area; the best column must match the model's lanes per role.
  const TimelineModel m = build_timeline(prof::read_chrome_trace_file(argv[2]));
  std::array<int, 5> expected{};
  for (const Lane& l : m.lanes) ++expected[static_cast<int>(l.role)];
  std::array<int, 5> best{};
  int best_total = -1;
  for (int x = 26; x < std::min(w, 42); ++x) {
    std::array<int, 5> runs{};
    for (std::size_t r = 0; r < kRoles.size(); ++r) {
      int len = 0;
      for (int y = 0; y <= h; ++y) {
        const bool hit = y < h && px(x, y) == role_colour(kRoles[r]);
        if (hit) {
          ++len;
          continue;
        }
        if (len >= 4) ++runs[r];
        len = 0;
      }
    }
    int total = 0;
    for (const int v : runs) total += v;
    if (total > best_total) {
      best_total = total;
      best = runs;
    }
  }
  for (std::size_t r = 0; r < kRoles.size(); ++r) {
    std::printf("%-8s lanes: expected %d, found %d\n", prof::to_string(kRoles[r]), expected[r],
                best[r]);
    if (best[r] != expected[r]) ++failures;
  }
  std::printf(failures == 0 ? "PASS\n" : "FAIL: %d check(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
