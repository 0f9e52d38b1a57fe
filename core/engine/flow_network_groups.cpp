// Isolated batches of the flow network (core/engine/flow_network.hpp, "Isolated batches";
// docs/cost-model.md, "Link sharing").
//
// A batch whose flows each run alone on their links gets, from progressive filling, the rate
// min(cap, capacities on the route) per flow (FlowNetwork::solve_single), and keeps it until some
// other flow starts on one of those links: a flow's own completion frees only links nobody else
// uses. A batch whose flows share links among themselves gets the rates the ordinary path gives
// it alone (solve_alone), and keeps them as long as every group of flows sharing links ends at
// once. Those rates, and the durations, depend on the batch alone, so they are computed once, when
// it is registered; a start of an isolated batch is then one group with one completion-heap entry.
// Each member's state is what an ordinary flow would hold after its start (remaining = bytes as of
// the start, that rate, that completion time). When a flow starts on a group's link the group is
// materialized into ordinary flows with exactly that state, before the new flow is attached, so the
// recomputation that follows sees what it would have seen without groups.
//
// Index: [SECTION] Register, [SECTION] Start, [SECTION] Materialize, [SECTION] Report
#include <algorithm>
#include <limits>

#include "core/engine/flow_network.hpp"
#include "core/error.hpp"

namespace csim::engine {

// [SECTION] Register -----------------------------------------------------------------------------

FlowNetwork::BatchId FlowNetwork::register_batch(std::span<const FlowStartRef> flows) {
  Batch b;
  b.flows.assign(flows.begin(), flows.end());
  b.groupable = !flows.empty();
  bool shared = false;  // a link crossed by two of the batch's flows
  ++epoch_;
  for (const FlowStartRef& st : flows) {
    check_route(st.route, st.rate_cap);
    b.link_begin.push_back(static_cast<int>(b.links.size()));
    if (!(st.bytes > 0) || (st.route.empty() && st.rate_cap == 0)) b.groupable = false;
    for (core::LinkId l : st.route) {
      CSIM_ASSERT_MSG(l >= 0 && l < static_cast<core::LinkId>(capacity_.size()),
                      "route names an unknown link");
      if (link_mark_[l] == epoch_) {
        shared = true;
      } else {
        link_mark_[l] = epoch_;
        b.claim.push_back(l);
      }
      b.links.push_back(l);
    }
  }
  b.link_begin.push_back(static_cast<int>(b.links.size()));
  group_units(b);
  if (b.groupable) {
    const std::size_t n = flows.size();
    b.rate.resize(n);
    b.duration_ns.resize(n);
    b.order.resize(n);
    b.rank.resize(n);
    if (!shared) {
      for (std::size_t i = 0; i < n; ++i) {
        const FlowStartRef& st = flows[i];
        // solve_single's closed form; commit_rate's completion time from remaining = bytes.
        double rate = st.rate_cap > 0 ? st.rate_cap : std::numeric_limits<double>::infinity();
        for (core::LinkId l : st.route) rate = std::min(rate, capacity_[l]);
        b.rate[i] = rate;
        b.duration_ns[i] = ceil_to_ns(st.bytes / rate * 1e9);
      }
    } else {
      b.groupable = solve_alone(b);
    }
  }
  if (b.groupable) {
    const std::size_t n = flows.size();
    for (std::size_t i = 0; i < n; ++i) b.order[i] = static_cast<int>(i);
    std::stable_sort(b.order.begin(), b.order.end(),
                     [&b](int x, int y) { return b.duration_ns[x] < b.duration_ns[y]; });
    for (std::size_t k = 0; k < n; ++k) b.rank[b.order[k]] = static_cast<int>(k);
    b.uniform = std::all_of(b.duration_ns.begin(), b.duration_ns.end(),
                            [&b](TimeNs d) { return d == b.duration_ns.front(); });
  }
  batches_.push_back(std::move(b));
  return static_cast<BatchId>(batches_.size()) - 1;
}

// Units: flows with equal routes (by content), bytes and caps, each unit's members in increasing
// index, units in the order of their first members.
void FlowNetwork::group_units(Batch& b) {
  const std::vector<FlowStartRef>& fl = b.flows;
  std::vector<int> by_key(fl.size());
  for (std::size_t i = 0; i < fl.size(); ++i) by_key[i] = static_cast<int>(i);
  auto less = [&fl](int x, int y) {
    const FlowStartRef &a = fl[x], &c = fl[y];
    if (a.bytes != c.bytes) return a.bytes < c.bytes;
    if (a.rate_cap != c.rate_cap) return a.rate_cap < c.rate_cap;
    return std::lexicographical_compare(a.route.begin(), a.route.end(), c.route.begin(),
                                        c.route.end());
  };
  std::stable_sort(by_key.begin(), by_key.end(), less);  // equal keys keep increasing index
  std::vector<std::pair<int, int>> runs;                 // (first member, begin in by_key)
  for (std::size_t k = 0; k < by_key.size(); ++k)
    if (k == 0 || less(by_key[k - 1], by_key[k])) runs.emplace_back(by_key[k], static_cast<int>(k));
  const std::size_t n_runs = runs.size();
  runs.emplace_back(-1, static_cast<int>(by_key.size()));
  std::vector<int> ends(n_runs);
  for (std::size_t r = 0; r < n_runs; ++r) ends[r] = runs[r + 1].second;
  std::vector<int> units(n_runs);
  for (std::size_t r = 0; r < n_runs; ++r) units[r] = static_cast<int>(r);
  std::sort(units.begin(), units.end(),
            [&runs](int x, int y) { return runs[x].first < runs[y].first; });
  b.unit_members.clear();
  b.unit_begin.clear();
  for (int r : units) {
    b.unit_begin.push_back(static_cast<int>(b.unit_members.size()));
    b.unit_members.insert(b.unit_members.end(), by_key.begin() + runs[r].second,
                          by_key.begin() + ends[r]);
  }
  b.unit_begin.push_back(static_cast<int>(b.unit_members.size()));
}

// A batch whose flows share links among themselves (a ring collective's channels leaving one GPU
// through its one NVSwitch port): started alone at time 0 in a private network by the ordinary
// path, which is what it would run at any start time T on links nobody else uses (rates depend on
// capacities alone, completion times on T + the same offsets). It keeps those rates until its
// first completion if every link's flows end at the same time, i.e. each connected component of
// the batch ends at once: no member's completion can then raise the rate of a member still
// running, so each member's state is its start's (remaining = bytes, that rate, that completion)
// until it is reported, as for a batch without shared links. Otherwise the batch is not grouped.
bool FlowNetwork::solve_alone(Batch& b) const {
  FlowNetwork alone(capacity_);
  alone.start_units(0, b, -1, 0);
  CSIM_ASSERT(alone.pending_seeds_.size() + 1 == b.unit_begin.size());  // none ends at once
  alone.pending_ns_ = 0;
  alone.flush_pending();
  for (std::size_t u = 0; u + 1 < b.unit_begin.size(); ++u) {
    const Flow& f = alone.flows_[u];  // a fresh network's slots are the units in start order
    for (int k = b.unit_begin[u]; k < b.unit_begin[u + 1]; ++k) {
      b.rate[b.unit_members[k]] = f.rate;
      b.duration_ns[b.unit_members[k]] = f.finish_ns;
    }
  }
  // Every link's flows end together: the first one's duration, per link, in the scratch marks.
  std::vector<TimeNs> end_of_link(capacity_.size(), -1);
  for (std::size_t i = 0; i < b.flows.size(); ++i) {
    for (int k = b.link_begin[i]; k < b.link_begin[i + 1]; ++k) {
      TimeNs& e = end_of_link[static_cast<std::size_t>(b.links[k])];
      if (e >= 0 && e != b.duration_ns[i]) return false;
      e = b.duration_ns[i];
    }
  }
  return true;
}

// [SECTION] Start --------------------------------------------------------------------------------

// Starts the batch as one group when it can form one and none of its links is crossed by another
// flow or group. Returns false, having changed nothing, otherwise.
bool FlowNetwork::try_start_group(TimeNs now_ns, BatchId batch, std::int64_t tag) {
  const Batch& b = batches_[batch];
  if (!b.groupable) return false;
  // The group's id if it forms: the last freed one, else a new one.
  const int g = free_groups_.empty() ? static_cast<int>(groups_.size()) : free_groups_.back();
  // Claim the links (each once) in one pass; on the first one in use, give back those claimed.
  for (std::size_t k = 0; k < b.claim.size(); ++k) {
    const core::LinkId l = b.claim[k];
    if (link_state_[l] != 0) {
      for (std::size_t j = 0; j < k; ++j) link_state_[b.claim[j]] = 0;
      return false;
    }
    link_state_[l] = -1 - g;
  }
  if (!free_groups_.empty())
    free_groups_.pop_back();
  else
    groups_.emplace_back();
  const Slot slot = alloc_slot();
  Group& grp = groups_[g];
  grp.batch = batch;
  grp.next = 0;
  grp.first_seq = next_seq_;
  next_seq_ += static_cast<FlowId>(b.flows.size());
  grp.tag = tag;
  grp.start_ns = now_ns;
  grp.slot = slot;
  Flow& f = flows_[slot];
  f.route = {};
  f.owned.clear();
  f.pos.clear();
  f.group = g;
  f.mult = 1;
  f.batch = f.unit = -1;
  f.seq = grp.first_seq;
  f.tag = tag;
  f.active = true;
  f.done = false;
  f.rate = 0;
  f.remaining = 0;
  f.heap_pos = -1;
  active_count_ += b.flows.size();
  heap_set(slot, now_ns + b.duration_ns[b.order.front()]);
  return true;
}

// [SECTION] Materialize --------------------------------------------------------------------------

// The group's unreported members become ordinary flows with the state they would have had: their
// start's remaining bytes, rate and completion time, checkpointed at the start.
void FlowNetwork::materialize(int g) {
  const Group grp = groups_[g];  // a copy: alloc_slot may grow flows_ (never groups_)
  const Batch& b = batches_[grp.batch];
  auto unreported = [&](std::size_t i) { return static_cast<std::size_t>(b.rank[i]) >= grp.next; };
  // The group's links are free before any member attaches: members sharing a link count each.
  for (std::size_t i = 0; i < b.flows.size(); ++i)
    if (unreported(i))
      for (core::LinkId l : b.flows[i].route) link_state_[l] = 0;
  // A unit's members have one duration, so they are reported together: all or none unreported.
  for (std::size_t u = 0; u + 1 < b.unit_begin.size(); ++u) {
    const int i = b.unit_members[b.unit_begin[u]];
    if (!unreported(static_cast<std::size_t>(i))) continue;
    const Slot id = alloc_slot();
    const FlowStartRef& st = b.flows[i];
    Flow& f = flows_[id];
    f.route = st.route;
    f.owned.clear();
    f.remaining = f.original = st.bytes;
    f.rate = b.rate[i];
    f.cap = st.rate_cap;
    f.tag = grp.tag;
    f.seq = grp.first_seq + static_cast<FlowId>(i);
    f.mult = b.unit_begin[u + 1] - b.unit_begin[u];
    f.batch = grp.batch;
    f.unit = static_cast<int>(u);
    f.active = true;
    f.done = false;
    f.update_ns = grp.start_ns;
    f.heap_pos = -1;
    f.group = -1;
    attach(id);
    heap_set(id, grp.start_ns + b.duration_ns[i]);
  }
  heap_erase(grp.slot);
  release_group(g);
}

void FlowNetwork::release_group(int g) {
  Group& grp = groups_[g];
  Flow& f = flows_[grp.slot];
  f.group = -1;
  f.active = false;
  f.done = true;
  free_slots_.push_back(grp.slot);
  grp.slot = -1;
  grp.batch = -1;
  free_groups_.push_back(g);
}

// [SECTION] Report -------------------------------------------------------------------------------

// advance(): the members of the group in slot `id` finished by `now_ns` join finished_list_ and
// free their links; the group is re-keyed at its next completion, or leaves the heap when none is
// left (released after advance() has read the list).
void FlowNetwork::report_group(TimeNs now_ns, Slot id) {
  const int g = flows_[id].group;
  Group& grp = groups_[g];
  const Batch& b = batches_[grp.batch];
  const std::size_t n = b.flows.size();
  auto add_run = [&](FlowId seq, int count) {
    if (!finished_list_.empty()) {
      Finished& last = finished_list_.back();
      if (last.slot < 0 && last.tag == grp.tag && last.seq + last.count == seq) {
        last.count += count;
        return;
      }
    }
    finished_list_.push_back({seq, count, -1, grp.tag});
  };
  if (b.uniform) {  // popped at its completion, so all have finished
    // All end together (the common case: a ring's equal flows): one run, every link freed.
    add_run(grp.first_seq, static_cast<int>(n));
    for (core::LinkId l : b.links) link_state_[l] = 0;
    grp.next = n;
  } else {
    // Members finished by now, a prefix of the completion order, as runs of consecutive ids.
    while (grp.next < n) {
      const int i = b.order[grp.next];
      if (grp.start_ns + b.duration_ns[i] > now_ns) break;
      add_run(grp.first_seq + i, 1);
      for (int k = b.link_begin[i]; k < b.link_begin[i + 1]; ++k) link_state_[b.links[k]] = 0;
      ++grp.next;
    }
  }
  if (grp.next < n) {
    heap_set(id, grp.start_ns + b.duration_ns[b.order[grp.next]]);
    return;
  }
  heap_erase(id);
  emptied_groups_.push_back(g);
}

}  // namespace csim::engine
