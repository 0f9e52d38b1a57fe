// simview's timeline logic without a window: lane grouping, nesting rows, folding, hit testing,
// vertical layout with collapsing, flows of a selected event, event details.
#include <catch2/catch.hpp>

#include "gui/lane_layout.hpp"
#include "gui/timeline_model.hpp"

using namespace csim;
using namespace csim::gui;
using prof::EventClass;

namespace {

prof::TraceEvent ev(int pid, int tid, TimeNs ts, TimeNs dur, EventClass cls,
                    std::string name = "e") {
  prof::TraceEvent e;
  e.pid = pid;
  e.tid = tid;
  e.ts_ns = ts;
  e.dur_ns = dur;
  e.cls = cls;
  e.name = std::move(name);
  e.cat = cls == EventClass::kAnnotation ? "user_annotation" : "kernel";
  return e;
}

// Two nodes × one GPU each; GPU pids 0 and 1, each with a host thread (tid 1) and a compute
// stream (tid 1000), the stream listed after the host thread in the metadata.
prof::Trace two_node_trace() {
  prof::Trace t;
  for (int p = 0; p < 2; ++p) {
    prof::ProcessInfo pi;
    pi.pid = p;
    pi.name = "node " + std::to_string(p) + " / GPU " + std::to_string(p);
    pi.node = p;
    pi.gpu = p;
    t.processes.push_back(pi);
    t.threads.push_back(prof::ThreadInfo{p, 1, "main", prof::LaneRole::kHost, 0});
    t.threads.push_back(prof::ThreadInfo{p, 1000, "stream 7 compute", prof::LaneRole::kCompute, 1});
  }
  t.events.push_back(ev(1, 1000, 500, 100, EventClass::kCompute));
  t.events.push_back(ev(0, 1, 0, 1000, EventClass::kHost, "forward"));      // parent
  t.events.push_back(ev(0, 1, 100, 50, EventClass::kHost, "launch"));       // child
  t.events.push_back(ev(0, 1, 200, 50, EventClass::kGilWait, "GIL wait"));  // child
  t.events.push_back(ev(0, 1000, 150, 300, EventClass::kCompute, "gemm"));
  t.events.push_back(ev(0, 1, 0, 2000, EventClass::kAnnotation, "ProfilerStep#1"));
  return t;
}

}  // namespace

TEST_CASE("lanes are grouped node → GPU → streams first, then host threads", "[gui]") {
  const prof::Trace t = two_node_trace();
  const TimelineModel m = build_timeline(t);
  REQUIRE(m.nodes.size() == 2);
  REQUIRE(m.gpus.size() == 2);
  CHECK(m.nodes[0].name == "node 0");
  CHECK(m.gpus[0].gpu == 0);
  // GPU 0: the compute stream before the host thread despite the metadata's sort order.
  REQUIRE(m.gpus[0].lanes.size() == 2);
  CHECK(m.lanes[m.gpus[0].lanes[0]].tid == 1000);
  CHECK(m.lanes[m.gpus[0].lanes[1]].tid == 1);
  // ProfilerStep#1 is a step mark, not a lane event: 5 lane events, one step [0, 2000].
  CHECK(m.event_count == 5);
  REQUIRE(m.steps.size() == 1);
  CHECK(m.steps[0].n == 1);
  CHECK(m.steps[0].end == 2000);
  CHECK(m.t_min == 0);
  CHECK(m.t_max == 2000);
}

TEST_CASE("nested events go one row down, rows stay disjoint", "[gui]") {
  const TimelineModel m = build_timeline(two_node_trace());
  const Lane& host = m.lanes[m.lane_of(0, 1)];
  REQUIRE(host.rows.size() == 2);
  CHECK(host.rows[0].spans.size() == 1);  // forward [0, 1000]
  CHECK(host.rows[1].spans.size() == 2);  // launch, GIL wait inside it
  CHECK(host.has_gil_wait);
  // Overlap without nesting: [0,10] then [5,15] lands a row lower, [20,30] back on row 0.
  prof::Trace t;
  t.events = {ev(0, 0, 0, 10, EventClass::kHost), ev(0, 0, 5, 10, EventClass::kHost),
              ev(0, 0, 20, 10, EventClass::kHost)};
  const TimelineModel m2 = build_timeline(t);
  REQUIRE(m2.lanes[0].rows.size() == 2);
  CHECK(m2.lanes[0].rows[0].spans.size() == 2);
  CHECK(m2.lanes[0].rows[1].spans.size() == 1);
}

TEST_CASE("folding merges sub-pixel events into one block", "[gui]") {
  // The example of fold_row's comment: 1 ns/px, min 3 px.
  Row row;
  row.spans = {{0, 1, 0, EventClass::kCompute},
               {2, 3, 1, EventClass::kCompute},
               {4, 5, 2, EventClass::kCompute},
               {10, 30, 3, EventClass::kCommunication}};
  const TimeView v{0, 1};
  const auto items = fold_row(row, v, 100, 3);
  REQUIRE(items.size() == 2);
  CHECK(items[0].count == 3);  // [0,1] [2,3] [4,5] folded
  CHECK(items[0].x0 == Approx(0));
  CHECK(items[0].x1 == Approx(5));
  CHECK(items[1].count == 1);  // [10,30] wide enough on its own
  CHECK(items[1].first == 3);
  CHECK(items[1].x1 == Approx(30));
  // Zoomed in 10x (0.1 ns/px) every span is ≥ 3 px: nothing folds.
  const auto zoomed = fold_row(row, TimeView{0, 0.1}, 400, 3);
  REQUIRE(zoomed.size() == 4);  // the window [0, 40] ns shows them all
  for (const DrawItem& d : zoomed) CHECK(d.count == 1);
}

TEST_CASE("folding a million events draws at most about one block per min_px", "[gui]") {
  Row row;
  row.spans.reserve(1'000'000);
  for (int i = 0; i < 1'000'000; ++i) {
    row.spans.push_back(
        Span{i * 100LL, i * 100LL + 60, static_cast<std::uint32_t>(i), EventClass::kCompute});
  }
  // 1e8 ns over 1000 px: 1e5 ns/px, every event is 0.0006 px wide; contiguous within 40 ns gaps.
  const TimeView v{0, 1e5};
  const auto items = fold_row(row, v, 1000, 3);
  // One long fold: gaps (40 ns) are far below 3 px, so everything merges.
  REQUIRE(items.size() == 1);
  CHECK(items[0].count == 1'000'000);
  // A visible window in the middle only visits what it shows: at 1 ns/px over 1000 px, [5e7,
  // 5e7+1000] holds 10 events of 60 px each: no folding.
  const auto mid = fold_row(row, TimeView{5e7, 1}, 1000, 3);
  CHECK(mid.size() == 11);  // the span ending inside the window's first pixel is included
  std::size_t total = 0;
  for (const DrawItem& d : mid) total += d.count;
  CHECK(total == mid.size());
}

TEST_CASE("folds stop at wide gaps and wide events", "[gui]") {
  Row row;
  // At 10 ns/px, min 3 px = 30 ns: two clusters of 1-ns events 500 ns apart, then a wide event.
  for (int i = 0; i < 5; ++i)
    row.spans.push_back(
        Span{i * 5LL, i * 5LL + 1, static_cast<std::uint32_t>(i), EventClass::kHost});
  for (int i = 0; i < 5; ++i)
    row.spans.push_back(
        Span{500 + i * 5LL, 501 + i * 5LL, static_cast<std::uint32_t>(5 + i), EventClass::kHost});
  row.spans.push_back(Span{540, 1540, 10, EventClass::kCompute});
  const auto items = fold_row(row, TimeView{0, 10}, 200, 3);
  REQUIRE(items.size() == 3);
  CHECK(items[0].count == 5);
  CHECK(items[1].count == 5);
  CHECK(items[2].count == 1);
  CHECK(items[2].cls == EventClass::kCompute);
}

TEST_CASE("span_at finds the event under the cursor or the nearest within tolerance", "[gui]") {
  Row row;
  row.spans = {{100, 200, 0, EventClass::kCompute}, {300, 310, 1, EventClass::kCompute}};
  CHECK(span_at(row, 150, 0) == 0);
  CHECK(span_at(row, 305, 0) == 1);
  CHECK(span_at(row, 250, 0) == -1);
  CHECK(span_at(row, 295, 10) == 1);  // 5 ns before the second
  CHECK(span_at(row, 205, 10) == 0);  // 5 ns after the first
  CHECK(span_at(row, 50, 10) == -1);
  CHECK(span_at(Row{}, 0, 100) == -1);
}

TEST_CASE("layout stacks headers and lanes, collapsing hides lanes", "[gui]") {
  const TimelineModel m = build_timeline(two_node_trace());
  LayoutMetrics k;
  k.node_header_h = 20;
  k.gpu_header_h = 20;
  k.row_h = 10;
  k.lane_gap = 2;
  CollapseState c;
  LaneLayout l = layout_lanes(m, c, k);
  // Per node: node header 20 + GPU header 20 + lanes. Node 0: stream (1 row: 12) + host (2 rows:
  // 22). Node 1: stream only (12). Total = 20+20+12+22 + 20+20+12 = 126.
  CHECK(l.total_h == Approx(126));
  REQUIRE(l.items.size() == 7);
  CHECK(l.items[0].kind == ItemKind::kNodeHeader);
  CHECK(l.items[1].kind == ItemKind::kGpuHeader);
  CHECK(l.items[3].rows == 2);
  // Hit testing: y = 45 is in the stream lane (40..52), y = 65 in the host lane's second row
  // (52..62 first row, 62..72 second, 72..74 gap).
  CHECK(item_at(l, 45) == 2);
  CHECK(item_at(l, 65) == 3);
  CHECK(row_at(l.items[3], 55, k) == 0);
  CHECK(row_at(l.items[3], 65, k) == 1);
  CHECK(row_at(l.items[3], 73, k) == -1);
  CHECK(item_at(l, -1) == -1);
  CHECK(item_at(l, 126) == -1);
  // Collapsing GPU 0 leaves its header; its lanes' flow anchors move to the header's middle.
  c.toggle_gpu(0);
  l = layout_lanes(m, c, k);
  CHECK(l.total_h == Approx(126 - 34));
  CHECK(l.lane_mid_y[m.lane_of(0, 1)] == Approx(30));
  // Collapsing node 1 leaves only its header.
  c.toggle_node(1);
  l = layout_lanes(m, c, k);
  CHECK(l.total_h == Approx(20 + 20 + 20));
  // Compact (compare view): GPU streams and host lanes with GIL waits only — all lanes here.
  k.compact = true;
  CHECK(layout_lanes(m, CollapseState{}, k).items.size() == 7);
}

TEST_CASE("a selected event's flows and details", "[gui]") {
  prof::Trace t = two_node_trace();
  prof::FlowEvent f;
  f.id = 1;
  f.name = "ac2g";
  f.from_pid = 0;
  f.from_tid = 1;
  f.from_ts_ns = 120;  // inside "launch" [100, 150] and "forward" [0, 1000]
  f.to_pid = 0;
  f.to_tid = 1000;
  f.to_ts_ns = 150;  // inside "gemm" [150, 450]
  t.flows.push_back(f);
  t.events[4].args.push_back(prof::Arg{"flops", 3e9});
  t.events[4].args.push_back(prof::Arg{"bytes", std::int64_t{600'000}});
  CHECK(flows_of_event(t, t.events[2]).size() == 1);  // launch
  CHECK(flows_of_event(t, t.events[4]).size() == 1);  // gemm
  CHECK(flows_of_event(t, t.events[3]).empty());      // GIL wait [200, 250]
  const auto d = event_details(t, t.events[4], 0, true);
  auto value = [&](const std::string& key) {
    for (const auto& [k, v] : d) {
      if (k == key) return v;
    }
    return std::string("<missing>");
  };
  CHECK(value("name") == "gemm");
  CHECK(value("duration") == "300 ns");
  // 3e9 FLOPs in 300 ns = 1e16 FLOP/s = 10 PFLOP/s; 600 kB in 300 ns = 2e12 B/s.
  CHECK(value("FLOPs") == "3.00 GFLOP");
  CHECK(value("lane") == "node 0 / GPU 0 / stream 7 compute");
  std::vector<std::string> rates;
  for (const auto& [k, v] : d) {
    if (k == "achieved") rates.push_back(v);
  }
  CHECK(rates == std::vector<std::string>{"2.00 TB/s", "10.0 PFLOP/s"});
}

// [SECTION] Issue 16, item 14: fold colours and the step strip
// ---------------------------------------------------------------------------------

TEST_CASE("a fold takes the colour of the class that fills most of it, not its first event",
          "[gui]") {
  // GPU 0's warm-up of gpt_pipeline_8xa100 in miniature: an input copy leads a run of forwards.
  // At 1 ns/px, min 3 px, every span is under 3 ns and every gap under 3 ns: one fold [0, 11].
  // Time per class: copy 1 ns, compute 3 × 2 = 6 ns → compute, although the copy comes first.
  prof::Trace t;
  t.events = {ev(0, 7, 0, 1, EventClass::kCopy), ev(0, 7, 2, 2, EventClass::kCompute),
              ev(0, 7, 5, 2, EventClass::kCompute), ev(0, 7, 9, 2, EventClass::kCompute)};
  const TimelineModel m = build_timeline(t);
  const Row& row = m.lanes[0].rows[0];
  CHECK(row.classes == std::vector<EventClass>{EventClass::kCopy, EventClass::kCompute});
  // Prefix sums per class (Row::class_time, C = 2): after the 4 spans, copy 1 ns, compute 6 ns.
  REQUIRE(row.class_time.size() == (4 + 1) * 2);
  CHECK(row.class_time[4 * 2 + 0] == 1);
  CHECK(row.class_time[4 * 2 + 1] == 6);
  const auto items = fold_row(row, TimeView{0, 1}, 100, 3);
  REQUIRE(items.size() == 1);
  CHECK(items[0].count == 4);
  CHECK(items[0].cls == EventClass::kCompute);
  // A Row built by hand (no class index) folds to the same colour, summing the spans.
  Row bare;
  bare.spans = row.spans;
  CHECK(fold_row(bare, TimeView{0, 1}, 100, 3)[0].cls == EventClass::kCompute);
  // A tie (copy 2 ns, compute 2 ns) goes to the first span's class.
  prof::Trace tie;
  tie.events = {ev(0, 7, 0, 2, EventClass::kCopy), ev(0, 7, 3, 2, EventClass::kCompute)};
  const TimelineModel mt = build_timeline(tie);
  CHECK(fold_row(mt.lanes[0].rows[0], TimeView{0, 1}, 100, 3)[0].cls == EventClass::kCopy);
  // One-class rows need no sums.
  const TimelineModel one = build_timeline(two_node_trace());
  CHECK(one.lanes[one.lane_of(0, 1000)].rows[0].class_time.empty());
}

TEST_CASE("fold colours from the class prefix sums equal those from summing every span", "[gui]") {
  // 20,000 spans of pseudo-random classes and widths (a fixed LCG: the test is deterministic);
  // at every zoom the indexed row (two lookups per class per fold) must give each fold the same
  // class as the same row without the index (the plain sum over the fold's spans).
  Row indexed;
  std::uint64_t x = 12345;
  auto next = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x >> 33;
  };
  TimeNs t = 0;
  const EventClass classes[] = {EventClass::kCompute, EventClass::kCommunication,
                                EventClass::kCopy};
  for (std::uint32_t i = 0; i < 20'000; ++i) {
    const TimeNs len = 1 + static_cast<TimeNs>(next() % 50);
    indexed.spans.push_back(Span{t, t + len, i, classes[next() % 3]});
    t += len + static_cast<TimeNs>(next() % 20);
  }
  Row bare = indexed;
  index_row_classes(&indexed);
  REQUIRE(indexed.classes.size() == 3);
  for (const double ns_per_px : {1.0, 10.0, 100.0, 1000.0, 10000.0}) {
    const auto a = fold_row(indexed, TimeView{0, ns_per_px}, 800, 3);
    const auto b = fold_row(bare, TimeView{0, ns_per_px}, 800, 3);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].count == b[i].count);
      CHECK(a[i].cls == b[i].cls);
    }
  }
}

namespace {

// A pipeline of two GPUs (pids 0, 1; host thread tid 1 each). GPU 1 (the last stage) reaches
// step 2's first op while GPU 0 still runs step 1's backward, so the stages' spans interleave:
//   GPU 0: ProfilerStep#1 [0, 100), #2 [100, 200)
//   GPU 1: ProfilerStep#1 [10, 80), #2 [80, 190)
// The union of every rank's ProfilerStep#2 would be [80, 200): 120 ns for 100 ns steps, and it
// would overlap step 1 [0, 100).
prof::Trace pipeline_steps_trace() {
  prof::Trace t;
  for (int p = 0; p < 2; ++p) {
    prof::ProcessInfo pi;
    pi.pid = p;
    pi.name = "node 0 / GPU " + std::to_string(p);
    pi.node = 0;
    pi.gpu = p;
    t.processes.push_back(pi);
    t.threads.push_back(prof::ThreadInfo{p, 1, "main", prof::LaneRole::kHost, 0});
  }
  t.events = {ev(1, 1, 10, 70, EventClass::kAnnotation, "ProfilerStep#1"),
              ev(1, 1, 80, 110, EventClass::kAnnotation, "ProfilerStep#2"),
              ev(0, 1, 0, 100, EventClass::kAnnotation, "ProfilerStep#1"),
              ev(0, 1, 100, 100, EventClass::kAnnotation, "ProfilerStep#2"),
              ev(0, 1, 5, 10, EventClass::kHost, "forward")};
  return t;
}

}  // namespace

TEST_CASE("the step strip shows the step thread's ProfilerStep spans, which tile", "[gui]") {
  const TimelineModel m = build_timeline(pipeline_steps_trace());
  // The step thread is GPU 0's host thread (lowest GPU index), listed second in the trace.
  CHECK(m.step_pid == 0);
  CHECK(m.step_tid == 1);
  REQUIRE(m.steps.size() == 2);
  CHECK(m.steps[0].start == 0);
  CHECK(m.steps[0].end == 100);
  CHECK(m.steps[1].start == 100);  // not 80, GPU 1's start
  CHECK(m.steps[1].end == 200);
}

TEST_CASE("the step strip ignores other threads' overlapping spans and tiles bad ones", "[gui]") {
  // DataParallel before issue 16 item 1's fix: a replica thread (pid 1, tid 4) carries a
  // ProfilerStep#2 that starts inside step 1 and runs long; the main thread (pid 0, tid 1) is
  // right. The strip keeps the main thread's steps: step 2 = [100, 200), 100 ns.
  prof::Trace t = pipeline_steps_trace();
  t.events[1] = ev(1, 4, 50, 400, EventClass::kAnnotation, "ProfilerStep#2");
  TimelineModel m = build_timeline(t);
  REQUIRE(m.steps.size() == 2);
  CHECK(m.steps[1].start == 100);
  CHECK(m.steps[1].end - m.steps[1].start == 100);
  // A step the step thread lacks comes from the union of the others: ProfilerStep#3 on GPU 1
  // only, [210, 260) → [210, 260).
  t.events.push_back(ev(1, 1, 210, 50, EventClass::kAnnotation, "ProfilerStep#3"));
  m = build_timeline(t);
  REQUIRE(m.steps.size() == 3);
  CHECK(m.steps[2].start == 210);
  CHECK(m.steps[2].end == 260);
  // Overlapping spans on the step thread itself (a malformed trace): step 2 [90, 200) starts
  // before step 1 ends (100), so the strip starts it at 100; the strip never overlaps.
  t.events[3] = ev(0, 1, 90, 110, EventClass::kAnnotation, "ProfilerStep#2");
  m = build_timeline(t);
  CHECK(m.steps[1].start == 100);
  CHECK(m.steps[1].end == 200);
  for (std::size_t i = 1; i < m.steps.size(); ++i) CHECK(m.steps[i].start >= m.steps[i - 1].end);
}
