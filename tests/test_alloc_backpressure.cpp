// Allocation backpressure (docs/memory.md, "Allocation backpressure"): a host that runs ahead of
// its GPU waits, at an allocation that does not fit, for the frees pending on another stream, as
// PyTorch's caching allocator does when its retry synchronizes on the blocks' events. Hand-built
// Programs on one A100; each expected time and peak derived in a comment.
#include <catch2/catch.hpp>

#include "backends/sim/alloc_backpressure.hpp"
#include "backends/sim/sim_executor.hpp"
#include "backpressure_program.hpp"
#include "core/cost/compute_cost.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/program/memory_timeline.hpp"
#include "sim_test_scenario.hpp"

using namespace csim;
using namespace csim::core;

namespace {

Scenario one_gpu_scenario() {
  return test::a100_node(1);
}

constexpr double kFlops = test::kBackpressureGemmFlops;  // fp32 GEMM: milliseconds on an A100

// alloc A (side) ; kernel K (compute) ; free A (free_stream) ; alloc B (alloc_b_stream), A and B
// of `bytes` each.
struct Run {
  Program p;
  ExecutionResult r;
  MemoryReport mem;
  OpId a = 0, k = 0, f = 0, b = 0;
};

Run run(Bytes bytes, int a_stream, int free_stream, int b_stream, bool record_stream = true) {
  const Scenario s = one_gpu_scenario();
  Run x;
  x.p = test::backpressure_skeleton();
  x.a = test::add_backpressure_mem(x.p, OpKind::kAlloc, a_stream, bytes);
  x.k = test::add_backpressure_kernel(x.p);
  x.f = test::add_backpressure_mem(x.p, OpKind::kFree, free_stream, bytes);
  x.p.ops[static_cast<std::size_t>(x.f)].record_stream = record_stream;
  x.b = test::add_backpressure_mem(x.p, OpKind::kAlloc, b_stream, bytes);
  REQUIRE(validate_program(x.p).empty());
  sim::SimExecutor ex(s);
  x.r = ex.run(x.p, {});
  x.mem = memory_timeline(x.p, x.r.timings, s.cluster);
  return x;
}

Bytes usable() {
  return usable_memory_bytes(one_gpu_scenario().cluster, false);
}

}  // namespace

TEST_CASE("an alloc that does not fit waits for the free pending on another stream",
          "[sim][memory]") {
  // A (0.6 U) is allocated on the side stream and freed on the compute stream after K: a
  // cross-stream free, pending until the compute stream runs it. B (0.6 U): held 0.6 U + 0.6 U
  // > U, so the host waits for that free. K is issued at 4.8 + 2.0 = 6.8 us and starts 4 us of
  // launch latency later, at 10.8 us; the free runs when K ends, at 10.8 us + d(K); B's issue
  // (an alloc has no host time) ends then and its side stream is idle, so B starts then too.
  const Bytes u = usable();
  const Bytes bytes = u * 6 / 10;
  const Run x = run(bytes, 1, 0, 1);
  const TimeNs d = compute_duration_ns(one_gpu_scenario().cluster.gpu, ComputeKind::kGemm,
                                       Dtype::kFp32, kFlops, 0);
  const TimeNs k_end = 10'800 + d;
  CHECK(x.r.timings[x.k].start_ns == 10'800);
  CHECK(x.r.timings[x.f].end_ns == k_end);
  CHECK(x.r.timings[x.b].issue_end_ns == k_end);
  CHECK(x.r.timings[x.b].start_ns == k_end);
  // Stream-ordered memory: A until the free at k_end, then B: the peak is one buffer, no OOM.
  REQUIRE(x.mem.gpus.size() == 1);
  CHECK(x.mem.gpus[0].peak_bytes == bytes);
  CHECK_FALSE(x.mem.oom.has_value());
  // One host synchronization, in the run's notes.
  REQUIRE(x.r.notes.size() == 1);
  CHECK(x.r.notes[0].rfind("allocator backpressure: 1 host synchronizations", 0) == 0);
}

TEST_CASE("an alloc that fits is not held back, however far the host runs ahead", "[sim][memory]") {
  // Control: B of 0.4 U fits beside A (0.4 U + 0.4 U <= U): no wait. B is issued right after the
  // free (issue times: A 0, K 6.8 us, free 6.8 us, B 6.8 us) and its idle side stream runs it at
  // once, while A is still held until K ends: the peak is both buffers, 0.8 U, at 6.8 us.
  const Bytes bytes = usable() * 4 / 10;
  const Run x = run(bytes, 1, 0, 1);
  CHECK(x.r.timings[x.b].start_ns == 6'800);
  CHECK(x.mem.gpus[0].peak_bytes == 2 * bytes);
  CHECK(x.r.notes.empty());
}

TEST_CASE("a same-stream free releases its block at issue: no wait", "[sim][memory]") {
  // A, its free and B all on the compute stream: the host's free returns A's block to the
  // stream's pool at once (stream order makes the reuse safe), so held = 0.6 U when B is issued
  // and B goes out at 6.8 us; on the stream it runs after the free, at 10.8 us + d(K). Peak 0.6 U.
  const Bytes bytes = usable() * 6 / 10;
  const Run x = run(bytes, 0, 0, 0);
  const TimeNs d = compute_duration_ns(one_gpu_scenario().cluster.gpu, ComputeKind::kGemm,
                                       Dtype::kFp32, kFlops, 0);
  CHECK(x.r.timings[x.b].issue_end_ns == 6'800);
  CHECK(x.r.timings[x.b].start_ns == 10'800 + d);
  CHECK(x.mem.gpus[0].peak_bytes == bytes);
  CHECK(x.r.notes.empty());
}

TEST_CASE("a cross-stream free without record_stream releases at issue (FSDP2's events)",
          "[sim][memory]") {
  // As the first case, but the free is not marked record_stream (FSDP2 orders the reuse with
  // its own stream waits instead): held = 0.6 U when B is issued at 6.8 us, no wait; B's side
  // stream runs it at once, so the stream-ordered timeline holds A and B together (1.2 U) until
  // K ends: the memory timeline reports that OOM, as it did before backpressure.
  const Bytes bytes = usable() * 6 / 10;
  const Run x = run(bytes, 1, 0, 1, false);
  CHECK(x.r.timings[x.b].issue_end_ns == 6'800);
  CHECK(x.r.timings[x.b].start_ns == 6'800);
  CHECK(x.mem.gpus[0].peak_bytes == 2 * bytes);
  CHECK(x.mem.oom.has_value());
  CHECK(x.r.notes.empty());
}

TEST_CASE("with nothing pending an allocation over capacity is a plain OOM", "[sim][memory]") {
  // A never freed: B (0.6 U) finds held 0.6 U, nothing pending to wait for; it is issued at
  // once (no retry can help) and the memory timeline reports the OOM, short by 1.2 U - U.
  const Scenario s = one_gpu_scenario();
  Program p = test::backpressure_skeleton();
  const Bytes bytes = usable() * 6 / 10;
  test::add_backpressure_mem(p, OpKind::kAlloc, 1, bytes);
  test::add_backpressure_kernel(p);
  const OpId b = test::add_backpressure_mem(p, OpKind::kAlloc, 1, bytes);
  REQUIRE(validate_program(p).empty());
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, {});
  CHECK(r.timings[b].start_ns == 6'800);
  const MemoryReport mem = memory_timeline(p, r.timings, s.cluster);
  REQUIRE(mem.oom.has_value());
  CHECK(mem.oom->shortfall_bytes == 2 * bytes - usable());
  CHECK(r.notes.empty());
}

TEST_CASE("the retry waits for every free pending at that moment", "[sim][memory]") {
  // AllocBackpressure alone, capacity 100: X1 (40) and X2 (40) on stream 1, both freed on
  // stream 0 (pending); Y (40) on stream 1: 80 + 40 > 100, so the retry snapshots both frees and
  // waits for the first, then (once it is done) for the second, even though after the first
  // 40 + 40 would fit (synchronize_and_free_events waits on every outstanding event).
  Program p = test::backpressure_skeleton();
  const OpId x1 = test::add_backpressure_mem(p, OpKind::kAlloc, 1, 40);
  const OpId x2 = test::add_backpressure_mem(p, OpKind::kAlloc, 1, 40);
  const OpId f1 = test::add_backpressure_mem(p, OpKind::kFree, 0, 40);
  const OpId f2 = test::add_backpressure_mem(p, OpKind::kFree, 0, 40);
  const OpId y = test::add_backpressure_mem(p, OpKind::kAlloc, 1, 40);
  sim::AllocBackpressure bp;
  bp.reset(p, {100});
  std::vector<char> done(p.ops.size(), 0);
  for (OpId id : {x1, x2, f1, f2}) {
    if (p.ops[id].kind == OpKind::kAlloc) CHECK(bp.wait_before(0, p.ops[id], done) == kNoOp);
    bp.on_issue(p.ops[id]);  // the executor asks only before allocs
  }
  CHECK(bp.held_bytes(0) == 80);  // both blocks pending
  CHECK(bp.wait_before(0, p.ops[y], done) == f1);
  done[f1] = 1;
  bp.on_complete(p.ops[f1]);
  CHECK(bp.held_bytes(0) == 40);
  CHECK(bp.wait_before(0, p.ops[y], done) == f2);
  done[f2] = 1;
  bp.on_complete(p.ops[f2]);
  CHECK(bp.wait_before(0, p.ops[y], done) == kNoOp);
  bp.on_issue(p.ops[y]);
  CHECK(bp.held_bytes(0) == 40);
  CHECK(bp.syncs_by_gpu()[0] == 1);
}
