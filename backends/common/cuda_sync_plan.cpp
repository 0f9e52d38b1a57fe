// docs/trace-format.md, "Stream dependencies".
#include "backends/common/cuda_sync_plan.hpp"

#include <algorithm>

namespace csim::backend {
namespace {

using core::Op;
using core::OpId;
using core::OpKind;

bool launches_gpu_work(const Op& op) {
  return op.stream >= 0 && op.dispatch_ns > 0 &&
         (op.kind == OpKind::kCompute || op.kind == OpKind::kCopy || op.kind == OpKind::kCollective);
}

}  // namespace

TimeNs sync_call_ns(TimeNs dispatch_ns, int calls) {
  constexpr TimeNs kMaxCallNs = 1000;
  return std::min<TimeNs>(kMaxCallNs, dispatch_ns / (calls + 1));
}

CudaSyncPlan plan_cuda_sync(const core::Program& p, const std::vector<core::OpTiming>& t,
                            std::int64_t first_corr, core::ProgressCount* count) {
  const std::size_t n = p.ops.size();
  CudaSyncPlan s;
  // The per-op vectors filled in chunks of ops, counted (the values of one assign each): on
  // millions of ops, the pages faulted in as they are first written are a good part of the plan's
  // time (docs/limits.md, "Progress": "building the trace").
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  s.record_corr.reserve(n);
  s.record_event.reserve(n);
  s.stream_waits.reserve(n);
  s.host_wait_on.reserve(n);
  s.host_wait_from.reserve(n);
  s.stream_free_ns.reserve(n);
  for (std::size_t at = 0; at < n; at += kChunk) {
    const std::size_t k = std::min(kChunk, n - at);
    s.record_corr.insert(s.record_corr.end(), k, -1);
    s.record_event.insert(s.record_event.end(), k, -1);
    s.stream_waits.resize(at + k);
    s.host_wait_on.insert(s.host_wait_on.end(), k, core::kNoOp);
    s.host_wait_from.insert(s.host_wait_from.end(), k, -1);
    s.stream_free_ns.insert(s.stream_free_ns.end(), k, -1);
    if (count) count->add(static_cast<std::int64_t>(k));
  }
  const auto ran = [&](OpId id) { return t[id].end_ns >= 0 && t[id].start_ns >= 0; };
  const auto process_of = [&](const Op& op) { return p.threads[op.thread].process; };

  // End of the previous host activity on each op's thread (ops are in issue order per thread).
  std::vector<TimeNs> thread_busy_until(p.threads.size(), -1);
  std::vector<char> needs_record(n, 0);
  for (const Op& op : p.ops) {
    if (count) count->add();
    const TimeNs prev_end = thread_busy_until[op.thread];
    if (t[op.id].ready_ns >= 0 && op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) {
      if (launches_gpu_work(op) && ran(op.id)) {
        for (const core::Dep& d : op.deps) {
          const Op& src = p.ops[d.op];
          if (d.kind != core::DepKind::kStreamWaits || !launches_gpu_work(src) || !ran(src.id) ||
              src.stream == op.stream || process_of(src) != process_of(op)) {
            continue;
          }
          auto& w = s.stream_waits[op.id];
          if (std::find(w.begin(), w.end(), src.id) != w.end()) continue;
          w.push_back(src.id);
          needs_record[src.id] = 1;
        }
      }
      // The host blocks on the GPU op that finished last among its host waits.
      OpId last = core::kNoOp;
      for (const core::Dep& d : op.deps) {
        const Op& src = p.ops[d.op];
        if (d.kind != core::DepKind::kHostWaits || !launches_gpu_work(src) || !ran(src.id) ||
            process_of(src) != process_of(op)) {
          continue;
        }
        if (last == core::kNoOp || t[src.id].end_ns > t[last].end_ns) last = src.id;
      }
      if (last != core::kNoOp) {
        s.host_wait_on[op.id] = last;
        needs_record[last] = 1;
        // From the thread's previous activity (or the record, when later) to the thread's ready time.
        const TimeNs from = std::max(prev_end, t[last].issue_end_ns);
        s.host_wait_from[op.id] = std::min(from < 0 ? t[op.id].ready_ns : from, t[op.id].ready_ns);
      }
    }
    const TimeNs end = op.kind == OpKind::kHostWork || op.kind == OpKind::kMarker ? t[op.id].end_ns
                                                                                  : t[op.id].issue_end_ns;
    if (end >= 0) thread_busy_until[op.thread] = std::max(prev_end, end);
  }

  // Records in op order: correlation ids and CUDA event ids.
  s.next_corr = first_corr;
  s.next_event = 1;
  for (std::size_t i = 0; i < n; ++i) {
    if (!needs_record[i]) continue;
    s.record_corr[i] = s.next_corr++;
    s.record_event[i] = s.next_event++;
  }

  // Where each waiting op's stream became free: the latest end, not after the op's start, of the
  // ops that ran on the stream before it.
  std::vector<std::vector<OpId>> by_stream(p.streams.size());
  for (const Op& op : p.ops) {
    if (op.stream >= 0 && ran(op.id)) by_stream[op.stream].push_back(op.id);
  }
  for (std::vector<OpId>& ids : by_stream) {
    // A stream runs its ops in issue order, so the list is usually in start order already.
    const auto by_start = [&](OpId a, OpId b) { return t[a].start_ns < t[b].start_ns; };
    if (!std::is_sorted(ids.begin(), ids.end(), by_start)) std::stable_sort(ids.begin(), ids.end(), by_start);
    TimeNs free_at = -1;
    for (OpId id : ids) {
      if (!s.stream_waits[id].empty()) s.stream_free_ns[id] = std::min(free_at, t[id].start_ns);
      free_at = std::max(free_at, t[id].end_ns);
    }
  }
  return s;
}

}  // namespace csim::backend
