// docs/block-eval.md, "Allocation backpressure": the caching allocator's retry (docs/memory.md,
// "Allocation backpressure") in the block path's terms. A host that issues an allocation which
// does not fit while frees it issued on another stream than their allocation's (record_stream) have
// not run there yet waits for every such free; in the block path that allocation heads a host
// segment of its own, checked when the thread reaches it, and each free that may be waited for
// ends its chain, so that its end is an event.
#include <algorithm>
#include <map>
#include <utility>

#include "backends/block/schedule.hpp"

namespace csim::block::detail {

// [SECTION] Reading the ops ----------------------------------------------------------------------

// One pass in issue order (one thread per GPU: build() refuses more), before the chains are read.
// Per GPU, the host view held at an allocation's issue is
//     held = base + Σ (cross-stream frees issued before it, not yet run)
// where base counts every issued allocation less every issued free, cross-stream ones included.
// With none of those frees run, held is largest: an allocation with base + Σ all of them + bytes
// within the usable memory never waits, and only the others are checked at run time.
void Schedule::plan_backpressure() {
  // Only a free under record_stream can run on another stream than its allocation's (ZeRO-3's
  // free_param, FSDP1's freed shards): without one no allocation is ever checked, and the pass
  // below (a map lookup per allocation and free: 4.1 M instructions on GPT-3 175B at batch 1,536)
  // is skipped.
  if (std::none_of(program_.ops.begin(), program_.ops.end(),
                   [](const Op& op) { return op.kind == OpKind::kFree && op.record_stream; }))
    return;
  const std::size_t gpus = static_cast<std::size_t>(program_.world_gpus);
  std::vector<char> comm(gpus, 0);  // as sim::usable_memory_by_gpu and the memory timeline
  for (const Op& op : program_.ops)
    if (op.kind == OpKind::kCollective && op.gpu >= 0 && op.gpu < program_.world_gpus)
      comm[static_cast<std::size_t>(op.gpu)] = 1;
  bp_gpus_.assign(gpus, BpGpu{});
  for (std::size_t g = 0; g < gpus; ++g)
    bp_gpus_[g].capacity = core::usable_memory_bytes(scenario_.cluster, comm[g] != 0);
  struct Live {
    core::NameId name;
    int stream;
  };
  std::vector<std::map<std::pair<int, Bytes>, std::vector<Live>>> live(gpus);
  std::vector<Bytes> base(gpus, 0), pending(gpus, 0);
  std::vector<OpId> frees;  // cross-stream frees, all GPUs
  for (const Op& op : program_.ops) {
    if ((op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) || op.bytes <= 0 || op.gpu < 0 ||
        op.gpu >= program_.world_gpus)
      continue;
    const std::size_t g = static_cast<std::size_t>(op.gpu);
    BpGpu& bg = bp_gpus_[g];
    const std::pair<int, Bytes> key{static_cast<int>(op.mem_category), op.bytes};
    if (op.kind == OpKind::kAlloc) {
      if (bg.capacity > 0 && pending[g] > 0 && base[g] + pending[g] + op.bytes > bg.capacity) {
        if (bp_check_of_op_.empty()) bp_check_of_op_.assign(program_.ops.size(), -1);
        bp_check_of_op_[static_cast<std::size_t>(op.id)] = static_cast<int>(bp_checks_.size());
        BpCheck c;
        c.alloc = op.id;
        c.gpu = op.gpu;
        c.base = base[g];
        c.bytes = op.bytes;
        c.frees_before = static_cast<int>(bg.frees.size());
        bp_checks_.push_back(std::move(c));
        bg.checked = true;
      }
      live[g][key].push_back(Live{op.name, op.stream});
      base[g] += op.bytes;
      continue;
    }
    // The oldest live allocation of the same category and bytes, preferring the same name
    // (docs/memory.md, "Driving it with a Program"); none: ignored.
    auto it = live[g].find(key);
    if (it == live[g].end() || it->second.empty()) continue;
    std::vector<Live>& q = it->second;
    auto m = std::find_if(q.begin(), q.end(), [&](const Live& l) { return l.name == op.name; });
    if (m == q.end()) m = q.begin();
    const bool cross = op.record_stream && m->stream != op.stream;
    q.erase(m);
    base[g] -= op.bytes;
    if (!cross) continue;
    pending[g] += op.bytes;
    bg.frees.push_back({op.id, op.bytes});
    frees.push_back(op.id);
  }
  if (bp_checks_.empty()) return;
  // Only the frees of a GPU with a check are waited for: they end their chains (build()).
  bp_free_.assign(program_.ops.size(), 0);
  for (OpId f : frees)
    if (bp_gpus_[static_cast<std::size_t>(program_.ops[static_cast<std::size_t>(f)].gpu)].checked)
      bp_free_[static_cast<std::size_t>(f)] = 1;
}

// [SECTION] Running ------------------------------------------------------------------------------

bool Schedule::bp_done(OpId free_op) const {
  const int k = target_of_op_[static_cast<std::size_t>(free_op)];
  const TimeNs e = k < 0 ? -1 : target_end_[static_cast<std::size_t>(k)];
  return e >= 0 && e <= now_;
}

// Thread t reaches the allocation of check c at `ready` (its segment's issue start, waits met):
// true when it may issue it (ready raised to the last free waited for), false when it waits
// (kThreadResume at ready, or when a free it waits for runs).
bool Schedule::bp_clear(int t, int c, TimeNs& ready) {
  BpCheck& ck = bp_checks_[static_cast<std::size_t>(c)];
  if (ck.state == BpCheck::kPassed) return true;
  if (ready > now_) {  // the check is made when the host gets there
    push(ready, Ev::kThreadResume, t);
    return false;
  }
  BpGpu& g = bp_gpus_[static_cast<std::size_t>(ck.gpu)];
  if (ck.state == BpCheck::kUnchecked) {
    while (g.front < g.frees.size() && bp_done(g.frees[g.front].op)) ++g.front;
    Bytes held = ck.base;
    for (std::size_t i = g.front; i < static_cast<std::size_t>(ck.frees_before); ++i) {
      if (bp_done(g.frees[i].op)) continue;
      held += g.frees[i].bytes;
      ck.waits.push_back(g.frees[i].op);
    }
    if (held + ck.bytes <= g.capacity || ck.waits.empty()) {  // fits, or a plain OOM
      ck.state = BpCheck::kPassed;
      ck.waits.clear();
      return true;
    }
    ck.state = BpCheck::kWaiting;  // every free pending now (synchronize_and_free_events)
    g.waiting_thread = t;
  }
  for (OpId f : ck.waits) {
    if (!bp_done(f)) return false;  // woken by bp_freed
    ready = std::max(
        ready, target_end_[static_cast<std::size_t>(target_of_op_[static_cast<std::size_t>(f)])]);
  }
  ck.state = BpCheck::kPassed;
  g.waiting_thread = -1;
  return true;
}

void Schedule::bp_freed(OpId free_op, TimeNs t) {
  if (bp_free_.empty() || !bp_free_[static_cast<std::size_t>(free_op)]) return;
  const int w =
      bp_gpus_[static_cast<std::size_t>(program_.ops[static_cast<std::size_t>(free_op)].gpu)]
          .waiting_thread;
  if (w >= 0) push(t, Ev::kThreadResume, w);
}

}  // namespace csim::block::detail
