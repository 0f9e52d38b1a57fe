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

TEST_CASE("nested events go one row down; rows stay disjoint", "[gui]") {
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

TEST_CASE("layout stacks headers and lanes; collapsing hides lanes", "[gui]") {
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
