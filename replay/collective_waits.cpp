// The edges that make the steps follow the collectives (docs/replay.md, "Edges"):
//  * event waits, read: a cuda_sync "Stream Wait Event" record names the cudaEventRecord whose
//    event the waiting stream waited for, and the stream it was recorded on: the first op of the
//    waiting stream launched after the cudaStreamWaitEvent waits for the last op of that stream
//    launched before the cudaEventRecord.
//  * collective waits, inferred where the trace records the cudaStreamWaitEvent but not its
//    event: a cudaStreamWaitEvent outside the collectives' own CPU ops (c10d's work.wait(), DDP's
//    finalize after the backward pass, record_param_comms "wait") waits for a collective. The
//    waits that follow a run of collectives, with no collective launched between them, stand
//    for the last of those collectives, in order: k waits after n collectives are the waits for
//    collectives n-k+1 ... n (one wait for two coalesced broadcasts is the wait for the second;
//    DDP's five bucket waits after five bucket all-reduces are one each). The first GPU op the
//    waiting thread launches after the call waits for that collective.
//  * optimizer waits, inferred where the trace records no cudaStreamWaitEvent at all (filtered
//    traces): the first GPU op launched inside an Optimizer.step#... annotation waits for the last
//    collective launched before it (DDP and FSDP step the optimizer after the last gradient
//    reduction).
// Each edge is kept only when the measured run meets it (the collective ended at most
// kStreamEdgeAfterNs after the op started), so the edges never form a cycle.
#include <algorithm>

#include "replay/replay_edges.hpp"
#include "replay/replay_program.hpp"

namespace csim::replay {
namespace {

bool add_wait(core::Program& p, const GpuOpRef& waiter, const GpuOpRef& on) {
  if (waiter.stream == on.stream || on.end_ns > waiter.start_ns + kStreamEdgeAfterNs) return false;
  auto& deps = p.ops[static_cast<std::size_t>(waiter.op)].deps;
  for (const core::Dep& d : deps)
    if (d.op == on.op) return false;
  deps.push_back({on.op, core::DepKind::kStreamWaits});
  return true;
}

void event_waits(core::Program& p, const EdgeInputs& in, const StreamIndex& idx,
                 ReplayProgram& out) {
  for (const SyncCall& sc : in.syncs) {
    if (!sc.read || sc.kind != SyncKind::kStreamWait || sc.sync_stream < 0 || sc.record_stream < 0)
      continue;
    const std::ptrdiff_t w = idx.first_from(sc.sync_stream, sc.start_ns);
    const std::ptrdiff_t on = idx.last_before(sc.record_stream, sc.record_ns);
    if (w < 0 || on < 0) continue;
    if (add_wait(p, in.gpu_ops[static_cast<std::size_t>(w)],
                 in.gpu_ops[static_cast<std::size_t>(on)]))
      out.ranks[static_cast<std::size_t>(sc.gpu)].stats.add(Stat::event_waits);
  }
}

void inferred_collective_waits(core::Program& p, const EdgeInputs& in, ReplayProgram& out) {
  // Per GPU, the collectives (by launch) and the waits (by call start), in time order.
  struct Item {
    TimeNs t;
    int order;  // at one time: collectives first
    std::size_t i;
  };
  std::map<int, std::vector<Item>> items;
  for (std::size_t i = 0; i < in.gpu_ops.size(); ++i)
    if (in.gpu_ops[i].collective && in.gpu_ops[i].launch_op != core::kNoOp)
      items[in.gpu_ops[i].gpu].push_back({in.gpu_ops[i].launch_ns, 0, i});
  for (std::size_t i = 0; i < in.syncs.size(); ++i)
    if (in.syncs[i].wait && !in.syncs[i].read && in.syncs[i].next_gpu_op != SIZE_MAX)
      items[in.syncs[i].gpu].push_back({in.syncs[i].start_ns, 1, i});
  for (auto& entry : items) {
    const int gpu = entry.first;  // a plain variable: clang 14 cannot capture a structured binding
    std::vector<Item>& v = entry.second;
    std::stable_sort(v.begin(), v.end(), [](const Item& a, const Item& b) {
      return a.t != b.t ? a.t < b.t : a.order < b.order;
    });
    std::vector<std::size_t> pending, run;  // collectives since the last run of waits; the run
    auto resolve = [&] {
      const std::size_t k = run.size(), n = pending.size();
      for (std::size_t j = 0; j < k; ++j) {
        if (j + n < k) continue;  // more waits than collectives: the first ones wait for older
        const GpuOpRef& c = in.gpu_ops[pending[n - k + j]];
        const GpuOpRef& w = in.gpu_ops[in.syncs[run[j]].next_gpu_op];
        if (add_wait(p, w, c))
          out.ranks[static_cast<std::size_t>(gpu)].stats.add(Stat::collective_waits);
      }
      if (k > 0) pending.clear();
      run.clear();
    };
    for (const Item& it : v) {
      if (it.order == 0) {
        if (!run.empty()) resolve();
        pending.push_back(it.i);
      } else {
        run.push_back(it.i);
      }
    }
    resolve();
  }
}

void optimizer_waits(core::Program& p, const EdgeInputs& in, ReplayProgram& out) {
  for (const OptimizerStep& os : in.optimizer_steps) {
    if (static_cast<std::size_t>(os.gpu) < in.records_waits.size() &&
        in.records_waits[static_cast<std::size_t>(os.gpu)] != 0)
      continue;  // the trace records its waits: read or inferred from them instead
    const GpuOpRef* last = nullptr;
    const GpuOpRef* first = nullptr;
    for (const GpuOpRef& g : in.gpu_ops) {
      if (g.gpu != os.gpu || g.launch_op == core::kNoOp) continue;
      if (g.collective && g.launch_ns < os.start_ns &&
          (last == nullptr || g.launch_ns > last->launch_ns))
        last = &g;
      if (g.thread == os.thread && !g.collective && g.launch_ns >= os.start_ns &&
          g.launch_ns <= os.end_ns && (first == nullptr || g.launch_ns < first->launch_ns))
        first = &g;
    }
    if (last == nullptr || first == nullptr) continue;
    if (add_wait(p, *first, *last))
      out.ranks[static_cast<std::size_t>(os.gpu)].stats.add(Stat::optimizer_waits);
  }
}

}  // namespace

void collective_wait_edges(core::Program& p, const EdgeInputs& in, ReplayProgram& out) {
  const StreamIndex idx(in.gpu_ops);
  event_waits(p, in, idx, out);
  inferred_collective_waits(p, in, out);
  optimizer_waits(p, in, out);
}

}  // namespace csim::replay
