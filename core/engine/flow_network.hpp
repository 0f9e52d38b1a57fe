// Flows sharing directed links by max-min fairness (docs/cost-model.md, "Link sharing").
// Rates are recomputed (progressive filling) whenever a flow starts or ends; the caller advances
// time, asks for the next completion and is told which flows finished.
//
// Cost: a start or finish recomputes only the connected components of flows that share links
// (transitively) with the changed flows, each on its own, in O(F_c * R * log(L_c)) for F_c flows
// of route length R over L_c links; other flows keep their rates, which max-min fairness
// guarantees are unchanged. A component of one flow (the common case: a ring's flows each alone
// on their links) takes the closed form min(cap, capacities on its route), O(R), which is what
// progressive filling yields for it exactly.
//
// Isolated batches: a registered batch (register_batch: a plan stage started many times) whose
// links no other flow uses when it starts, and no two of whose flows share a link, is kept as one
// group: its flows' rates are the closed form above, computed once at registration with their
// durations, and cannot change until another flow joins one of its links. A group costs one
// completion-heap entry and O(links) per start, no per-flow state. A flow that starts on a group's
// link first turns the group into ordinary flows with exactly the state they would have had
// (materialize), so results are the same, bit for bit, as without groups.
// Merged flows: a registered batch's flows with the same route, bytes and cap (a ring's channels
// between one pair of GPUs) run as one weighted flow standing for all of them (a unit): each
// member gets the rate progressive filling gives every one of them, computed once, with each link
// counting every member and losing each member's rate in turn, so the arithmetic, and with it the
// results, are those of the members one by one, bit for bit.
// Remaining bytes are updated lazily (only when a flow's rate changes), and completions sit in an
// indexed min-heap, so next_completion_ns() is O(1) and advance() is O(finished * log F) plus the
// recomputation. Storage is O(active flows): a finished flow's slot (and its route's buffer) is
// reused by a later start, and all scratch is kept between calls, so a long run does not allocate
// per flow once warm.
#pragma once

#include <cstdint>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "core/hardware/topology.hpp"
#include "core/units.hpp"

namespace csim::engine {

using FlowId = std::int64_t;

// One flow of a batch (start_batch).
struct FlowStart {
  std::vector<core::LinkId> route;  // directed links crossed, in order (may be empty)
  double bytes = 0;                 // payload; <= 0 completes at once
  double rate_cap = 0;              // bytes/s; 0 = none (a cap acts as a private link)
  std::int64_t tag = 0;             // returned by advance() when the flow finishes
};

// A flow of a registered batch: the route is borrowed and must stay valid (unchanged, at the
// same address) for the network's lifetime, as a Topology's routes do.
struct FlowStartRef {
  std::span<const core::LinkId> route;
  double bytes = 0;
  double rate_cap = 0;
};

class FlowNetwork {
 public:
  explicit FlowNetwork(const std::vector<core::Link>& links);
  explicit FlowNetwork(const std::vector<double>& capacities);  // bytes/s per link id

  // Starts a flow at `now_ns` over `route` (link ids) carrying `bytes`; `rate_cap` 0 = none.
  // An empty route with no cap completes at once (next_completion_ns() == now). The rates are
  // recomputed lazily, before the next query or a start at a later time, so consecutive starts at
  // one time cost a single recomputation, as start_batch does.
  FlowId start(TimeNs now_ns, const std::vector<core::LinkId>& route, double bytes, double rate_cap,
               std::int64_t tag);

  // Starts many flows at `now_ns` and recomputes rates once (a collective's flows start together).
  // Returns their ids, in the order given (ids increase in start order).
  std::vector<FlowId> start_batch(TimeNs now_ns, const std::vector<FlowStart>& flows);
  // The same for flows[0, n), returning nothing: for callers that reuse one FlowStart buffer.
  void start_batch(TimeNs now_ns, const FlowStart* flows, std::size_t n);
  // A batch started many times (one stage of a cached transfer plan): registered once, with what
  // an isolated start needs (rates, durations, completion order) computed then.
  using BatchId = int;
  BatchId register_batch(std::span<const FlowStartRef> flows);
  // Starts a registered batch's flows at `now_ns`, every one tagged `tag`; as start_batch above.
  void start_batch(TimeNs now_ns, BatchId batch, std::int64_t tag);

  // Earliest time a flow finishes at current rates; -1 when no flow is active. Rounded up to whole
  // ns (ceil_to_ns), so a flow is never reported finished before its last byte has been sent.
  TimeNs next_completion_ns() const;

  // Advances to `now_ns` (>= last time) and returns the tags of flows finished by then,
  // in start order. Rates are recomputed if any finished. The list is valid until the next call
  // that changes the network.
  const std::vector<std::int64_t>& advance(TimeNs now_ns);
  // The same as runs of equal tags: (tag, count) in start order, one run per group's finished
  // members instead of one entry per flow.
  struct TagCount {
    std::int64_t tag;
    int count;
  };
  const std::vector<TagCount>& advance_counts(TimeNs now_ns);

  std::size_t active() const;
  double rate_of(FlowId id) const;       // bytes/s, for tests (0 once finished)
  double remaining_of(FlowId id) const;  // bytes left as of the flow's last rate change, for tests

  // The one conversion of a flow's completion time to integer ns: rounds up
  // (docs/cost-model.md, "Determinism").
  static TimeNs ceil_to_ns(double ns);

 private:
  // A flow's storage: slots are reused once a flow has finished and been reported. Public FlowIds
  // are start sequence numbers (seq); every tie is broken by seq, i.e. by start order, whatever
  // slot a flow happens to occupy.
  struct Flow {
    std::span<const core::LinkId> route;      // a registered batch's (borrowed) or `owned`
    std::vector<core::LinkId> owned;          // the copy of an unregistered start's route
    double remaining = 0, rate = 0, cap = 0;  // per member
    std::int64_t tag = 0;
    FlowId seq = -1;  // start order; the public id
    bool active = false;
    double original = 0;   // bytes at start (for the residue test)
    TimeNs update_ns = 0;  // time `remaining` refers to
    TimeNs finish_ns = 0;  // projected completion (key in the completion heap)
    int heap_pos = -1;     // index in heap_, -1 when not queued
    bool done = false;     // completed, waiting for advance() to report it
    std::vector<int> pos;  // pos[i]: index of this flow in link_flows_[route[i]]
    int group = -1;  // >= 0: this slot stands for groups_[group], keyed by its next completion
    int mult = 1;    // flows it stands for: > 1 for a registered batch's merged unit
    int batch = -1;  // a registered batch's flow: its batch and unit (to find its members' ids)
    int unit = -1;
  };
  // A flow on a link, and which of its route's links that is (so a detach moves it in O(1)).
  struct OnLink {
    int slot;
    int hop;
  };
  // A registered batch and, when it can form a group (every flow has bytes and a route or a cap,
  // no link twice), its flows' closed-form rates and durations.
  struct Batch {
    std::vector<FlowStartRef> flows;
    bool groupable = false;
    std::vector<core::LinkId> links;  // every flow's links, flow after flow
    std::vector<core::LinkId> claim;  // its distinct links, in first-crossed order
    std::vector<int> link_begin;      // flow i's links: links[link_begin[i], link_begin[i + 1])
    bool uniform = false;             // every flow has the same duration (they end together)
    std::vector<double> rate;
    std::vector<TimeNs> duration_ns;
    std::vector<int> order;  // flow indices by (duration, index): completion order
    std::vector<int> rank;   // rank[order[k]] == k
    // Units: flows with the same route, bytes and cap, run as one flow of that many members.
    // Unit u's members are unit_members[unit_begin[u], unit_begin[u + 1]), increasing; units are
    // in the order of their first members.
    std::vector<int> unit_members, unit_begin;
  };
  std::vector<Batch> batches_;
  // A started isolated batch: flow i has public id first_seq + i and finishes at start_ns +
  // duration_ns[i]; flows order[0, next) have been reported.
  struct Group {
    BatchId batch = -1;
    std::size_t next = 0;
    FlowId first_seq = 0;
    std::int64_t tag = 0;
    TimeNs start_ns = 0;
    int slot = -1;
  };
  std::vector<Group> groups_;
  std::vector<int> free_groups_;
  // Per link: 0 free, n > 0 ordinary flows attached, -1 - g crossed by an unreported member of
  // group g (never both: a group is materialized before an ordinary flow attaches).
  std::vector<int> link_state_;
  // Finished flows waiting to be reported: one ordinary flow (count 1), or `count` members of a
  // group with consecutive ids from `seq` (slot -1).
  struct Finished {
    FlowId seq;
    int count;
    int slot;
    std::int64_t tag;
  };
  std::vector<Finished> finished_list_;
  std::vector<int> emptied_groups_;
  using Slot = int;
  std::vector<double> capacity_;
  std::vector<Flow> flows_;       // by slot
  std::vector<Slot> free_slots_;  // finished slots, reused last-in first-out
  FlowId next_seq_ = 0;           // the public id of the next flow started
  TimeNs last_ns_ = 0;

  std::vector<std::vector<OnLink>> link_flows_;  // active, not-done flows per link
  std::vector<int> link_members_;                // their members (sum of mult) per link
  // Min-heap of active flows by finish_ns, the key beside the slot (sifting reads no Flow).
  struct HeapEntry {
    TimeNs finish_ns;
    Slot slot;
  };
  std::vector<HeapEntry> heap_;
  std::size_t active_count_ = 0;
  // Scratch for recomputation, sized once; marks compare against an epoch instead of being cleared.
  std::vector<std::uint64_t> link_mark_, flow_mark_;
  std::uint64_t epoch_ = 0;
  std::vector<double> cap_rem_;
  std::vector<int> unfixed_;
  std::vector<double> new_rate_;  // by slot: rate being computed (0 = not fixed yet)
  std::vector<Slot> comp_, live_;
  std::vector<std::int64_t> finished_tags_;
  std::vector<TagCount> finished_runs_;
  std::vector<core::LinkId> comp_links_, stack_, freed_;
  // Progressive-filling heap entries: (share, kind 0 = link / 1 = private cap, order, index):
  // order is the link id or the flow's seq, index the link id or the flow's slot.
  using FillEntry = std::tuple<double, int, std::int64_t, std::int64_t>;
  std::vector<FillEntry> fill_heap_;
  // Starts are recomputed lazily, all at once, before the next query or a start at a later time:
  // a simulator that starts a collective's flows one by one still pays one recomputation.
  std::vector<Slot> pending_seeds_;
  TimeNs pending_ns_ = -1;
  void flush_pending();
  void flush_pending() const;

  Slot alloc_slot();
  bool try_start_group(TimeNs now_ns, BatchId batch, std::int64_t tag);
  bool solve_alone(Batch& b) const;   // a batch with shared links: groupable, rates, durations
  static void group_units(Batch& b);  // b.unit_members, b.unit_begin
  void materialize(int group);
  void report_group(TimeNs now_ns, Slot id);  // advance(): the group's members finished by now
  void release_group(int group);
  // Where flow `id` is while it is active and unreported: an ordinary flow's slot, or a group's
  // member (group and index in its batch); all -1 otherwise.
  struct Where {
    Slot slot = -1;  // an ordinary flow's slot
    int group = -1;  // or a group's member: its group and index in the batch
    int index = -1;
  };
  Where locate(FlowId id) const;  // O(slots): for the test accessors only
  // Places a flow (`mult` members, the first with public id `seq`) in a slot; returns the slot
  // when its rate must be computed, -1 when it completes at once. `owned`: copy the route.
  Slot start_one(TimeNs now_ns, std::span<const core::LinkId> route, double bytes, double rate_cap,
                 std::int64_t tag, FlowId seq, int mult, bool owned);
  void check_route(std::span<const core::LinkId> route, double rate_cap) const;
  // An unregistered flow: its route checked and copied, the next public id.
  Slot start_copied(TimeNs now_ns, std::span<const core::LinkId> route, double bytes,
                    double rate_cap, std::int64_t tag);
  // A registered batch's units as ordinary flows (member i gets the public id next_seq_ + i),
  // queued for the next recomputation. `id`: the batch's id in batches_ (for locate).
  void start_units(TimeNs now_ns, const Batch& b, BatchId id, std::int64_t tag);
  void attach(Slot id);
  void detach(Slot id);
  void release(Slot id);
  // Completion heap (indexed by Flow::heap_pos).
  void heap_set(Slot id, TimeNs finish_ns);  // insert or move
  void heap_erase(Slot id);
  void sift_up(int i);
  void sift_down(int i);
  void recompute_from(TimeNs now_ns, const std::vector<Slot>& seed_flows,
                      const std::vector<core::LinkId>& seed_links);
  // One connected component (comp_, comp_links_): the flows' new rates and completion times.
  void solve_component(TimeNs now_ns);
  void solve_single(TimeNs now_ns, Slot id);
  // Remaining bytes at now at the old rate; true (and the flow marked done) within the residue.
  bool finish_if_residue(TimeNs now_ns, Slot id);
  void commit_rate(TimeNs now_ns, Slot id, double rate);
};

}  // namespace csim::engine
