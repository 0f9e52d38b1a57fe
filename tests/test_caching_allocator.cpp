// The caching-allocator model (core/program/caching_allocator.hpp) on hand-made sequences:
// rounding, the two pools, splitting and merging, per-stream reuse, release-and-retry before OOM,
// empty_cache. Rules and their PyTorch sources: docs/memory.md.
#include <catch2/catch.hpp>

#include "core/program/caching_allocator.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"

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

// [SECTION] Expandable segments (docs/memory.md, "Expandable segments") ---------------------------

TEST_CASE("expandable segments: pages grow the stream's segment where a freed block is split",
          "[memory][allocator]") {
  // Usable 100 MiB. X 60 MiB, freed; Y 10 MiB takes the front of X's block; Z 60 MiB.
  // Default allocator: X is a 60 MiB segment; Y splits it (Y 10, 50 free); Z finds no 60 MiB
  // block and needs a 60 MiB segment: 60 + 60 > 100 and no segment is wholly free -> OOM with
  // 70 MiB allocated.
  CachingAllocator d(100 * kMiB);
  d.free(d.malloc(60 * kMiB, 0).block);
  d.malloc(10 * kMiB, 0);
  const auto dz = d.malloc(60 * kMiB, 0);
  CHECK(dz.oom);
  CHECK(dz.reserved_before == 60 * kMiB);
  CHECK(dz.grew_bytes == 60 * kMiB);
  // Expandable (large-pool pages of 20 MiB): X maps 3 pages [0, 60); freed; Y [0, 10) splits
  // it (any remainder >= 512 B is split), [10, 60) free; Z needs 60: the free 50 MiB run plus the
  // unmapped space after it, so one more page is mapped, [60, 80): reserved 80 MiB, Z at
  // [10, 70), a 10 MiB free tail. No OOM.
  CachingAllocator e(100 * kMiB, true);
  e.free(e.malloc(60 * kMiB, 0).block);
  CHECK(e.stats().reserved_bytes == 60 * kMiB);
  const auto y = e.malloc(10 * kMiB, 0);
  const auto z = e.malloc(60 * kMiB, 0);
  CHECK_FALSE(z.oom);
  CHECK_FALSE(z.released_cache);
  CHECK(z.reserved_before == 60 * kMiB);
  CHECK(z.grew_bytes == 20 * kMiB);
  CHECK(e.stats().reserved_bytes == 80 * kMiB);
  CHECK(e.stats().allocated_bytes == 70 * kMiB);
  CHECK(e.stats().largest_free_block_bytes == 10 * kMiB);
  CHECK(e.stats().segments == 1);
  // empty_cache unmaps whole free pages only: the 10 MiB tail shares page [60, 80) with Z.
  CHECK(e.empty_cache() == 0);
  // Everything freed: [0, 80) is one free block, 4 whole pages; the segment goes.
  e.free(y.block);
  e.free(z.block);
  CHECK(e.empty_cache() == 80 * kMiB);
  CHECK(e.stats().reserved_bytes == 0);
  CHECK(e.stats().segments == 0);
}

TEST_CASE("expandable segments: a failed mapping unmaps other streams' free pages and retries",
          "[memory][allocator]") {
  // Usable 100 MiB. A (50 MiB, stream 1) maps 3 pages (60 MiB) and is freed: stream 1 caches
  // [0, 60). B (50 MiB, stream 2) needs its own segment's 3 pages: 60 + 60 > 100, so the mapping
  // fails; release_cached_blocks unmaps stream 1's free pages (60 MiB; its segment, left without
  // pages, goes) and the retry maps B's: reserved 60 MiB, one segment, no OOM.
  CachingAllocator e(100 * kMiB, true);
  e.free(e.malloc(50 * kMiB, 1).block);
  const auto b = e.malloc(50 * kMiB, 2);
  CHECK(b.released_cache);
  CHECK_FALSE(b.oom);
  CHECK(e.stats().reserved_bytes == 60 * kMiB);
  CHECK(e.stats().segments == 1);
  CHECK(e.stats().allocated_bytes == 50 * kMiB);
}

namespace {

// One GPU's alloc / free ops, one per 10 ns, on `stream`; usable memory U of an A100-80GB.
struct HandProgram {
  Program p;
  void op(OpKind kind, const std::string& name, Bytes bytes, int stream = 0) {
    Op o;
    o.id = static_cast<OpId>(p.ops.size());
    o.kind = kind;
    o.name = p.names.intern(name);
    o.stream = stream;
    o.bytes = bytes;
    o.step = 1;
    p.ops.push_back(o);
  }
  MemoryReport run(bool expandable) {
    p.world_gpus = 1;
    p.active_gpus = {0};
    p.expandable_segments = expandable;
    std::vector<OpTiming> t(p.ops.size());
    for (std::size_t i = 0; i < t.size(); ++i)
      t[i].start_ns = t[i].end_ns = 10 * static_cast<TimeNs>(i);
    return memory_timeline(p, t, a100().cluster);
  }
  static const Scenario& a100() {
    static const Scenario s = parse_scenario_string(
        "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":1,\"gpu\":\"A100-SXM4-80GB\"},"
        "\"model\":{\"explicit\":[{\"name\":\"l\",\"kind\":\"gemm\",\"params\":1}]},"
        "\"training\":{\"global_batch\":1},\"strategy\":{\"kind\":\"single\"}}",
        "a100.json", {});
    return s;
  }
};

}  // namespace

TEST_CASE("OOM verdict: the allocator's, when the allocated bytes fit", "[memory][allocator]") {
  const Bytes u = usable_memory_bytes(HandProgram::a100().cluster, false);
  REQUIRE(u > 96 * kGiB / 2);  // 80 GB less the reserves: the sizes below assume U > 48 GiB
  // X 48 GiB, freed; Y 8 GiB; Z 48 GiB (the sequence of the allocator test above, in GiB). The
  // allocated bytes peak at 56 GiB < U: no allocation exceeds the capacity.
  HandProgram h;
  h.op(OpKind::kAlloc, "x", 48 * kGiB);
  h.op(OpKind::kFree, "x", 48 * kGiB);
  h.op(OpKind::kAlloc, "y", 8 * kGiB);
  h.op(OpKind::kAlloc, "z", 48 * kGiB);
  // Default allocator: Z needs a 48 GiB segment beside X's 48 GiB one (Y holds it): 96 GiB > U,
  // an allocator OOM. Through pages it fits: X maps ceil(49152 / 20) = 2458 pages (49,160 MiB),
  // Y takes 8,192 MiB of them, Z needs 49,152 - 40,968 = 8,184 MiB more: 410 pages, 8,200 MiB;
  // reserved 57,360 MiB < U. So it is fragmentation, not the verdict: a note gives both.
  const MemoryReport def = h.run(false);
  CHECK_FALSE(def.oom);
  REQUIRE(def.allocator.oom);
  CHECK(def.allocator.oom->reserved_bytes == 48 * kGiB);
  CHECK(def.allocator.oom->segment_bytes == 48 * kGiB);
  CHECK(def.allocator.oom->allocated_bytes == 8 * kGiB);
  CHECK(def.allocator.oom->expandable_peak_reserved_bytes == 57360 * kMiB);
  CHECK_FALSE(def.allocator.oom->expandable_oom);
  // With expandable segments the allocator never runs out here.
  const MemoryReport pages = h.run(true);
  CHECK_FALSE(pages.oom);
  CHECK_FALSE(pages.allocator.oom);
  REQUIRE(pages.allocator.gpus.size() == 1);
  CHECK(pages.allocator.gpus[0].peak_reserved_bytes == 57360 * kMiB);
  // Expandable segments map whole 20 MiB pages: a request of U rounded down to a page plus
  // 512 B needs one page more than fits (U is not a multiple of 20 MiB on this GPU), though its
  // bytes fit. Every free page was released first, so this is the verdict: shortfall =
  // reserved (0) + pages - U.
  const Bytes page = 20 * kMiB;
  REQUIRE(u % page != 0);
  const Bytes w = u / page * page + 512;
  HandProgram big;
  big.op(OpKind::kAlloc, "w", w);
  const MemoryReport v = big.run(true);
  REQUIRE(v.oom);
  CHECK(v.oom->allocator);
  CHECK(v.oom->expandable_segments);
  CHECK(v.oom->segment_bytes == u / page * page + page);
  CHECK(v.oom->shortfall_bytes == u / page * page + page - u);
}

TEST_CASE("expandable segments: a request beyond the reserved address range is an OOM",
          "[memory][allocator]") {
  // Usable 100 MiB: a segment reserves 112.5 MiB of addresses, rounded to 120 MiB (6 pages). A
  // 200 MiB request gets a range of its own, 10 pages, which cannot be mapped: an OOM, the pages
  // mapped anyway (reserved 200 MiB) so that a timeline goes on.
  CachingAllocator e(100 * kMiB, true);
  const auto r = e.malloc(200 * kMiB, 0);
  CHECK(r.oom);
  CHECK(r.released_cache);
  CHECK(r.grew_bytes == 200 * kMiB);
  CHECK(e.stats().reserved_bytes == 200 * kMiB);
}
