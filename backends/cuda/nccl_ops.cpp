#include "backends/cuda/nccl_ops.hpp"

#include <algorithm>

#include "backends/cuda/cuda_plan.hpp"

namespace csim::cuda {

namespace {

using core::CollectiveKind;

// The calls of one chunk of all-to-all, scatter or gather: this rank's sends and receives, grouped
// so NCCL runs them concurrently (ungrouped, a send could wait for a receive queued after it).
// The group is this thread's own, for this one rank: members on other threads issue theirs.
ncclResult_t ring_sendrecv(const CollectiveCall& c, std::size_t count, const char** failed_call) {
  ncclResult_t first = ncclGroupStart();
  if (first != ncclSuccess) {
    *failed_call = "ncclGroupStart";
    return first;
  }
  const int next = (c.rank + 1) % c.nranks, prev = (c.rank + c.nranks - 1) % c.nranks;
  ncclResult_t r = ncclSend(c.send, count, ncclFloat, next, c.comm, c.stream);
  if (r != ncclSuccess) {
    first = r;
    *failed_call = "ncclSend";
  }
  r = ncclRecv(c.recv, count, ncclFloat, prev, c.comm, c.stream);
  if (r != ncclSuccess && first == ncclSuccess) {
    first = r;
    *failed_call = "ncclRecv";
  }
  // Always close the group, so this thread's NCCL group depth stays balanced.
  r = ncclGroupEnd();
  if (r != ncclSuccess && first == ncclSuccess) {
    first = r;
    *failed_call = "ncclGroupEnd";
  }
  return first;
}

// A weighted all-to-all's calls (docs/cost-model.md, "Weighted all-to-all"): per peer the counts
// the matrix gives, at most the chunk's `count` elements each; the sends read and the receives
// write consecutive places of the buffers, wrapping to the start where the next would pass their
// end (the payload's values do not matter, its sizes do).
// One NCCL group of this thread's calls: keep() holds the first failing status and names its call;
// end() always closes the group, even after a failed call, so this thread's NCCL group depth stays
// balanced. A group that did not open takes no calls.
class GroupCalls {
 public:
  explicit GroupCalls(const char** failed_call) : failed_call_(failed_call) {
    keep(ncclGroupStart(), "ncclGroupStart");
    open_ = first_ == ncclSuccess;
  }
  bool open() const { return open_; }
  void keep(ncclResult_t r, const char* call) {
    if (r != ncclSuccess && first_ == ncclSuccess) {
      first_ = r;
      *failed_call_ = call;
    }
  }
  ncclResult_t end() {
    if (open_) keep(ncclGroupEnd(), "ncclGroupEnd");
    return first_;
  }

 private:
  const char** failed_call_;
  ncclResult_t first_ = ncclSuccess;
  bool open_ = false;
};

ncclResult_t weighted_a2a(const CollectiveCall& c, std::size_t count, const char** failed_call) {
  auto* send = static_cast<float*>(c.send);
  auto* recv = static_cast<float*>(c.recv);
  const std::vector<double>& w = *c.a2a_shares;
  const auto p = static_cast<std::size_t>(c.nranks), me = static_cast<std::size_t>(c.rank);
  GroupCalls g(failed_call);
  if (!g.open()) return g.end();
  const auto keep = [&](ncclResult_t r, const char* call) { g.keep(r, call); };
  const auto elems = [&](double share) {
    return std::min(count, static_cast<std::size_t>(static_cast<double>(count) * share + 0.5));
  };
  std::size_t at_send = 0, at_recv = 0;
  for (std::size_t peer = 0; peer < p; ++peer) {
    if (peer == me) continue;
    const std::size_t ns = elems(w[me * p + peer]), nr = elems(w[peer * p + me]);
    if (at_send + ns > count) at_send = 0;
    if (at_recv + nr > count) at_recv = 0;
    if (ns > 0)
      keep(ncclSend(send + at_send, ns, ncclFloat, static_cast<int>(peer), c.comm, c.stream),
           "ncclSend");
    if (nr > 0)
      keep(ncclRecv(recv + at_recv, nr, ncclFloat, static_cast<int>(peer), c.comm, c.stream),
           "ncclRecv");
    at_send += ns;
    at_recv += nr;
  }
  return g.end();
}

ncclResult_t grouped_p2p(const CollectiveCall& c, std::size_t per, const char** failed_call) {
  auto* send = static_cast<float*>(c.send);
  auto* recv = static_cast<float*>(c.recv);
  GroupCalls g(failed_call);
  if (!g.open()) return g.end();
  const auto keep = [&](ncclResult_t r, const char* call) { g.keep(r, call); };
  for (int peer = 0; peer < c.nranks; ++peer) {
    const std::size_t at = static_cast<std::size_t>(peer) * per;
    switch (c.kind) {
      case CollectiveKind::kAllToAll:
        keep(ncclSend(send + at, per, ncclFloat, peer, c.comm, c.stream), "ncclSend");
        keep(ncclRecv(recv + at, per, ncclFloat, peer, c.comm, c.stream), "ncclRecv");
        break;
      case CollectiveKind::kScatter:
        if (c.rank == c.root) {
          keep(ncclSend(send + at, per, ncclFloat, peer, c.comm, c.stream), "ncclSend");
        }
        break;
      case CollectiveKind::kGather:
        if (c.rank == c.root) {
          keep(ncclRecv(recv + at, per, ncclFloat, peer, c.comm, c.stream), "ncclRecv");
        }
        break;
      default:
        break;
    }
  }
  if (c.kind == CollectiveKind::kScatter) {
    keep(ncclRecv(recv, per, ncclFloat, c.root, c.comm, c.stream), "ncclRecv");
  } else if (c.kind == CollectiveKind::kGather) {
    keep(ncclSend(send, per, ncclFloat, c.root, c.comm, c.stream), "ncclSend");
  }
  return g.end();
}

}  // namespace

ncclResult_t issue_collective(const CollectiveCall& c, const char** failed_call) {
  const auto nranks = static_cast<std::size_t>(std::max(c.nranks, 1));
  for (Bytes done = 0; done < c.bytes; done += kMaxBufferBytes) {
    const Bytes chunk = std::min(c.bytes - done, kMaxBufferBytes);
    const auto count = static_cast<std::size_t>(chunk / kCollectiveElemBytes);
    const std::size_t per = count / nranks;  // one rank's share for the scattering kinds
    ncclResult_t r = ncclSuccess;
    switch (c.kind) {
      case CollectiveKind::kAllReduce:
        if (count == 0) break;
        *failed_call = "ncclAllReduce";
        r = ncclAllReduce(c.send, c.recv, count, ncclFloat, ncclSum, c.comm, c.stream);
        break;
      case CollectiveKind::kReduceScatter:
        if (per == 0) break;
        *failed_call = "ncclReduceScatter";
        r = ncclReduceScatter(c.send, c.recv, per, ncclFloat, ncclSum, c.comm, c.stream);
        break;
      case CollectiveKind::kAllGather:
        if (per == 0) break;
        *failed_call = "ncclAllGather";
        r = ncclAllGather(c.send, c.recv, per, ncclFloat, c.comm, c.stream);
        break;
      case CollectiveKind::kBroadcast:
        if (count == 0) break;
        *failed_call = "ncclBroadcast";
        r = ncclBroadcast(c.send, c.recv, count, ncclFloat, c.root, c.comm, c.stream);
        break;
      case CollectiveKind::kReduce:
        if (count == 0) break;
        *failed_call = "ncclReduce";
        r = ncclReduce(c.send, c.recv, count, ncclFloat, ncclSum, c.root, c.comm, c.stream);
        break;
      case CollectiveKind::kAllToAll:
        if (c.a2a_shares != nullptr && !c.a2a_shares->empty()) {
          if (count > 0) r = weighted_a2a(c, count, failed_call);
          break;
        }
        [[fallthrough]];
      case CollectiveKind::kScatter:
      case CollectiveKind::kGather:
        if (per == 0) break;
        r = grouped_p2p(c, per, failed_call);
        break;
      case CollectiveKind::kSendRecv:
        if (count == 0) break;
        if (c.nranks > 2) {
          // A ring (context parallelism's K/V hops, core/lowering/context_parallel.cpp): rank i
          // sends to i + 1 and receives from i - 1 (mod n), one NCCL group, as the cost model's
          // send/recv of more than two ranks (docs/cost-model.md).
          r = ring_sendrecv(c, count, failed_call);
        } else if (c.rank == 0) {
          *failed_call = "ncclSend";
          r = ncclSend(c.send, count, ncclFloat, 1, c.comm, c.stream);
        } else {
          *failed_call = "ncclRecv";
          r = ncclRecv(c.recv, count, ncclFloat, 0, c.comm, c.stream);
        }
        break;
    }
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

}  // namespace csim::cuda
