// Max-min fair sharing of directed links by progressive filling (docs/cost-model.md,
// "Link sharing").
//
// Index: [SECTION] Bookkeeping, [SECTION] Start, [SECTION] Progressive filling, [SECTION] Advance
#include "core/engine/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>

#include "core/error.hpp"

namespace csim::engine {

namespace {
// A flow whose remaining bytes are at most this fraction of its size counts as finished: the
// floating-point residue of rate * time subtractions (docs/cost-model.md, "Link sharing").
constexpr double kResidueFraction = 1e-6;
}  // namespace

// [SECTION] Bookkeeping --------------------------------------------------------------------------

namespace {
std::vector<double> capacities_of(const std::vector<core::Link>& links) {
  std::vector<double> c;
  c.reserve(links.size());
  for (std::size_t i = 0; i < links.size(); ++i) {
    CSIM_ASSERT_MSG(links[i].id == static_cast<core::LinkId>(i), "links must be indexed by id");
    c.push_back(links[i].capacity_bytes_per_s);
  }
  return c;
}
}  // namespace

FlowNetwork::FlowNetwork(const std::vector<core::Link>& links)
    : FlowNetwork(capacities_of(links)) {}

FlowNetwork::FlowNetwork(const std::vector<double>& capacities) : capacity_(capacities) {
  for (double c : capacity_) CSIM_ASSERT_MSG(c > 0, "a link needs a positive capacity");
  link_flows_.resize(capacity_.size());
  link_members_.assign(capacity_.size(), 0);
  link_mark_.assign(capacity_.size(), 0);
  link_state_.assign(capacity_.size(), 0);
  cap_rem_.assign(capacity_.size(), 0);
  unfixed_.assign(capacity_.size(), 0);
}

// Rounds up, except that a value within 1e-6 ns + 1e-12 relative above an integer counts as that
// integer: floating noise on an exact result (1e6 B at 1e9/3 B/s = 3,000,000.0000000005 ns) must
// not add a nanosecond. A flow may so be reported at most a femtosecond-scale fraction early.
TimeNs FlowNetwork::ceil_to_ns(double ns) {
  if (!(ns > 0)) return 0;
  CSIM_ASSERT_MSG(ns < 9.0e18, "flow completion time overflows int64 ns");
  return static_cast<TimeNs>(std::ceil(ns - 1e-6 - ns * 1e-12));
}

void FlowNetwork::attach(Slot id) {
  Flow& f = flows_[id];
  f.pos.resize(f.route.size());
  for (std::size_t i = 0; i < f.route.size(); ++i) {
    const core::LinkId l = f.route[i];
    std::vector<OnLink>& lf = link_flows_[l];
    ++link_state_[l];
    link_members_[l] += f.mult;
    f.pos[i] = static_cast<int>(lf.size());
    lf.push_back({id, static_cast<int>(i)});
  }
}

void FlowNetwork::detach(Slot id) {
  Flow& f = flows_[id];
  for (std::size_t i = 0; i < f.route.size(); ++i) {
    const core::LinkId l = f.route[i];
    std::vector<OnLink>& lf = link_flows_[l];
    --link_state_[l];
    link_members_[l] -= f.mult;
    const int at = f.pos[i];
    const OnLink moved = lf.back();
    lf[at] = moved;
    lf.pop_back();
    if (moved.slot != id) flows_[moved.slot].pos[moved.hop] = at;
  }
  f.pos.clear();
}

// A reported flow's slot becomes free; its vectors keep their buffers for the next flow.
void FlowNetwork::release(Slot id) {
  Flow& f = flows_[id];
  f.route = {};
  f.owned.clear();
  f.pos.clear();
  f.active = false;
  f.done = true;
  f.remaining = 0;
  f.rate = 0;
  free_slots_.push_back(id);
}

// Completion heap: a binary min-heap on finish_ns whose entries know their position, so a flow's
// completion can move or leave in O(log F). Only the minimum's time is ever read, so the order of
// equal times inside the heap does not matter.
void FlowNetwork::sift_up(int i) {
  const HeapEntry e = heap_[i];
  while (i > 0) {
    const int parent = (i - 1) / 2;
    if (heap_[parent].finish_ns <= e.finish_ns) break;
    heap_[i] = heap_[parent];
    flows_[heap_[i].slot].heap_pos = i;
    i = parent;
  }
  heap_[i] = e;
  flows_[e.slot].heap_pos = i;
}

void FlowNetwork::sift_down(int i) {
  const HeapEntry e = heap_[i];
  const int n = static_cast<int>(heap_.size());
  for (;;) {
    int child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1].finish_ns < heap_[child].finish_ns) ++child;
    if (heap_[child].finish_ns >= e.finish_ns) break;
    heap_[i] = heap_[child];
    flows_[heap_[i].slot].heap_pos = i;
    i = child;
  }
  heap_[i] = e;
  flows_[e.slot].heap_pos = i;
}

void FlowNetwork::heap_set(Slot id, TimeNs finish_ns) {
  Flow& f = flows_[id];
  f.finish_ns = finish_ns;
  if (f.heap_pos < 0) {
    heap_.push_back({finish_ns, id});
    f.heap_pos = static_cast<int>(heap_.size()) - 1;
  } else {
    heap_[f.heap_pos].finish_ns = finish_ns;
  }
  sift_up(f.heap_pos);
  sift_down(flows_[id].heap_pos);
}

void FlowNetwork::heap_erase(Slot id) {
  Flow& f = flows_[id];
  const int i = f.heap_pos;
  if (i < 0) return;
  f.heap_pos = -1;
  const HeapEntry last = heap_.back();
  heap_.pop_back();
  if (last.slot == id) return;
  heap_[i] = last;
  flows_[last.slot].heap_pos = i;
  sift_up(i);
  sift_down(flows_[last.slot].heap_pos);
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
  const Where w = locate(id);
  if (w.group >= 0) return batches_[groups_[w.group].batch].rate[w.index];
  return w.slot >= 0 ? flows_[w.slot].rate : 0.0;
}

double FlowNetwork::remaining_of(FlowId id) const {
  flush_pending();
  const Where w = locate(id);
  // A member's remaining bytes as of its start, its only rate change.
  if (w.group >= 0) return batches_[groups_[w.group].batch].flows[w.index].bytes;
  return w.slot >= 0 ? std::max(flows_[w.slot].remaining, 0.0) : 0.0;
}

// Not a hot path: tests ask for single flows. An ordinary flow is found by its seq, a group's
// member by its group's id range (reported members, order[0, next), are not found).
FlowNetwork::Where FlowNetwork::locate(FlowId id) const {
  CSIM_ASSERT(id >= 0 && id < next_seq_);
  Where w;
  for (std::size_t s = 0; s < flows_.size(); ++s) {
    const Flow& f = flows_[s];
    if (!f.active) continue;
    if (f.group < 0) {
      if (f.seq == id) w.slot = static_cast<Slot>(s);
      if (f.mult > 1) {  // a unit: its members' ids are its first's plus their index offsets
        const Batch& b = batches_[f.batch];
        const int* m = b.unit_members.data() + b.unit_begin[f.unit];
        for (int k = 1; k < f.mult; ++k)
          if (f.seq + (m[k] - m[0]) == id) w.slot = static_cast<Slot>(s);
      }
      continue;
    }
    const Group& grp = groups_[f.group];
    const Batch& b = batches_[grp.batch];
    const FlowId i = id - grp.first_seq;
    if (i < 0 || i >= static_cast<FlowId>(b.flows.size())) continue;
    if (static_cast<std::size_t>(b.rank[i]) >= grp.next) {
      w.group = f.group;
      w.index = static_cast<int>(i);
    }
  }
  return w;
}

TimeNs FlowNetwork::next_completion_ns() const {
  flush_pending();
  return heap_.empty() ? -1 : heap_.front().finish_ns;
}

// [SECTION] Start --------------------------------------------------------------------------------

FlowId FlowNetwork::start(TimeNs now_ns, const std::vector<core::LinkId>& route, double bytes,
                          double rate_cap, std::int64_t tag) {
  // The route is the caller's and may not outlive the call: copied (an ordinary flow, no group).
  CSIM_ASSERT_MSG(now_ns >= last_ns_, "flows must start in time order");
  if (now_ns != pending_ns_) flush_pending();
  last_ns_ = now_ns;
  const FlowId id = next_seq_;
  const Slot slot = start_copied(now_ns, route, bytes, rate_cap, tag);
  if (slot >= 0) pending_seeds_.push_back(slot);
  pending_ns_ = now_ns;
  return id;
}

std::vector<FlowId> FlowNetwork::start_batch(TimeNs now_ns, const std::vector<FlowStart>& starts) {
  const FlowId first = next_seq_;
  start_batch(now_ns, starts.data(), starts.size());
  std::vector<FlowId> ids(starts.size());
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = first + static_cast<FlowId>(i);
  return ids;
}

void FlowNetwork::start_batch(TimeNs now_ns, const FlowStart* starts, std::size_t n) {
  CSIM_ASSERT_MSG(now_ns >= last_ns_, "flows must start in time order");
  if (now_ns != pending_ns_) flush_pending();
  last_ns_ = now_ns;
  for (std::size_t i = 0; i < n; ++i) {
    const FlowStart& st = starts[i];
    const Slot id = start_copied(now_ns, st.route, st.bytes, st.rate_cap, st.tag);
    if (id >= 0) pending_seeds_.push_back(id);
  }
  // Deferred: consecutive starts at the same time are recomputed together (see flush_pending).
  pending_ns_ = now_ns;
}

void FlowNetwork::start_batch(TimeNs now_ns, BatchId batch, std::int64_t tag) {
  CSIM_ASSERT(batch >= 0 && batch < static_cast<BatchId>(batches_.size()));
  CSIM_ASSERT_MSG(now_ns >= last_ns_, "flows must start in time order");
  if (now_ns != pending_ns_) flush_pending();
  last_ns_ = now_ns;
  if (!try_start_group(now_ns, batch, tag)) start_units(now_ns, batches_[batch], batch, tag);
  pending_ns_ = now_ns;
}

void FlowNetwork::start_units(TimeNs now_ns, const Batch& b, BatchId id, std::int64_t tag) {
  const FlowId first_seq = next_seq_;
  next_seq_ += static_cast<FlowId>(b.flows.size());
  for (std::size_t u = 0; u + 1 < b.unit_begin.size(); ++u) {
    const int first = b.unit_members[b.unit_begin[u]];
    const int mult = b.unit_begin[u + 1] - b.unit_begin[u];
    const FlowStartRef& st = b.flows[first];
    const Slot slot =
        start_one(now_ns, st.route, st.bytes, st.rate_cap, tag, first_seq + first, mult, false);
    if (slot < 0) continue;
    flows_[slot].batch = id;
    flows_[slot].unit = static_cast<int>(u);
    pending_seeds_.push_back(slot);
  }
}

FlowNetwork::Slot FlowNetwork::alloc_slot() {
  if (!free_slots_.empty()) {
    const Slot id = free_slots_.back();
    free_slots_.pop_back();
    return id;
  }
  flows_.emplace_back();
  flow_mark_.push_back(0);
  new_rate_.push_back(0);
  return static_cast<Slot>(flows_.size()) - 1;
}

// A route and cap as every flow needs them (a registered batch's are checked once, when
// registered).
void FlowNetwork::check_route(std::span<const core::LinkId> route, double rate_cap) const {
  CSIM_ASSERT(rate_cap >= 0);
  for (std::size_t i = 0; i < route.size(); ++i) {
    CSIM_ASSERT_MSG(route[i] >= 0 && route[i] < static_cast<core::LinkId>(capacity_.size()),
                    "route names an unknown link");
    for (std::size_t j = 0; j < i; ++j)
      CSIM_ASSERT_MSG(route[i] != route[j], "a route crosses the same link twice");
  }
}

FlowNetwork::Slot FlowNetwork::start_copied(TimeNs now_ns, std::span<const core::LinkId> route,
                                            double bytes, double rate_cap, std::int64_t tag) {
  check_route(route, rate_cap);
  return start_one(now_ns, route, bytes, rate_cap, tag, next_seq_++, 1, true);
}

FlowNetwork::Slot FlowNetwork::start_one(TimeNs now_ns, std::span<const core::LinkId> route,
                                         double bytes, double rate_cap, std::int64_t tag,
                                         FlowId seq, int mult, bool owned) {
  // A group on one of these links is no longer isolated: its members become ordinary flows first.
  for (core::LinkId l : route)
    if (link_state_[l] < 0) materialize(-1 - link_state_[l]);
  const Slot id = alloc_slot();
  Flow& f = flows_[id];
  if (owned) {
    f.owned.assign(route.begin(), route.end());
    f.route = f.owned;
  } else {
    f.route = route;
  }
  f.remaining = f.original = std::max(bytes, 0.0);
  f.rate = 0;
  f.cap = rate_cap;
  f.tag = tag;
  f.group = -1;
  f.seq = seq;
  f.mult = mult;
  f.batch = f.unit = -1;
  f.active = true;
  f.done = false;
  f.update_ns = now_ns;
  f.heap_pos = -1;
  active_count_ += static_cast<std::size_t>(mult);
  if (f.remaining <= 0 || (f.route.empty() && f.cap == 0)) {
    // Nothing to send, or nothing limits it: completes at once.
    f.done = true;
    f.rate = std::numeric_limits<double>::infinity();
    heap_set(id, now_ns);
    return -1;
  }
  attach(id);
  return id;
}

// [SECTION] Progressive filling ------------------------------------------------------------------

// Max-min fairness by progressive filling (docs/cost-model.md, "Link sharing"): repeatedly take the
// constraint with the smallest fair share (a link's remaining capacity divided by its unfixed
// flows, or a flow's private rate cap), fix its unfixed flows at that share, and subtract them
// from every link they cross. Shares only grow as flows are fixed, so a lazy min-heap with
// per-link version numbers finds the next bottleneck in O(log L). Only the connected components of
// the changed flows are recomputed, each on its own: fixing flows in one component never changes a
// share in another, so solving them apart gives the same rates, bit for bit, as solving them
// together.
void FlowNetwork::recompute_from(TimeNs now_ns, const std::vector<Slot>& seed_flows,
                                 const std::vector<core::LinkId>& seed_links) {
  ++epoch_;
  auto visit_link = [&](core::LinkId l) {
    if (link_mark_[l] == epoch_) return;
    link_mark_[l] = epoch_;
    comp_links_.push_back(l);
    stack_.push_back(l);
  };
  auto visit_flow = [&](Slot id) {
    if (flow_mark_[id] == epoch_) return;
    flow_mark_[id] = epoch_;
    comp_.push_back(id);
    for (core::LinkId l : flows_[id].route) visit_link(l);
  };
  auto solve_from = [&](auto seed) {
    comp_.clear();
    comp_links_.clear();
    stack_.clear();
    seed();
    while (!stack_.empty()) {
      const core::LinkId l = stack_.back();
      stack_.pop_back();
      for (const OnLink& on : link_flows_[l]) visit_flow(on.slot);
    }
    solve_component(now_ns);
  };
  for (Slot id : seed_flows)
    if (flow_mark_[id] != epoch_) solve_from([&] { visit_flow(id); });
  for (core::LinkId l : seed_links)
    if (link_mark_[l] != epoch_) solve_from([&] { visit_link(l); });
}

// Remaining bytes as of now at the old rate (not yet committed: a flow whose rate does not change
// keeps its checkpoint and its place in the completion heap); a flow within the residue is
// finished.
bool FlowNetwork::finish_if_residue(TimeNs now_ns, Slot id) {
  Flow& f = flows_[id];
  const double rem_now = f.remaining - f.rate * (static_cast<double>(now_ns - f.update_ns) * 1e-9);
  if (rem_now > kResidueFraction * f.original) return false;
  f.remaining = 0;
  f.update_ns = now_ns;
  f.rate = 0;
  f.done = true;
  heap_set(id, now_ns);
  detach(id);
  return true;
}

void FlowNetwork::commit_rate(TimeNs now_ns, Slot id, double rate) {
  Flow& f = flows_[id];
  CSIM_ASSERT_MSG(rate > 0, "max-min fairness left a flow without bandwidth");
  if (rate == f.rate) return;  // unchanged: its checkpoint and completion time stay valid
  f.remaining -= f.rate * (static_cast<double>(now_ns - f.update_ns) * 1e-9);
  f.update_ns = now_ns;
  f.rate = rate;
  heap_set(id, now_ns + ceil_to_ns(f.remaining / f.rate * 1e9));
}

// A flow (its m members) alone on its links: progressive filling pops its tightest constraint
// first, a link at capacity / m or its cap (a link first on a tie), and fixes every member there,
// i.e. at min(cap, capacities / m on the route): the same value, computed in O(R).
void FlowNetwork::solve_single(TimeNs now_ns, Slot id) {
  if (finish_if_residue(now_ns, id)) return;
  const Flow& f = flows_[id];
  double rate = f.cap > 0 ? f.cap : std::numeric_limits<double>::infinity();
  const double m = f.mult;  // C / 1.0 == C exactly: one flow's rate is unchanged
  for (core::LinkId l : f.route) rate = std::min(rate, capacity_[l] / m);
  commit_rate(now_ns, id, rate);
}

void FlowNetwork::solve_component(TimeNs now_ns) {
  if (comp_.empty()) return;
  if (comp_.size() == 1) {
    solve_single(now_ns, comp_.front());
    return;
  }
  // The order of comp_ does not matter: every pass fixes its flows at one value, and the heap's
  // keys are distinct.
  live_.clear();
  for (Slot id : comp_) {
    if (finish_if_residue(now_ns, id)) continue;
    new_rate_[id] = 0;
    live_.push_back(id);
  }

  for (core::LinkId l : comp_links_) {
    cap_rem_[l] = capacity_[l];
    unfixed_[l] = link_members_[l];
  }
  // A link has at most one entry; its key is a lower bound of its current share (shares only grow
  // as flows are fixed), so an entry whose share has grown is pushed back with the current value
  // instead of being updated on every fix. Smallest (share, kind, order) first.
  const std::greater<FillEntry> later;
  fill_heap_.clear();
  auto push = [&](double share, int kind, std::int64_t order, std::int64_t index) {
    fill_heap_.emplace_back(share, kind, order, index);
    std::push_heap(fill_heap_.begin(), fill_heap_.end(), later);
  };
  for (core::LinkId l : comp_links_)
    if (unfixed_[l] > 0) push(cap_rem_[l] / unfixed_[l], 0, l, l);
  for (Slot id : live_)
    if (flows_[id].cap > 0) push(flows_[id].cap, 1, flows_[id].seq, id);

  // A unit's members each subtract their rate in turn: the arithmetic of separate flows.
  auto fix = [&](Slot id, double rate) {
    new_rate_[id] = rate;
    const int mult = flows_[id].mult;
    for (core::LinkId l : flows_[id].route) {
      for (int k = 0; k < mult; ++k) cap_rem_[l] = std::max(cap_rem_[l] - rate, 0.0);
      unfixed_[l] -= mult;
    }
  };
  while (!fill_heap_.empty()) {
    std::pop_heap(fill_heap_.begin(), fill_heap_.end(), later);
    const auto [share, kind, order, index] = fill_heap_.back();
    fill_heap_.pop_back();
    if (kind == 1) {
      if (new_rate_[index] == 0) fix(static_cast<Slot>(index), share);
      continue;
    }
    const auto l = static_cast<core::LinkId>(index);
    if (unfixed_[l] == 0) continue;
    const double current = cap_rem_[l] / unfixed_[l];
    if (current > share) {
      push(current, 0, l, l);  // stale key: re-queue at the current share
      continue;
    }
    // fix() changes shares, never link membership, so iterating the live list is safe.
    for (const OnLink& on : link_flows_[l])
      if (new_rate_[on.slot] == 0) fix(on.slot, current);
  }

  for (Slot id : live_) commit_rate(now_ns, id, new_rate_[id]);
}

void FlowNetwork::flush_pending() {
  if (pending_seeds_.empty()) return;
  std::vector<Slot> seeds;
  seeds.swap(pending_seeds_);
  recompute_from(pending_ns_, seeds, {});
  seeds.clear();
  pending_seeds_.swap(seeds);  // keep the buffer
}

// [SECTION] Advance ------------------------------------------------------------------------------

const std::vector<std::int64_t>& FlowNetwork::advance(TimeNs now_ns) {
  finished_tags_.clear();
  for (const TagCount& run : advance_counts(now_ns))
    finished_tags_.insert(finished_tags_.end(), static_cast<std::size_t>(run.count), run.tag);
  return finished_tags_;
}

const std::vector<FlowNetwork::TagCount>& FlowNetwork::advance_counts(TimeNs now_ns) {
  CSIM_ASSERT_MSG(now_ns >= last_ns_, "time must not go backwards");
  flush_pending();
  last_ns_ = now_ns;
  finished_list_.clear();
  finished_runs_.clear();
  emptied_groups_.clear();
  while (!heap_.empty() && heap_.front().finish_ns <= now_ns) {
    const Slot id = heap_.front().slot;
    if (flows_[id].group >= 0) {
      report_group(now_ns, id);  // re-keys the group at its next completion, or removes it
      continue;
    }
    finished_list_.push_back({flows_[id].seq, flows_[id].mult, id, flows_[id].tag});
    heap_erase(id);
  }
  if (finished_list_.empty()) return finished_runs_;
  // Runs never overlap (a group's ids are its own), so ordering them by first id orders the flows.
  auto by_seq = [](const Finished& a, const Finished& b) { return a.seq < b.seq; };
  if (!std::is_sorted(finished_list_.begin(), finished_list_.end(), by_seq))
    std::sort(finished_list_.begin(), finished_list_.end(), by_seq);
  freed_.clear();
  for (const Finished& fin : finished_list_) {
    if (fin.slot >= 0 && !flows_[fin.slot].done) {
      const Flow& f = flows_[fin.slot];
      freed_.insert(freed_.end(), f.route.begin(), f.route.end());
      detach(fin.slot);
    }
    active_count_ -= static_cast<std::size_t>(fin.count);
    if (!finished_runs_.empty() && finished_runs_.back().tag == fin.tag)
      finished_runs_.back().count += fin.count;
    else
      finished_runs_.push_back({fin.tag, fin.count});
  }
  // Slots are released only after every finished flow has been detached, so none is reused while
  // a link list still names it.
  for (const Finished& fin : finished_list_)
    if (fin.slot >= 0) release(fin.slot);
  for (int g : emptied_groups_) release_group(g);
  if (!freed_.empty()) recompute_from(now_ns, {}, freed_);
  return finished_runs_;
}

}  // namespace csim::engine
