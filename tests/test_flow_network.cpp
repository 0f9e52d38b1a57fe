// Max-min fair link sharing (docs/cost-model.md, "Link sharing"); expected values derived in
// comments, as SimGrid's maxmin tests do.
#include <catch2/catch.hpp>

#include "core/engine/flow_network.hpp"

using namespace csim;
using csim::core::Link;
using csim::engine::FlowNetwork;
using csim::engine::FlowStart;

namespace {

std::vector<Link> make_links(const std::vector<double>& caps) {
  std::vector<Link> links;
  for (std::size_t i = 0; i < caps.size(); ++i) {
    Link l;
    l.id = static_cast<int>(i);
    l.name = "l" + std::to_string(i);
    l.capacity_bytes_per_s = caps[i];
    links.push_back(l);
  }
  return links;
}

}  // namespace

TEST_CASE("a single flow runs at its link's capacity", "[flow]") {
  FlowNetwork net(make_links({1e9}));
  const auto id = net.start(0, {0}, 1e6, 0, 7);
  // 1e6 B / 1e9 B/s = 1 ms
  CHECK(net.rate_of(id) == Approx(1e9));
  CHECK(net.next_completion_ns() == 1000000);
  CHECK(net.advance(999999).empty());
  CHECK(net.advance(1000000) == std::vector<std::int64_t>{7});
  CHECK(net.active() == 0);
  CHECK(net.next_completion_ns() == -1);
}

TEST_CASE("two flows sharing a link get half each", "[flow]") {
  FlowNetwork net(make_links({1e9}));
  const auto a = net.start(0, {0}, 1e6, 0, 1);
  const auto b = net.start(0, {0}, 1e6, 0, 2);
  // 1e9 / 2 = 5e8 each; 1e6 / 5e8 = 2 ms; both finish together, reported in start order
  CHECK(net.rate_of(a) == Approx(5e8));
  CHECK(net.rate_of(b) == Approx(5e8));
  CHECK(net.next_completion_ns() == 2000000);
  CHECK(net.advance(2000000) == std::vector<std::int64_t>{1, 2});
}

TEST_CASE("a capped flow leaves the rest to the other", "[flow]") {
  FlowNetwork net(make_links({1e9}));
  const auto a = net.start(0, {0}, 1e6, 2e8, 1);
  const auto b = net.start(0, {0}, 1e6, 0, 2);
  // a is capped at 2e8 (< fair share 5e8); b takes 1e9 - 2e8 = 8e8
  CHECK(net.rate_of(a) == Approx(2e8));
  CHECK(net.rate_of(b) == Approx(8e8));
  // b: 1e6 / 8e8 = 1.25 ms; then a alone stays at its cap 2e8 (cap < link):
  // a sent 2e8 * 1.25e-3 = 2.5e5, 7.5e5 left / 2e8 = 3.75 ms -> finishes at 5 ms
  CHECK(net.next_completion_ns() == 1250000);
  CHECK(net.advance(1250000) == std::vector<std::int64_t>{2});
  CHECK(net.rate_of(a) == Approx(2e8));
  CHECK(net.next_completion_ns() == 5000000);
  CHECK(net.advance(5000000) == std::vector<std::int64_t>{1});
}

TEST_CASE("a cap on an empty route acts as a private link", "[flow]") {
  FlowNetwork net(make_links({1e9}));
  const auto a = net.start(0, {}, 4e6, 4e9, 3);
  // 4e6 / 4e9 = 1 ms
  CHECK(net.rate_of(a) == Approx(4e9));
  CHECK(net.next_completion_ns() == 1000000);
}

TEST_CASE("parking lot: max-min over three links", "[flow]") {
  // Links L0 = 1e9, L1 = 2e9, L2 = 1e9. Long flow over L0,L1,L2; short flows s0 on L0, s1 on L1,
  // s2 on L2. Progressive filling: shares L0 1e9/2 = 5e8, L1 2e9/2 = 1e9, L2 5e8. Smallest 5e8
  // (L0, first by id): long and s0 fixed at 5e8; L2 then has s2 alone with 5e8 left -> 5e8;
  // L1 has s1 alone with 2e9 - 5e8 = 1.5e9 -> 1.5e9.
  FlowNetwork net(make_links({1e9, 2e9, 1e9}));
  const auto ids = net.start_batch(0, {FlowStart{{0, 1, 2}, 1e6, 0, 0}, FlowStart{{0}, 1e6, 0, 1},
                                       FlowStart{{1}, 3e6, 0, 2}, FlowStart{{2}, 1e6, 0, 3}});
  CHECK(net.rate_of(ids[0]) == Approx(5e8));
  CHECK(net.rate_of(ids[1]) == Approx(5e8));
  CHECK(net.rate_of(ids[2]) == Approx(1.5e9));
  CHECK(net.rate_of(ids[3]) == Approx(5e8));
  // All of long, s0, s2 carry 1e6 at 5e8 -> 2 ms; s1 carries 3e6 at 1.5e9 -> 2 ms: all at 2 ms,
  // reported in start order.
  CHECK(net.next_completion_ns() == 2000000);
  CHECK(net.advance(2000000) == std::vector<std::int64_t>{0, 1, 2, 3});
}

TEST_CASE("rates are recomputed when a flow finishes", "[flow]") {
  FlowNetwork net(make_links({1e9}));
  net.start(0, {0}, 1e6, 0, 1);
  const auto b = net.start(0, {0}, 2e6, 0, 2);
  // Both at 5e8: a finishes at 1e6 / 5e8 = 2 ms; b has 2e6 - 1e6 = 1e6 left, then alone at 1e9:
  // 1 ms more -> 3 ms.
  CHECK(net.advance(net.next_completion_ns()) == std::vector<std::int64_t>{1});
  CHECK(net.rate_of(b) == Approx(1e9));
  CHECK(net.remaining_of(b) == Approx(1e6));
  CHECK(net.next_completion_ns() == 3000000);
}

TEST_CASE("a finished flow's slot is reused without changing ids or report order", "[flow]") {
  FlowNetwork net(make_links({1e9}));
  const auto a = net.start(0, {0}, 1e6, 0, 1);
  const auto b = net.start(0, {0}, 3e6, 0, 2);
  // Both at 5e8: a is done at 1e6 / 5e8 = 2 ms, b has 3e6 - 1e6 = 2e6 left.
  CHECK(net.advance(2000000) == std::vector<std::int64_t>{1});
  CHECK(net.rate_of(a) == 0.0);  // finished flows read 0 even once their storage is reused
  // c takes a's storage but is started after b: its id is the next one, and when both finish
  // together they are reported in start order (b, c). Each at 5e8, 2e6 B: 4 ms more -> 6 ms.
  const auto c = net.start(2000000, {0}, 2e6, 0, 3);
  CHECK(c == b + 1);
  CHECK(net.rate_of(a) == 0.0);
  CHECK(net.rate_of(c) == Approx(5e8));
  CHECK(net.remaining_of(b) == Approx(2e6));
  CHECK(net.next_completion_ns() == 6000000);
  CHECK(net.advance(6000000) == std::vector<std::int64_t>{2, 3});
  CHECK(net.active() == 0);
}

TEST_CASE("a flow started later slows the earlier one", "[flow]") {
  FlowNetwork net(make_links({1e9}));
  const auto a = net.start(0, {0}, 2e6, 0, 1);
  // a alone for 1 ms sends 1e6; then b (1e6) joins: each 5e8; both need 1e6 / 5e8 = 2 ms -> 3 ms.
  CHECK(net.advance(1000000).empty());
  net.start(1000000, {0}, 1e6, 0, 2);
  CHECK(net.rate_of(a) == Approx(5e8));
  CHECK(net.next_completion_ns() == 3000000);
  CHECK(net.advance(3000000) == std::vector<std::int64_t>{1, 2});
}

TEST_CASE("independent components keep their rates", "[flow]") {
  FlowNetwork net(make_links({1e9, 4e9}));
  const auto a = net.start(0, {0}, 1e6, 0, 1);
  const auto b = net.start(0, {1}, 1e6, 0, 2);
  // a on L0 alone 1e9, b on L1 alone 4e9; b done at 0.25 ms; a unchanged, done at 1 ms
  CHECK(net.rate_of(b) == Approx(4e9));
  CHECK(net.advance(250000) == std::vector<std::int64_t>{2});
  CHECK(net.rate_of(a) == Approx(1e9));
  CHECK(net.next_completion_ns() == 1000000);
}

TEST_CASE("empty and zero-byte flows complete at once", "[flow]") {
  FlowNetwork net(make_links({1e9}));
  net.start(500, {}, 1e6, 0, 1);  // nothing limits it
  net.start(500, {0}, 0, 0, 2);   // nothing to send
  CHECK(net.next_completion_ns() == 500);
  CHECK(net.advance(500) == std::vector<std::int64_t>{1, 2});
}

TEST_CASE("floating noise does not add a nanosecond", "[flow]") {
  FlowNetwork net(make_links({1e9}));
  // three flows of 1e6 at 1e9 / 3: 1e6 / 333,333,333.3 = 3 ms exactly in reals
  net.start_batch(
      0, {FlowStart{{0}, 1e6, 0, 1}, FlowStart{{0}, 1e6, 0, 2}, FlowStart{{0}, 1e6, 0, 3}});
  CHECK(net.next_completion_ns() == 3000000);
  CHECK(net.advance(3000000).size() == 3);
  CHECK(FlowNetwork::ceil_to_ns(2.5) == 3);
  CHECK(FlowNetwork::ceil_to_ns(3.0000000000001) == 3);
  CHECK(FlowNetwork::ceil_to_ns(0) == 0);
}

TEST_CASE("many flows: start_batch and staggered finishes stay consistent", "[flow][scale]") {
  // 2,000 links in a chain of pairs, 10,000 flows each over 2 adjacent links. Every flow finishes;
  // total bytes / total capacity bounds the makespan from below.
  const int kLinks = 2000, kFlows = 10000;
  FlowNetwork net(make_links(std::vector<double>(kLinks, 1e9)));
  std::vector<FlowStart> batch;
  for (int i = 0; i < kFlows; ++i)
    batch.push_back(FlowStart{{i % kLinks, (i + 1) % kLinks}, 1e5 * (1 + i % 7), 0, i});
  net.start_batch(0, batch);
  std::vector<std::int64_t> done;
  while (net.next_completion_ns() >= 0) {
    auto tags = net.advance(net.next_completion_ns());
    done.insert(done.end(), tags.begin(), tags.end());
  }
  CHECK(done.size() == static_cast<std::size_t>(kFlows));
  CHECK(net.active() == 0);
}

// [SECTION] Isolated batches (registered batches, core/engine/flow_network_groups.cpp)

namespace {
using csim::engine::FlowStartRef;
using Routes = std::vector<std::vector<csim::core::LinkId>>;

std::vector<FlowStartRef> refs(const Routes& routes, const std::vector<double>& bytes,
                               const std::vector<double>& caps) {
  std::vector<FlowStartRef> out;
  for (std::size_t i = 0; i < routes.size(); ++i) out.push_back({routes[i], bytes[i], caps[i]});
  return out;
}
}  // namespace

TEST_CASE("an isolated batch: each flow at min(cap, route capacity), reported in start order",
          "[flow][group]") {
  FlowNetwork net(make_links({1e9, 2e9, 4e9, 1e9}));
  const Routes routes{{0, 1}, {2}, {3}};  // no link shared: a group
  net.start_batch(0, net.register_batch(refs(routes, {1e6, 4e6, 1e6}, {0, 0, 5e8})), 9);
  // flow 0: min(1e9, 2e9) = 1e9 -> 1 ms; flow 1: 4e9 -> 1 ms; flow 2: cap 5e8 < 1e9 -> 2 ms
  CHECK(net.rate_of(0) == 1e9);
  CHECK(net.rate_of(1) == 4e9);
  CHECK(net.rate_of(2) == 5e8);
  CHECK(net.remaining_of(1) == 4e6);
  CHECK(net.active() == 3);
  CHECK(net.next_completion_ns() == 1000000);
  CHECK(net.advance(1000000) == std::vector<std::int64_t>{9, 9});
  CHECK(net.rate_of(0) == 0);  // reported
  CHECK(net.next_completion_ns() == 2000000);
  CHECK(net.advance(2000000) == std::vector<std::int64_t>{9});
  CHECK(net.active() == 0);
  CHECK(net.next_completion_ns() == -1);
}

TEST_CASE("a flow joining a group's link shares it as if there were no group", "[flow][group]") {
  FlowNetwork net(make_links({1e9, 1e9}));
  const Routes routes{{0}, {1}};
  net.start_batch(0, net.register_batch(refs(routes, {1e6, 1e6}, {0, 0})), 1);
  // At 0.5 ms flow 0 has 5e5 B left; a new flow on link 0 halves it to 5e8:
  // 5e5 / 5e8 = 1 ms more -> 1.5 ms. Flow 1 keeps 1e9 and ends at 1 ms.
  const auto c = net.start(500000, {0}, 1e6, 0, 2);
  CHECK(net.rate_of(0) == Approx(5e8));
  CHECK(net.rate_of(1) == 1e9);
  CHECK(net.rate_of(c) == Approx(5e8));
  CHECK(net.advance(1000000) == std::vector<std::int64_t>{1});
  CHECK(net.next_completion_ns() == 1500000);
  // at 1.5 ms flow 0 ends; c sent 5e5 and has 5e5 left alone at 1e9: 0.5 ms -> 2 ms
  CHECK(net.advance(1500000) == std::vector<std::int64_t>{1});
  CHECK(net.next_completion_ns() == 2000000);
}

TEST_CASE("a batch whose flows share a link and end together is one group", "[flow][group]") {
  // Links 0, 1, 2 of 1 GB/s; flows A {0, 1} and B {0, 2} of 1 MB share link 0: max-min gives
  // each 1e9 / 2 = 5e8 B/s, so both end at 1e6 / 5e8 = 2 ms, together (every link's flows end at
  // once): a group, reported as one run at 2 ms.
  FlowNetwork net(make_links({1e9, 1e9, 1e9}));
  const Routes routes{{0, 1}, {0, 2}};
  net.start_batch(0, net.register_batch(refs(routes, {1e6, 1e6}, {0, 0})), 4);
  CHECK(net.rate_of(0) == 5e8);
  CHECK(net.rate_of(1) == 5e8);
  CHECK(net.next_completion_ns() == 2000000);
  CHECK(net.advance(2000000) == std::vector<std::int64_t>{4, 4});
  CHECK(net.active() == 0);
}

TEST_CASE("a flow joining a shared-link group counts every member on the link", "[flow][group]") {
  // The group above; at 1 ms A and B have 5e5 B left each. C {0} of 1 MB joins link 0: three
  // flows share it at 1e9 / 3 B/s each. A and B: 5e5 / (1e9 / 3) = 1.5 ms -> end at 2.5 ms. C has
  // sent 5e5 by then and sends the other 5e5 alone at 1e9: 0.5 ms -> ends at 3 ms. (Had the
  // materialized group counted one flow on link 0, detaching both would underflow its count.)
  FlowNetwork net(make_links({1e9, 1e9, 1e9}));
  const Routes routes{{0, 1}, {0, 2}};
  net.start_batch(0, net.register_batch(refs(routes, {1e6, 1e6}, {0, 0})), 4);
  const auto c = net.start(1000000, {0}, 1e6, 0, 5);
  CHECK(net.rate_of(0) == Approx(1e9 / 3));
  CHECK(net.rate_of(c) == Approx(1e9 / 3));
  CHECK(net.next_completion_ns() == 2500000);
  CHECK(net.advance(2500000) == std::vector<std::int64_t>{4, 4});
  CHECK(net.rate_of(c) == 1e9);
  CHECK(net.next_completion_ns() == 3000000);
  CHECK(net.advance(3000000) == std::vector<std::int64_t>{5});
  CHECK(net.active() == 0);
}

TEST_CASE("a batch whose flows sharing a link end apart runs as ordinary flows", "[flow][group]") {
  // A {0, 1} of 1 MB and B {0, 2} of 2 MB share link 0 at 5e8 each; A ends at 2 ms and B, with
  // 1 MB left, then runs alone at 1e9: 1 ms more -> 3 ms. A member's completion raises another's
  // rate, so the batch is not grouped, and the results are the ordinary path's.
  FlowNetwork net(make_links({1e9, 1e9, 1e9}));
  const Routes routes{{0, 1}, {0, 2}};
  net.start_batch(0, net.register_batch(refs(routes, {1e6, 2e6}, {0, 0})), 6);
  CHECK(net.next_completion_ns() == 2000000);
  CHECK(net.advance(2000000) == std::vector<std::int64_t>{6});
  CHECK(net.rate_of(1) == 1e9);
  CHECK(net.next_completion_ns() == 3000000);
  CHECK(net.advance(3000000) == std::vector<std::int64_t>{6});
}

TEST_CASE("a registered batch's flows with one route run as one unit, as if apart",
          "[flow][group]") {
  // Links 0, 1 of 1 GB/s. A and A' cross {0} with 1 MB each (two channels between one pair of
  // GPUs: one unit of two members), B crosses {0, 1} with 2 MB. Link 0 counts three members, so
  // each flow gets 1e9 / 3 B/s; A and A' end at 1e6 / (1e9 / 3) = 3 ms. B has sent 1e6 by then
  // and sends the other 1e6 alone at 1e9: 1 ms more -> 4 ms. The link's flows end apart, so the
  // batch is not a group: the unit runs as an ordinary flow, and reports its two members.
  FlowNetwork net(make_links({1e9, 1e9}));
  const Routes routes{{0}, {0, 1}, {0}};  // A, B, A' (a unit of ids 0 and 2)
  net.start_batch(0, net.register_batch(refs(routes, {1e6, 2e6, 1e6}, {0, 0, 0})), 7);
  CHECK(net.active() == 3);
  CHECK(net.rate_of(0) == 1e9 / 3);
  CHECK(net.rate_of(1) == 1e9 / 3);
  CHECK(net.rate_of(2) == 1e9 / 3);
  CHECK(net.next_completion_ns() == 3000000);
  CHECK(net.advance(3000000) == std::vector<std::int64_t>{7, 7});
  CHECK(net.active() == 1);
  CHECK(net.rate_of(2) == 0);  // reported with its unit
  CHECK(net.rate_of(1) == 1e9);
  CHECK(net.next_completion_ns() == 4000000);
  CHECK(net.advance(4000000) == std::vector<std::int64_t>{7});
  CHECK(net.active() == 0);
}

TEST_CASE("groups give the same completions as copied flows, step by step", "[flow][group]") {
  // A deterministic pseudo-random schedule of batches on 16 links, run twice: registered batches
  // (groups where a batch is isolated) and copied routes (never groups). Every completion time,
  // every reported tag list and every rate must be equal, bit for bit. Mode 1: a batch's flows
  // carry equal bytes, so those sharing a link often end together (groups with shared links).
  // Mode 2: equal bytes, and the batch's flows repeated 2 or 3 times after one another, as NCCL's
  // channels repeat a ring's flows: the registered batch runs each repeated flow as one unit
  // (core/engine/flow_network.hpp, "Merged flows"), the copied one as separate flows.
  const int mode = GENERATE(0, 1, 2);
  const bool equal_bytes = mode >= 1;
  const int kLinks = 16;
  std::vector<double> caps;
  for (int i = 0; i < kLinks; ++i) caps.push_back(1e9 * (1 + i % 3));
  FlowNetwork grouped(make_links(caps)), copied(make_links(caps));
  std::uint64_t x = 12345;
  auto next = [&x](int n) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((x >> 33) % static_cast<std::uint64_t>(n));
  };
  std::vector<Routes> kept;  // borrowed routes must outlive the network's use of them
  kept.reserve(400);
  std::vector<std::pair<csim::engine::FlowNetwork::BatchId, std::vector<FlowStart>>> registered;
  csim::TimeNs now = 0;
  std::int64_t checked = 0;
  for (int batch = 0; batch < 400; ++batch) {
    now += next(4) * 400000;
    // Advance both to now, comparing every completion on the way.
    for (;;) {
      const auto a = grouped.next_completion_ns(), b = copied.next_completion_ns();
      REQUIRE(a == b);
      if (a < 0 || a > now) break;
      REQUIRE(grouped.advance(a) == copied.advance(a));
    }
    REQUIRE(grouped.advance(now) == copied.advance(now));
    // Half the time, start a batch registered before again (a cached plan stage's next use).
    if (!registered.empty() && next(2) == 0) {
      const auto& [id, owned] =
          registered[static_cast<std::size_t>(next(static_cast<int>(registered.size())))];
      std::vector<FlowStart> tagged = owned;
      for (FlowStart& f : tagged) f.tag = batch;
      grouped.start_batch(now, id, batch);
      copied.start_batch(now, tagged);
      const auto first = static_cast<csim::engine::FlowId>(checked);
      for (std::size_t f = 0; f < tagged.size(); ++f)
        REQUIRE(grouped.rate_of(first + f) == copied.rate_of(first + f));
      checked += static_cast<std::int64_t>(tagged.size());
      continue;
    }
    Routes routes;
    std::vector<double> bytes, rate_caps;
    const int n = 1 + next(3);
    const double batch_bytes = 1e5 * (1 + next(20));
    for (int f = 0; f < n; ++f) {
      const int a = next(kLinks), len = 1 + next(2);
      std::vector<csim::core::LinkId> r{a};
      if (len == 2) r.push_back((a + 1 + next(kLinks - 1)) % kLinks);
      routes.push_back(r);
      bytes.push_back(equal_bytes ? batch_bytes : 1e5 * (1 + next(20)));
      rate_caps.push_back(next(4) == 0 ? 7e8 : 0.0);
    }
    if (mode == 2) {
      const int channels = 2 + next(2);
      for (int c = 1; c < channels; ++c)
        for (int f = 0; f < n; ++f) {
          routes.push_back(routes[f]);
          bytes.push_back(bytes[f]);
          rate_caps.push_back(rate_caps[f]);
        }
    }
    const int total = static_cast<int>(routes.size());
    kept.push_back(routes);
    std::vector<FlowStart> owned;
    for (int f = 0; f < total; ++f)
      owned.push_back(FlowStart{routes[f], bytes[f], rate_caps[f], batch});
    const auto first = static_cast<csim::engine::FlowId>(checked);
    const auto id = grouped.register_batch(refs(kept.back(), bytes, rate_caps));
    registered.emplace_back(id, owned);
    grouped.start_batch(now, id, batch);
    copied.start_batch(now, owned);
    for (int f = 0; f < total; ++f)
      REQUIRE(grouped.rate_of(first + f) == copied.rate_of(first + f));
    checked += total;
  }
  while (copied.next_completion_ns() >= 0) {
    const auto t = copied.next_completion_ns();
    REQUIRE(grouped.next_completion_ns() == t);
    REQUIRE(grouped.advance(t) == copied.advance(t));
  }
  CHECK(grouped.next_completion_ns() == -1);
  CHECK(grouped.active() == 0);
}

// [SECTION] Event queue (core/engine/event_queue.hpp)

#include "core/engine/event_queue.hpp"

TEST_CASE("event queue: (time, insertion) order with current-time events in a FIFO",
          "[engine][queue]") {
  csim::engine::EventQueue<int> q;
  q.push(10, 1);
  q.push(5, 2);
  q.push(10, 3);
  csim::TimeNs t = -1;
  // 5 first; then, at 10, the two scheduled earlier (1, 3) before one scheduled at 10 (4)
  CHECK(q.pop(&t) == 2);
  CHECK(t == 5);
  q.push(5, 5);  // at the current time: after nothing else at 5, so next
  q.push(10, 6);
  CHECK(q.pop(&t) == 5);
  CHECK(t == 5);
  CHECK(q.pop(&t) == 1);
  CHECK(t == 10);
  q.push(10, 4);  // current time 10: after 3 and 6, scheduled before it
  q.push(12, 7);
  CHECK(q.size() == 4);
  CHECK(q.pop(&t) == 3);
  CHECK(q.pop(&t) == 6);
  CHECK(q.pop(&t) == 4);
  CHECK(t == 10);
  CHECK(q.top_time() == 12);
  CHECK(q.pop(&t) == 7);
  CHECK(t == 12);
  CHECK(q.empty());
}
