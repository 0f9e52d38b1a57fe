// Max-min fair sharing of directed links by progressive filling (docs/cost-model.md,
// "Link sharing").
//
// Index: [SECTION] Bookkeeping, [SECTION] Start, [SECTION] Progressive filling, [SECTION] Advance
#include "core/engine/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <tuple>

#include "core/error.hpp"

namespace csim::engine {

namespace {
// A flow whose remaining bytes are at most this fraction of its size counts as finished: the
// floating-point residue of rate * time subtractions (docs/cost-model.md, "Link sharing").
constexpr double kResidueFraction = 1e-6;
}  // namespace

// [SECTION] Bookkeeping --------------------------------------------------------------------------

FlowNetwork::FlowNetwork(const std::vector<core::Link>& links) {
  capacity_.reserve(links.size());
  for (std::size_t i = 0; i < links.size(); ++i) {
    CSIM_ASSERT_MSG(links[i].id == static_cast<core::LinkId>(i), "links must be indexed by id");
    CSIM_ASSERT_MSG(links[i].capacity_bytes_per_s > 0, "a link needs a positive capacity");
    capacity_.push_back(links[i].capacity_bytes_per_s);
  }
  link_flows_.resize(links.size());
  link_mark_.assign(links.size(), 0);
  cap_rem_.assign(links.size(), 0);
  unfixed_.assign(links.size(), 0);
}

// Rounds up, except that a value within 1e-6 ns + 1e-12 relative above an integer counts as that
// integer: floating noise on an exact result (1e6 B at 1e9/3 B/s = 3,000,000.0000000005 ns) must
// not add a nanosecond. A flow may so be reported at most a femtosecond-scale fraction early.
TimeNs FlowNetwork::ceil_to_ns(double ns) {
  if (!(ns > 0)) return 0;
  CSIM_ASSERT_MSG(ns < 9.0e18, "flow completion time overflows int64 ns");
  return static_cast<TimeNs>(std::ceil(ns - 1e-6 - ns * 1e-12));
}

void FlowNetwork::attach(FlowId id) {
  Flow& f = flows_[id];
  f.pos.resize(f.route.size());
  for (std::size_t i = 0; i < f.route.size(); ++i) {
    std::vector<FlowId>& lf = link_flows_[f.route[i]];
    f.pos[i] = static_cast<int>(lf.size());
    lf.push_back(id);
  }
}

void FlowNetwork::detach(FlowId id) {
  Flow& f = flows_[id];
  for (std::size_t i = 0; i < f.route.size(); ++i) {
    std::vector<FlowId>& lf = link_flows_[f.route[i]];
    const int at = f.pos[i];
    const FlowId moved = lf.back();
    lf[at] = moved;
    lf.pop_back();
    if (moved != id) {
      Flow& m = flows_[moved];
      for (std::size_t j = 0; j < m.route.size(); ++j)
        if (m.route[j] == f.route[i]) m.pos[j] = at;
    }
  }
  f.pos.clear();
}

std::size_t FlowNetwork::active() const {
  return active_count_;
}

// Logically const: applying the deferred recomputation changes no observable result, only when it
// is computed.
void FlowNetwork::flush_pending() const {
  const_cast<FlowNetwork*>(this)->flush_pending();
}

double FlowNetwork::rate_of(FlowId id) const {
  flush_pending();
  CSIM_ASSERT(id >= 0 && id < static_cast<FlowId>(flows_.size()));
  return flows_[id].active ? flows_[id].rate : 0.0;
}

double FlowNetwork::remaining_of(FlowId id) const {
  flush_pending();
  CSIM_ASSERT(id >= 0 && id < static_cast<FlowId>(flows_.size()));
  return flows_[id].active ? std::max(flows_[id].remaining, 0.0) : 0.0;
}

TimeNs FlowNetwork::next_completion_ns() const {
  flush_pending();
  return finish_set_.empty() ? -1 : finish_set_.begin()->first;
}

// [SECTION] Start --------------------------------------------------------------------------------

FlowId FlowNetwork::start(TimeNs now_ns, const std::vector<core::LinkId>& route, double bytes,
                          double rate_cap, std::int64_t tag) {
  return start_batch(now_ns, {FlowStart{route, bytes, rate_cap, tag}}).front();
}

std::vector<FlowId> FlowNetwork::start_batch(TimeNs now_ns, const std::vector<FlowStart>& starts) {
  CSIM_ASSERT_MSG(now_ns >= last_ns_, "flows must start in time order");
  if (now_ns != pending_ns_) flush_pending();
  last_ns_ = now_ns;
  std::vector<FlowId> ids;
  ids.reserve(starts.size());
  std::vector<FlowId> seeds;
  for (const FlowStart& s : starts) {
    CSIM_ASSERT(s.rate_cap >= 0);
    for (std::size_t i = 0; i < s.route.size(); ++i) {
      CSIM_ASSERT_MSG(s.route[i] >= 0 && s.route[i] < static_cast<core::LinkId>(capacity_.size()),
                      "route names an unknown link");
      for (std::size_t j = 0; j < i; ++j)
        CSIM_ASSERT_MSG(s.route[i] != s.route[j], "a route crosses the same link twice");
    }
    const FlowId id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
    new_rate_.push_back(0);
    Flow& f = flows_.back();
    f.route = s.route;
    f.remaining = f.original = std::max(s.bytes, 0.0);
    f.cap = s.rate_cap;
    f.tag = s.tag;
    f.active = true;
    f.update_ns = now_ns;
    ++active_count_;
    ids.push_back(id);
    if (f.remaining <= 0 || (f.route.empty() && f.cap == 0)) {
      // Nothing to send, or nothing limits it: completes at once.
      f.done = true;
      f.rate = std::numeric_limits<double>::infinity();
      f.finish_ns = now_ns;
      finish_set_.emplace(now_ns, id);
      continue;
    }
    attach(id);
    seeds.push_back(id);
  }
  // Deferred: consecutive starts at the same time are recomputed together (see flush_pending).
  pending_ns_ = now_ns;
  pending_seeds_.insert(pending_seeds_.end(), seeds.begin(), seeds.end());
  return ids;
}

// [SECTION] Progressive filling ------------------------------------------------------------------

// Max-min fairness by progressive filling (docs/cost-model.md, "Link sharing"): repeatedly take the
// constraint with the smallest fair share (a link's remaining capacity divided by its unfixed
// flows, or a flow's private rate cap), fix its unfixed flows at that share, and subtract them
// from every link they cross. Shares only grow as flows are fixed, so a lazy min-heap with
// per-link version numbers finds the next bottleneck in O(log L). Only the connected component of
// the changed flows is recomputed.
void FlowNetwork::recompute_from(TimeNs now_ns, const std::vector<FlowId>& seed_flows,
                                 const std::vector<core::LinkId>& seed_links) {
  ++epoch_;
  std::vector<FlowId> comp;
  std::vector<core::LinkId> comp_links;
  std::vector<core::LinkId> stack;
  auto visit_link = [&](core::LinkId l) {
    if (link_mark_[l] == epoch_) return;
    link_mark_[l] = epoch_;
    comp_links.push_back(l);
    stack.push_back(l);
  };
  auto visit_flow = [&](FlowId id) {
    if (flow_mark_[id] == epoch_) return;
    flow_mark_[id] = epoch_;
    comp.push_back(id);
    for (core::LinkId l : flows_[id].route) visit_link(l);
  };
  for (FlowId id : seed_flows) visit_flow(id);
  for (core::LinkId l : seed_links) visit_link(l);
  while (!stack.empty()) {
    const core::LinkId l = stack.back();
    stack.pop_back();
    for (FlowId id : link_flows_[l]) visit_flow(id);
  }
  // Deterministic processing order: by id (= start order).
  std::sort(comp.begin(), comp.end());

  // Remaining bytes as of now at the old rates (not yet committed: a flow whose rate does not
  // change keeps its checkpoint and its place in finish_set_); flows within the residue are
  // finished.
  std::vector<FlowId> live;
  live.reserve(comp.size());
  for (FlowId id : comp) {
    Flow& f = flows_[id];
    const double rem_now =
        f.remaining - f.rate * (static_cast<double>(now_ns - f.update_ns) * 1e-9);
    if (rem_now <= kResidueFraction * f.original) {
      finish_set_.erase({f.finish_ns, id});
      f.remaining = 0;
      f.update_ns = now_ns;
      f.rate = 0;
      f.done = true;
      f.finish_ns = now_ns;
      finish_set_.emplace(now_ns, id);
      detach(id);
      continue;
    }
    new_rate_[id] = 0;
    live.push_back(id);
  }

  for (core::LinkId l : comp_links) {
    cap_rem_[l] = capacity_[l];
    unfixed_[l] = static_cast<int>(link_flows_[l].size());
  }
  // Heap entries: (share, kind 0 = link / 1 = private cap, index); smallest first. A link has at
  // most one entry; its key is a lower bound of its current share (shares only grow as flows are
  // fixed), so an entry whose share has grown is pushed back with the current value instead of
  // being updated on every fix.
  using Entry = std::tuple<double, int, std::int64_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (core::LinkId l : comp_links)
    if (unfixed_[l] > 0) heap.emplace(cap_rem_[l] / unfixed_[l], 0, l);
  for (FlowId id : live)
    if (flows_[id].cap > 0) heap.emplace(flows_[id].cap, 1, id);

  auto fix = [&](FlowId id, double rate) {
    new_rate_[id] = rate;
    for (core::LinkId l : flows_[id].route) {
      cap_rem_[l] = std::max(cap_rem_[l] - rate, 0.0);
      --unfixed_[l];
    }
  };
  while (!heap.empty()) {
    const auto [share, kind, index] = heap.top();
    heap.pop();
    if (kind == 1) {
      if (new_rate_[index] == 0) fix(index, share);
      continue;
    }
    const auto l = static_cast<core::LinkId>(index);
    if (unfixed_[l] == 0) continue;
    const double current = cap_rem_[l] / unfixed_[l];
    if (current > share) {
      heap.emplace(current, 0, l);  // stale key: re-queue at the current share
      continue;
    }
    // fix() changes shares, never link membership, so iterating the live list is safe.
    for (FlowId id : link_flows_[l])
      if (new_rate_[id] == 0) fix(id, current);
  }

  for (FlowId id : live) {
    Flow& f = flows_[id];
    const double rate = new_rate_[id];
    CSIM_ASSERT_MSG(rate > 0, "max-min fairness left a flow without bandwidth");
    if (rate == f.rate) continue;  // unchanged: its checkpoint and completion time stay valid
    finish_set_.erase({f.finish_ns, id});  // absent for a flow that has just started
    f.remaining -= f.rate * (static_cast<double>(now_ns - f.update_ns) * 1e-9);
    f.update_ns = now_ns;
    f.rate = rate;
    f.finish_ns = now_ns + ceil_to_ns(f.remaining / f.rate * 1e9);
    finish_set_.emplace(f.finish_ns, id);
  }
}

void FlowNetwork::flush_pending() {
  if (pending_seeds_.empty()) return;
  std::vector<FlowId> seeds;
  seeds.swap(pending_seeds_);
  recompute_from(pending_ns_, seeds, {});
}

// [SECTION] Advance ------------------------------------------------------------------------------

std::vector<std::int64_t> FlowNetwork::advance(TimeNs now_ns) {
  CSIM_ASSERT_MSG(now_ns >= last_ns_, "time must not go backwards");
  flush_pending();
  last_ns_ = now_ns;
  std::vector<FlowId> finished;
  while (!finish_set_.empty() && finish_set_.begin()->first <= now_ns) {
    finished.push_back(finish_set_.begin()->second);
    finish_set_.erase(finish_set_.begin());
  }
  if (finished.empty()) return {};
  std::sort(finished.begin(), finished.end());
  std::vector<core::LinkId> freed;
  std::vector<std::int64_t> tags;
  tags.reserve(finished.size());
  for (FlowId id : finished) {
    Flow& f = flows_[id];
    if (!f.done) {
      freed.insert(freed.end(), f.route.begin(), f.route.end());
      detach(id);
    }
    f.active = false;
    f.done = true;
    f.remaining = 0;
    f.rate = 0;
    f.route.clear();
    f.route.shrink_to_fit();
    --active_count_;
    tags.push_back(f.tag);
  }
  if (!freed.empty()) recompute_from(now_ns, {}, freed);
  return tags;
}

}  // namespace csim::engine
