// The caching-allocator model (core/caching_allocator.hpp) on hand-made sequences: rounding, the
// two pools, splitting and merging, per-stream reuse, release-and-retry before OOM, empty_cache.
// Rules and their PyTorch sources: docs/memory.md.
#include <catch2/catch.hpp>

#include "core/caching_allocator.hpp"

using namespace csim;
using namespace csim::core;

TEST_CASE("requests round up to 512 B and pick their segment size", "[memory][allocator]") {
  // Rule 1: max(512, 512 * ceil(n / 512)).
  CHECK(allocator_round_size(1) == 512);
  CHECK(allocator_round_size(4) == 512);  // a 4-byte scalar costs a 512 B block
  CHECK(allocator_round_size(512) == 512);
  CHECK(allocator_round_size(513) == 1024);
  // Rule 3: <= 1 MiB -> 2 MiB segment; (1 MiB, 10 MiB) -> 20 MiB; >= 10 MiB -> rounded to 2 MiB.
  CHECK(allocator_segment_size(1) == 2 * kMiB);
  CHECK(allocator_segment_size(kMiB) == 2 * kMiB);
  CHECK(allocator_segment_size(kMiB + 1) == 20 * kMiB);  // rounds to 1 MiB + 512: large pool
  CHECK(allocator_segment_size(10 * kMiB - 512) == 20 * kMiB);
  CHECK(allocator_segment_size(10 * kMiB) == 10 * kMiB);
  CHECK(allocator_segment_size(10 * kMiB + 1) == 12 * kMiB);  // 10 MiB + 512 -> next 2 MiB
}

TEST_CASE("small requests share a 2 MiB segment, split at 512 B granularity",
          "[memory][allocator]") {
  CachingAllocator a(0);
  for (int i = 0; i < 4; ++i) a.malloc(1000, 0);
  // 4 blocks of round(1000) = 1024 B carved from one 2 MiB segment.
  CHECK(a.stats().segments == 1);
  CHECK(a.stats().reserved_bytes == 2 * kMiB);
  CHECK(a.stats().allocated_bytes == 4 * 1024);
  CHECK(a.stats().requested_bytes == 4 * 1000);
  CHECK(a.stats().largest_free_block_bytes == 2 * kMiB - 4 * 1024);
}

TEST_CASE("1-10 MiB requests split a 20 MiB segment, larger ones get their own",
          "[memory][allocator]") {
  CachingAllocator a(0);
  const auto x = a.malloc(3 * kMiB, 0);
  const auto y = a.malloc(3 * kMiB, 0);
  // One 20 MiB segment: 3 + 3 allocated, a 14 MiB remainder (> 1 MiB, so split off).
  CHECK(a.stats().segments == 1);
  CHECK(a.stats().reserved_bytes == 20 * kMiB);
  CHECK(a.stats().largest_free_block_bytes == 14 * kMiB);
  // 19.5 MiB does not fit the 14 MiB block: its own segment of 19.5 rounded up to 2 MiB = 20 MiB;
  // the 0.5 MiB left is <= 1 MiB, so the block is not split and counts 20 MiB allocated.
  const auto z = a.malloc(19 * kMiB + kMiB / 2, 0);
  CHECK(a.stats().segments == 2);
  CHECK(a.stats().reserved_bytes == 40 * kMiB);
  CHECK(a.block_bytes(z.block) == 20 * kMiB);
  CHECK(a.stats().allocated_bytes == 26 * kMiB);
  // Freeing both 3 MiB blocks merges them with the 14 MiB remainder: the segment is whole again.
  a.free(x.block);
  CHECK(a.stats().largest_free_block_bytes == 14 * kMiB);  // x (3) and the 14 are not adjacent
  a.free(y.block);
  CHECK(a.stats().largest_free_block_bytes == 20 * kMiB);  // x + y + rest = one 20 MiB block
  CHECK(a.stats().allocated_bytes == 20 * kMiB);
  // empty_cache releases the fully free segment, not the one holding z: reserved drops, allocated
  // does not.
  CHECK(a.empty_cache() == 20 * kMiB);
  CHECK(a.stats().reserved_bytes == 20 * kMiB);
  CHECK(a.stats().allocated_bytes == 20 * kMiB);
  CHECK(a.stats().segments == 1);
}

TEST_CASE("a block freed on one stream is reused by that stream only", "[memory][allocator]") {
  CachingAllocator a(0);
  const auto x = a.malloc(3 * kMiB, /*stream=*/0);
  a.free(x.block);
  a.malloc(3 * kMiB, /*stream=*/1);  // stream 0's cached 20 MiB segment is not offered
  CHECK(a.stats().segments == 2);
  CHECK(a.stats().reserved_bytes == 40 * kMiB);
  a.malloc(3 * kMiB, /*stream=*/0);  // reuses stream 0's segment: no new cudaMalloc
  CHECK(a.stats().segments == 2);
}

TEST_CASE("a failed cudaMalloc releases the cached segments and retries before OOM",
          "[memory][allocator]") {
  CachingAllocator a(50 * kMiB);
  const auto x = a.malloc(30 * kMiB, 0);  // own 30 MiB segment
  a.free(x.block);                        // cached, reserved stays 30 MiB
  // Stream 1 cannot reuse it; 30 reserved + 30 new > 50: release the cached segment, retry: fits.
  const auto y = a.malloc(30 * kMiB, 1);
  CHECK(y.released_cache);
  CHECK_FALSE(y.oom);
  CHECK(a.stats().reserved_bytes == 30 * kMiB);
  // Again: 30 + 30 > 50 and nothing is cached: OOM (the model still creates the segment).
  const auto z = a.malloc(30 * kMiB, 1);
  CHECK(z.oom);
  CHECK(a.stats().reserved_bytes == 60 * kMiB);
}

TEST_CASE("fragmentation: OOM with allocated bytes well under capacity", "[memory][allocator]") {
  CachingAllocator a(40 * kMiB);
  std::vector<CachingAllocator::BlockId> b;
  // 8 x 5 MiB fill two 20 MiB segments exactly (each split 5 + 15, 5 + 10, 5 + 5).
  for (int i = 0; i < 8; ++i) b.push_back(a.malloc(5 * kMiB, 0).block);
  CHECK(a.stats().reserved_bytes == 40 * kMiB);
  // Free every other block: 20 MiB cached, but in 5 MiB holes between live blocks.
  for (int i = 0; i < 8; i += 2) a.free(b[i]);
  CHECK(a.stats().allocated_bytes == 20 * kMiB);
  CHECK(a.stats().reserved_bytes - a.stats().allocated_bytes == 20 * kMiB);
  CHECK(a.stats().largest_free_block_bytes == 5 * kMiB);
  // 12 MiB: no hole fits, 40 + 12 > 40, no segment is wholly free -> OOM although
  // allocated + request = 32 MiB < 40 MiB.
  const auto r = a.malloc(12 * kMiB, 0);
  CHECK(r.released_cache);
  CHECK(r.oom);
}

TEST_CASE("the timeline frees the oldest live allocation of that category, size and name",
          "[memory][allocator]") {
  // Two same-size activations of different layers, freed in reverse (backward) order, then an
  // empty_cache marker: the allocator timeline follows the ops by start time.
  Program p;
  p.world_gpus = 1;
  p.active_gpus = {0};
  auto add = [&](OpKind kind, const std::string& name, Bytes bytes) {
    Op op;
    op.id = static_cast<OpId>(p.ops.size());
    op.kind = kind;
    op.name = p.names.intern(name);
    op.stream = 0;
    op.bytes = bytes;
    op.step = 1;
    p.ops.push_back(op);
  };
  add(OpKind::kAlloc, "a.act", 3 * kMiB);
  add(OpKind::kAlloc, "b.act", 3 * kMiB);
  add(OpKind::kFree, "b.act", 3 * kMiB);
  add(OpKind::kFree, "a.act", 3 * kMiB);
  add(OpKind::kMarker, kEmptyCacheOpName, 0);
  std::vector<OpTiming> t(p.ops.size());
  for (std::size_t i = 0; i < t.size(); ++i)
    t[i].start_ns = t[i].end_ns = 10 * static_cast<TimeNs>(i);
  const AllocatorReport rep = simulate_caching_allocator(p, t, {0}, {80 * kMiB});
  REQUIRE(rep.gpus.size() == 1);
  const GpuAllocatorTimeline& g = rep.gpus[0];
  CHECK(g.unmatched_frees == 0);
  REQUIRE(g.samples.size() == 5);
  // 3 + 3 MiB in one 20 MiB segment; after b's free, a (3 MiB) is still allocated.
  CHECK(g.samples[1].allocated_bytes == 6 * kMiB);
  CHECK(g.samples[2].allocated_bytes == 3 * kMiB);
  CHECK(g.samples[2].largest_free_block_bytes == 17 * kMiB);  // b merged with the 14 MiB rest
  CHECK(g.samples[3].reserved_bytes == 20 * kMiB);            // all free but cached
  CHECK(g.samples[4].reserved_bytes == 0);                    // empty_cache released it
  REQUIRE(g.empty_cache.size() == 1);
  CHECK(g.empty_cache[0].released_bytes == 20 * kMiB);
  CHECK(g.peak_reserved_bytes == 20 * kMiB);
  CHECK_FALSE(rep.oom);
}
