// docs/memory.md, "Allocation backpressure" (after c10/cuda/CUDACachingAllocator.cpp: free /
// insert_events / process_events, and malloc's retry release_cached_blocks ->
// synchronize_and_free_events).
#include "backends/sim/alloc_backpressure.hpp"

#include <algorithm>

namespace csim::sim {

using core::Op;
using core::OpId;
using core::OpKind;

void AllocBackpressure::reset(const core::Program& p, std::vector<Bytes> capacity_by_gpu) {
  program_ = &p;
  capacity_ = std::move(capacity_by_gpu);
  held_.assign(capacity_.size(), 0);
  gpus_.assign(capacity_.size(), Gpu{});
  syncs_.assign(capacity_.size(), 0);
  pending_bytes_.assign(p.ops.size(), 0);
  syncs_in_flight_.assign(p.threads.size(), Sync{});
}

OpId AllocBackpressure::wait_before(int thread, const Op& op, const std::vector<char>& done) {
  Sync& s = syncs_in_flight_[static_cast<std::size_t>(thread)];
  if (s.alloc == op.id) {
    if (s.synced) return core::kNoOp;
    while (s.next < s.waits.size() && done[static_cast<std::size_t>(s.waits[s.next])]) ++s.next;
    if (s.next < s.waits.size()) return s.waits[s.next];
    s.synced = true;  // every event synchronized: the retry goes on (cudaMalloc again)
    return core::kNoOp;
  }
  const auto g = static_cast<std::size_t>(op.gpu);
  if (g >= capacity_.size() || capacity_[g] <= 0) return core::kNoOp;
  if (held_[g] + op.bytes <= capacity_[g]) return core::kNoOp;  // a cached block or cudaMalloc fits
  // The retry: snapshot the frees whose events are outstanding.
  Gpu& gs = gpus_[g];
  s = Sync{op.id, {}, 0, false};
  for (OpId f : gs.pending) {
    if (!done[static_cast<std::size_t>(f)]) s.waits.push_back(f);
  }
  gs.pending = s.waits;  // the done ones were released already (on_complete)
  if (s.waits.empty()) {
    s.synced = true;  // nothing to wait for: a plain OOM, left to the memory timeline
    return core::kNoOp;
  }
  ++syncs_[g];
  return s.waits.front();
}

void AllocBackpressure::on_issue(const Op& op) {
  const auto g = static_cast<std::size_t>(op.gpu);
  if (g >= gpus_.size() || op.bytes <= 0) return;
  Gpu& gs = gpus_[g];
  const std::pair<int, Bytes> key{static_cast<int>(op.mem_category), op.bytes};
  if (op.kind == OpKind::kAlloc) {
    gs.live[key].push_back(Live{op.name, op.stream});
    held_[g] += op.bytes;
    return;
  }
  if (op.kind != OpKind::kFree) return;
  // docs/memory.md, "Driving it with a Program": the oldest live allocation of the same category
  // and bytes, preferring the same name; none: ignored, as the caching-allocator model does.
  auto it = gs.live.find(key);
  if (it == gs.live.end() || it->second.empty()) return;
  std::vector<Live>& q = it->second;
  auto m = std::find_if(q.begin(), q.end(), [&](const Live& l) { return l.name == op.name; });
  if (m == q.end()) m = q.begin();
  const int alloc_stream = m->stream;
  q.erase(m);
  if (!op.record_stream || alloc_stream == op.stream) {
    // Back in its stream's pool now: stream order (or the framework's own stream waits, as
    // FSDP2's) makes the reuse safe. recordStream on the allocation's own stream is a no-op.
    held_[g] -= op.bytes;
    return;
  }
  // recordStream on another stream: reusable once the free has run there.
  pending_bytes_[static_cast<std::size_t>(op.id)] = op.bytes;
  gs.pending.push_back(op.id);
}

void AllocBackpressure::on_complete(const Op& op) {
  Bytes& b = pending_bytes_[static_cast<std::size_t>(op.id)];
  if (b == 0) return;
  held_[static_cast<std::size_t>(op.gpu)] -= b;
  b = 0;
  // Trim the done frees at the front of the GPU's list (the rest are skipped at the next retry).
  Gpu& gs = gpus_[static_cast<std::size_t>(op.gpu)];
  std::size_t k = 0;
  while (k < gs.pending.size() && pending_bytes_[static_cast<std::size_t>(gs.pending[k])] == 0) ++k;
  if (k > 0) gs.pending.erase(gs.pending.begin(), gs.pending.begin() + static_cast<long>(k));
}

std::vector<Bytes> usable_memory_by_gpu(const core::Program& p, const core::ClusterSpec& cluster) {
  std::vector<char> communicates(static_cast<std::size_t>(p.world_gpus), 0);
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCollective && op.gpu < p.world_gpus)
      communicates[static_cast<std::size_t>(op.gpu)] = 1;
  }
  std::vector<Bytes> out(static_cast<std::size_t>(p.world_gpus), 0);
  for (int g = 0; g < p.world_gpus; ++g)
    out[static_cast<std::size_t>(g)] =
        core::usable_memory_bytes(cluster, communicates[static_cast<std::size_t>(g)] != 0);
  return out;
}

void backpressure_notes(const AllocBackpressure& b, std::vector<std::string>* notes) {
  const std::vector<int>& n = b.syncs_by_gpu();
  int gpus = 0, first = -1, total = 0;
  for (std::size_t g = 0; g < n.size(); ++g) {
    if (n[g] == 0) continue;
    if (first < 0) first = static_cast<int>(g);
    ++gpus;
    total += n[g];
  }
  if (gpus == 0) return;
  notes->push_back("allocator backpressure: " + std::to_string(total) +
                   " host synchronizations on pending cross-stream frees (caching-allocator "
                   "retries) over " +
                   std::to_string(gpus) + " GPU(s), " +
                   std::to_string(n[static_cast<std::size_t>(first)]) + " on GPU " +
                   std::to_string(first) + " (docs/memory.md, \"Allocation backpressure\")");
}

}  // namespace csim::sim
