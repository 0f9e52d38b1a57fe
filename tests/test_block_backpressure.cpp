// Allocation backpressure in the block path (docs/block-eval.md, "Allocation backpressure";
// backends/block/block_backpressure.cpp): the host waits, at an allocation that does not fit, for
// the frees it issued on another stream than their allocation's, as the op-level simulator does
// (docs/memory.md, "Allocation backpressure"). Hand-built Programs on one A100 (the example of
// tests/test_alloc_backpressure.cpp); each expected peak derived in a comment.
#include <catch2/catch.hpp>

#include "backends/block/block_eval.hpp"
#include "backpressure_program.hpp"
#include "core/program/program.hpp"
#include "sim_test_scenario.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// One GPU, one thread; stream 0 = compute, stream 1 = a side stream (DeepSpeed's all-gather
// stream). A of `bytes` on stream 1, a GEMM K on stream 0, A freed on stream 0 (record_stream:
// DeepSpeed's free_param), B of `bytes` on stream 1.
Program program(Bytes bytes) {
  Program p = test::backpressure_skeleton();
  test::add_backpressure_mem(p, OpKind::kAlloc, 1, bytes);
  test::add_backpressure_kernel(p);
  test::add_backpressure_mem(p, OpKind::kFree, 0, bytes);
  test::add_backpressure_mem(p, OpKind::kAlloc, 1, bytes);
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
