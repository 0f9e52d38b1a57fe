// Allocation backpressure in the block path (docs/block-eval.md, "Allocation backpressure";
// backends/block/block_backpressure.cpp): the host waits, at an allocation that does not fit, for
// the frees it issued on another stream than their allocation's, as the op-level simulator does
// (docs/memory.md, "Allocation backpressure"). Hand-built Programs on one A100 (the example of
// tests/test_alloc_backpressure.cpp); each expected peak derived in a comment.
#include <catch2/catch.hpp>

#include "backends/block/block_eval.hpp"
#include "core/program/program.hpp"
#include "sim_test_scenario.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// One GPU, one thread; stream 0 = compute, stream 1 = a side stream (DeepSpeed's all-gather
// stream). A of `bytes` on stream 1, a GEMM K on stream 0, A freed on stream 0 (record_stream:
// DeepSpeed's free_param), B of `bytes` on stream 1.
Program program(Bytes bytes) {
  Program p;
  p.world_gpus = 1;
  p.gpus_per_node = 1;
  p.active_gpus = {0};
  p.processes.push_back({0, 0, "python", true});
  p.threads.push_back({0, 0, 0, "main"});
  p.streams.push_back({0, 0, StreamRole::kCompute, "compute"});
  p.streams.push_back({1, 0, StreamRole::kComm, "side"});
  const auto add = [&](OpKind kind, int stream) {
    Op op;
    op.id = static_cast<OpId>(p.ops.size());
    op.kind = kind;
    op.name = p.names.intern(kind == OpKind::kCompute ? "k" : "buf");
    op.thread = 0;
    op.stream = stream;
    op.gpu = 0;
    if (kind == OpKind::kCompute) {
      op.compute_kind = ComputeKind::kGemm;
      op.dtype = Dtype::kFp32;
      op.flops = 1e12;  // milliseconds on an A100: far longer than the host's microseconds
      op.python_ns = 4800;
      op.dispatch_ns = 2000;
    } else {
      op.bytes = bytes;
      op.mem_category = MemCategory::kCommBuffers;
      op.record_stream = kind == OpKind::kFree;
    }
    p.ops.push_back(op);
  };
  add(OpKind::kAlloc, 1);
  add(OpKind::kCompute, 0);
  add(OpKind::kFree, 0);
  add(OpKind::kAlloc, 1);
  REQUIRE(validate_program(p).empty());
  return p;
}

// The block path's peak of GPU 0, checked against the op level's.
Bytes block_peak(const Program& p) {
  const Scenario s = test::a100_node(1);
  std::string why;
  const std::optional<block::EvalResult> r = block::evaluate_block(s, p, &why);
  INFO(why);
  REQUIRE(r.has_value());
  const block::EvalResult ref = block::evaluate_op_level(s, p);
  REQUIRE(r->peaks.size() == 1);
  REQUIRE(ref.peaks.size() == 1);
  CHECK(r->peaks[0].peak_bytes == ref.peaks[0].peak_bytes);
  CHECK(r->step_time_ns == ref.step_time_ns);
  return r->peaks[0].peak_bytes;
}

Bytes usable() {
  return usable_memory_bytes(test::a100_node(1).cluster, false);
}

}  // namespace

TEST_CASE("block path: an alloc that does not fit waits for the free pending on another stream",
          "[block][backpressure]") {
  // A and B of 0.6 U (U: usable memory). The host issues K at 6.8 us, the free right after and
  // reaches B while K runs (milliseconds): held = A's 0.6 U, still pending, + B's 0.6 U > U, so
  // the host waits until the free has run on the compute stream, at K's end; B then runs there,
  // after A's free: the peak is one buffer, 0.6 U (without the wait: A and B, 1.2 U).
  const Bytes bytes = usable() * 6 / 10;
  CHECK(block_peak(program(bytes)) == bytes);
}

TEST_CASE("block path: an alloc that fits is not held back", "[block][backpressure]") {
  // Control: 0.4 U + 0.4 U <= U, no wait: B runs on its idle side stream as soon as it is issued,
  // while A is still allocated (its free runs at K's end): the peak is both, 0.8 U.
  const Bytes bytes = usable() * 4 / 10;
  CHECK(block_peak(program(bytes)) == 2 * bytes);
}
