// Isolated batches of the flow network (core/engine/flow_network.hpp, "Isolated batches";
// docs/cost-model.md, "Link sharing").
//
// A batch whose flows each run alone on their links gets, from progressive filling, the rate
// min(cap, capacities on the route) per flow (FlowNetwork::solve_single), and keeps it until some
// other flow starts on one of those links: a flow's own completion frees only links nobody else
// uses. So such a batch is stored as one group with one completion-heap entry and no per-link
// lists; the state of each member is what an ordinary flow would hold after its start (remaining
// = bytes as of the start, that rate, that completion time). When a flow starts on a group's link
// the group is materialized into ordinary flows with exactly that state, before the new flow is
// attached, so the recomputation that follows sees what it would have seen without groups.
//
// Index: [SECTION] Start, [SECTION] Materialize, [SECTION] Report
#include <algorithm>
#include <limits>

#include "core/engine/flow_network.hpp"
#include "core/error.hpp"

namespace csim::engine {

// [SECTION] Start --------------------------------------------------------------------------------

// Starts `starts` as one group when it is isolated: every flow has bytes and a route or a cap (so
// it does not complete at once), and its links are crossed by no other flow, group or member of
// the batch. Returns false, having changed nothing, otherwise.
bool FlowNetwork::try_start_group(TimeNs now_ns, std::span<const FlowStartRef> starts,
                                  std::int64_t tag) {
  if (starts.empty()) return false;
  ++epoch_;
  for (const FlowStartRef& st : starts) {
    if (!(st.bytes > 0) || st.rate_cap < 0 || (st.route.empty() && st.rate_cap == 0)) return false;
    for (core::LinkId l : st.route) {
      if (l < 0 || l >= static_cast<core::LinkId>(capacity_.size())) return false;  // asserts later
      if (link_mark_[l] == epoch_ || !link_flows_[l].empty() || link_group_[l] >= 0) return false;
      link_mark_[l] = epoch_;
    }
  }
  int g;
  if (!free_groups_.empty()) {
    g = free_groups_.back();
    free_groups_.pop_back();
  } else {
    g = static_cast<int>(groups_.size());
    groups_.emplace_back();
  }
  const Slot slot = alloc_slot();
  Group& grp = groups_[g];
  grp.members.resize(starts.size());
  grp.order.resize(starts.size());
  grp.next = 0;
  grp.first_seq = static_cast<FlowId>(slot_of_seq_.size());
  grp.tag = tag;
  grp.start_ns = now_ns;
  grp.slot = slot;
  bool in_order = true;  // completion order == start order (the common case: equal flows)
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const FlowStartRef& st = starts[i];
    Member& m = grp.members[i];
    m.route = st.route;
    m.bytes = st.bytes;
    m.cap = st.rate_cap;
    // solve_single's closed form; commit_rate's completion time from remaining = bytes.
    double rate = st.rate_cap > 0 ? st.rate_cap : std::numeric_limits<double>::infinity();
    for (core::LinkId l : st.route) rate = std::min(rate, capacity_[l]);
    m.rate = rate;
    m.finish_ns = now_ns + ceil_to_ns(m.bytes / m.rate * 1e9);
    m.reported = false;
    grp.order[i] = static_cast<int>(i);
    if (i > 0 && m.finish_ns < grp.members[i - 1].finish_ns) in_order = false;
    for (core::LinkId l : st.route) link_group_[l] = g;
    slot_of_seq_.push_back(slot);
  }
  if (!in_order) {
    std::stable_sort(grp.order.begin(), grp.order.end(), [&grp](int a, int b) {
      return grp.members[a].finish_ns < grp.members[b].finish_ns;
    });
  }
  Flow& f = flows_[slot];
  f.route.clear();
  f.pos.clear();
  f.group = g;
  f.seq = grp.first_seq;
  f.tag = tag;
  f.active = true;
  f.done = false;
  f.rate = 0;
  f.remaining = 0;
  f.heap_pos = -1;
  active_count_ += starts.size();
  heap_set(slot, grp.members[grp.order.front()].finish_ns);
  return true;
}

// [SECTION] Materialize --------------------------------------------------------------------------

// The group's unreported members become ordinary flows with the state they would have had: their
// start's remaining bytes, rate and completion time, checkpointed at the start.
void FlowNetwork::materialize(int g) {
  const Slot group_slot = groups_[g].slot;
  for (std::size_t i = 0; i < groups_[g].members.size(); ++i) {
    if (groups_[g].members[i].reported) continue;
    const Slot id = alloc_slot();  // may grow flows_, never groups_
    const Group& grp = groups_[g];
    const Member& m = grp.members[i];
    Flow& f = flows_[id];
    f.route.assign(m.route.begin(), m.route.end());
    f.remaining = f.original = m.bytes;
    f.rate = m.rate;
    f.cap = m.cap;
    f.tag = grp.tag;
    f.seq = grp.first_seq + static_cast<FlowId>(i);
    f.active = true;
    f.done = false;
    f.update_ns = grp.start_ns;
    f.heap_pos = -1;
    f.group = -1;
    slot_of_seq_[static_cast<std::size_t>(f.seq)] = id;
    for (core::LinkId l : m.route) link_group_[l] = -1;
    attach(id);
    heap_set(id, m.finish_ns);
  }
  heap_erase(group_slot);
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
  grp.members.clear();
  grp.order.clear();
  free_groups_.push_back(g);
}

// [SECTION] Report -------------------------------------------------------------------------------

// advance(): the members of the group in slot `id` finished by `now_ns` join finished_list_ and
// free their links; the group is re-keyed at its next completion, or leaves the heap when none is
// left (released after advance() has read the list).
void FlowNetwork::report_group(TimeNs now_ns, Slot id) {
  const int g = flows_[id].group;
  Group& grp = groups_[g];
  while (grp.next < grp.order.size()) {
    const int i = grp.order[grp.next];
    Member& m = grp.members[static_cast<std::size_t>(i)];
    if (m.finish_ns > now_ns) break;
    m.reported = true;
    const FlowId seq = grp.first_seq + i;
    finished_list_.push_back({seq, -1, grp.tag});
    slot_of_seq_[static_cast<std::size_t>(seq)] = -1;
    for (core::LinkId l : m.route) link_group_[l] = -1;
    ++grp.next;
  }
  if (grp.next < grp.order.size()) {
    heap_set(id, grp.members[static_cast<std::size_t>(grp.order[grp.next])].finish_ns);
    return;
  }
  heap_erase(id);
  emptied_groups_.push_back(g);
}

const FlowNetwork::Member* FlowNetwork::member_of(FlowId id) const {
  const Slot s = slot_of_seq_[static_cast<std::size_t>(id)];
  if (s < 0 || flows_[s].group < 0) return nullptr;
  const Group& grp = groups_[flows_[s].group];
  const Member& m = grp.members[static_cast<std::size_t>(id - grp.first_seq)];
  return m.reported ? nullptr : &m;
}

}  // namespace csim::engine
