// simview's time axis: zoom around the cursor, pan, fit, box zoom, ruler ticks, unit formatting.
#include <catch2/catch.hpp>

#include "gui/time_axis.hpp"

using namespace csim::gui;

TEST_CASE("zoom keeps the time under the cursor fixed", "[gui]") {
  TimeView v{1000.0, 10.0};  // x = 100 px shows 1000 + 100 * 10 = 2000 ns
  zoom_at(&v, 100, 2.0);
  // ns_per_px halves to 5; start = 2000 - 100 * 5 = 1500.
  CHECK(v.ns_per_px == Approx(5.0));
  CHECK(v.start_ns == Approx(1500.0));
  CHECK(v.time_at(100) == Approx(2000.0));
  zoom_at(&v, 100, 0.5);
  CHECK(v.ns_per_px == Approx(10.0));
  CHECK(v.start_ns == Approx(1000.0));
}

TEST_CASE("zoom is clamped to the deepest and widest levels", "[gui]") {
  TimeView v{0, 1};
  for (int i = 0; i < 200; ++i) zoom_at(&v, 0, 10);
  CHECK(v.ns_per_px == Approx(kMinNsPerPx));
  for (int i = 0; i < 200; ++i) zoom_at(&v, 0, 0.1);
  CHECK(v.ns_per_px == Approx(kMaxNsPerPx));
}

TEST_CASE("pan moves the content with the drag", "[gui]") {
  TimeView v{0, 4};
  pan_by(&v, 25);  // content moves right by 25 px = 100 ns: the view starts 100 ns earlier
  CHECK(v.start_ns == Approx(-100.0));
}

TEST_CASE("fit shows the whole interval with margins", "[gui]") {
  TimeView v;
  fit(&v, 1'000'000, 2'000'000, 1000, 0.05);
  // usable 900 px for 1e6 ns → 1111.1 ns/px; start = 1e6 - 50 px * 1111.1.
  CHECK(v.ns_per_px == Approx(1e6 / 900));
  CHECK(v.start_ns == Approx(1e6 - 50 * 1e6 / 900));
  CHECK(v.x_of(1e6) == Approx(50));
  CHECK(v.x_of(2e6) == Approx(950));
}

TEST_CASE("box zoom makes the box fill the width", "[gui]") {
  TimeView v{0, 10};
  zoom_to_box(&v, 300, 100, 1000);  // either order: 100..300 px = 1000..3000 ns
  CHECK(v.start_ns == Approx(1000));
  CHECK(v.ns_per_px == Approx(2.0));
  const TimeView before = v;
  zoom_to_box(&v, 10, 11, 1000);  // under 2 px: ignored
  CHECK(v.start_ns == before.start_ns);
  CHECK(v.ns_per_px == before.ns_per_px);
}

TEST_CASE("tick steps are 1, 2 or 5 times a power of ten", "[gui]") {
  CHECK(tick_step_ns(40, 80) == Approx(5000));   // ≥ 3200 ns → 5 µs
  CHECK(tick_step_ns(1, 80) == Approx(100));     // ≥ 80 ns → 100 ns
  CHECK(tick_step_ns(1e6, 90) == Approx(1e8));   // ≥ 9e7 → 1e8 (100 ms)
  CHECK(tick_step_ns(15, 100) == Approx(2000));  // ≥ 1500 → 2 µs
}

TEST_CASE("ruler ticks cover the view with labelled majors", "[gui]") {
  TimeView v{0, 100};  // 1000 px = 100 µs; majors every 10 µs (≥ 9000 ns)
  const auto ticks = ruler_ticks(v, 1000, 0, 90);
  int majors = 0;
  for (const Tick& t : ticks) {
    if (!t.major) continue;
    ++majors;
    CHECK_FALSE(t.label.empty());
  }
  CHECK(majors == 11);                          // 0, 10, ..., 100 µs
  CHECK(ticks.front().label == "0 \xC2\xB5s");  // the unit follows the step, not the value
  CHECK(ticks[5].label == "10 \xC2\xB5s");      // 1·10^k steps: 5 minor intervals per major
}

TEST_CASE("time units adapt from ns to s", "[gui]") {
  CHECK(format_time(850) == "850 ns");
  CHECK(format_time(1500) == "1.50 \xC2\xB5s");
  CHECK(format_time(2.25e6) == "2.25 ms");
  CHECK(format_time(3e9) == "3.00 s");
  CHECK(format_time(123e6) == "123 ms");
  // Tick labels: precision from the step, so neighbours differ.
  CHECK(format_time(1.25e6, 5e4) == "1.25 ms");
  CHECK(format_time(1.2e6, 5e3) == "1.200 ms");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(3.2e9) == "2.98 GiB");
  CHECK(format_rate(2.5e12, "FLOP/s") == "2.50 TFLOP/s");
}
