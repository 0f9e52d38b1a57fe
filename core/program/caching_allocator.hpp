// A model of PyTorch's CUDA caching allocator, one per GPU (docs/memory.md, "Caching allocator").
// Requests are rounded, served from cached segments of two pools (small: <= 1 MiB, large), split
// and merged; a freed block is reused only by the stream it was allocated on; when a new segment
// does not fit, every fully free cached segment is released and the allocation retried before
// OOM. With expandable segments (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; docs/memory.md,
// "Expandable segments") each stream and pool grows one reserved address range by mapping pages
// instead, and the retry unmaps every free page. simulate_caching_allocator() drives one
// allocator per GPU with a Program's alloc / free ops in simulated time order and records
// reserved vs allocated bytes, fragmentation and segments over time, and the effect of each
// torch.cuda.empty_cache().
//
// Index:
//  [SECTION] Constants (c10/cuda/CUDACachingAllocator.cpp)
//  [SECTION] CachingAllocator: one GPU
//  [SECTION] Timeline over a Program
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/program/executor.hpp"
#include "core/program/program.hpp"

namespace csim::core {

// [SECTION] Constants ---------------------------------------------------------------------------
// PyTorch c10/cuda/CUDACachingAllocator.cpp (docs/memory.md, "Rules and sources").
inline constexpr Bytes kAllocMinBlockSize = 512;        // kMinBlockSize: every size rounds up to it
inline constexpr Bytes kAllocSmallSize = 1 << 20;       // kSmallSize: largest "small" request
inline constexpr Bytes kAllocSmallBuffer = 2 << 20;     // kSmallBuffer: small-pool segment size
inline constexpr Bytes kAllocLargeBuffer = 20 << 20;    // kLargeBuffer: segment for 1-10 MiB
inline constexpr Bytes kAllocMinLargeAlloc = 10 << 20;  // kMinLargeAlloc: own segment from here
inline constexpr Bytes kAllocRoundLarge = 2 << 20;      // kRoundLarge: own segments round to it

// Name of the marker op a lowering emits for torch.cuda.empty_cache() (training.empty_cache_every).
inline constexpr const char* kEmptyCacheOpName = "torch.cuda.empty_cache()";

// Rounding rules (docs/memory.md): the block size a request gets, and the segment (cudaMalloc) a
// request needs when no cached block fits.
Bytes allocator_round_size(Bytes request_bytes);
Bytes allocator_segment_size(Bytes request_bytes);

// [SECTION] CachingAllocator --------------------------------------------------------------------

struct AllocatorStats {
  Bytes reserved_bytes = 0;            // sum of segment sizes (torch.cuda.memory_reserved)
  Bytes allocated_bytes = 0;           // sum of allocated block sizes, rounded (memory_allocated)
  Bytes requested_bytes = 0;           // sum of the requests as asked, unrounded
  Bytes largest_free_block_bytes = 0;  // largest cached free block, any stream and pool
  int segments = 0;                    // live cudaMalloc'ed segments
};

class CachingAllocator {
 public:
  using BlockId = std::int32_t;
  static constexpr BlockId kNoBlock = -1;

  // usable_bytes 0: unlimited. expandable: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
  explicit CachingAllocator(Bytes usable_bytes, bool expandable = false);

  // Result of malloc(): the block, and whether cached segments had to be released first.
  struct Allocation {
    BlockId block = kNoBlock;
    bool released_cache = false;  // cudaMalloc failed once; every free segment was released
    bool oom = false;             // still no room after the release: a real run raises OOM here
    Bytes reserved_before = 0;    // reserved before the segment / pages this request added
    Bytes grew_bytes = 0;         // the cudaMalloc'ed segment or the pages mapped (0: cached)
  };
  // Serve `request_bytes` for `stream`. On OOM the segment is created anyway (reserved exceeds
  // the usable memory) so a timeline can go on; `oom` says it would have failed.
  Allocation malloc(Bytes request_bytes, int stream);
  void free(BlockId block);
  // torch.cuda.empty_cache(): release every fully free segment; returns the bytes released.
  Bytes empty_cache();

  const AllocatorStats& stats() const { return stats_; }
  Bytes block_bytes(BlockId b) const { return blocks_[b].size; }
  Bytes usable_bytes() const { return usable_; }
  bool expandable() const { return expandable_; }

 private:
  struct Block {
    Bytes size = 0;
    Bytes addr = 0;       // virtual address: segments are laid out one after another
    Bytes requested = 0;  // request served (allocated blocks only)
    int stream = 0;       // stream of the allocation that created the segment
    bool small = false;   // small or large pool
    bool allocated = false;
    bool live = true;    // false once merged away or released with its segment
    bool mapped = true;  // expandable segments: false for address space with no pages
    int segment = -1;    // expandable segments: its index in segments_ (-1: a cudaMalloc one)
    BlockId prev = kNoBlock, next = kNoBlock;  // neighbours in the same segment
  };
  // One expandable segment (ExpandableSegment): a reserved address range of one stream and pool.
  struct Segment {
    Bytes base = 0, size = 0;
    Bytes page = 0;  // mapping granularity: kAllocSmallBuffer (small pool), kAllocLargeBuffer
    bool live = true;
  };
  using Key = std::tuple<int, Bytes, Bytes, BlockId>;  // (stream, size, addr, id): best fit first
  Key key(BlockId b) const { return {blocks_[b].stream, blocks_[b].size, blocks_[b].addr, b}; }
  // Unmapped blocks by (stream, pool, addr, id): lowest address first.
  using UKey = std::tuple<int, int, Bytes, BlockId>;
  UKey ukey(BlockId b) const {
    return {blocks_[b].stream, blocks_[b].small ? 1 : 0, blocks_[b].addr, b};
  }
  std::set<Key>& pool(bool small) { return small ? small_pool_ : large_pool_; }
  void insert_free(BlockId b);
  void erase_free(BlockId b);
  BlockId new_block(Block b);
  // A free block of `size` bytes at `addr` in b's segment, linked right after b.
  BlockId insert_free_after(BlockId b, Bytes addr, Bytes size);
  BlockId get_free_block(Bytes size, bool small, int stream);
  bool try_merge(BlockId dst, BlockId src);
  Bytes release_free_segments();
  void update_largest_free();
  // [SECTION] Expandable segments (caching_allocator.cpp)
  BlockId find_expandable_block(Bytes size, bool small, int stream);
  bool map_block(BlockId b, Bytes size, bool force);
  BlockId try_allocate_expandable(Bytes size, bool small, int stream, bool force);
  Bytes unmap_block(BlockId b);

  Bytes usable_ = 0;
  bool expandable_ = false;
  Bytes next_addr_ = 0;
  std::vector<Block> blocks_;
  std::vector<Segment> segments_;
  std::set<Key> small_pool_, large_pool_;
  std::set<UKey> unmapped_;
  AllocatorStats stats_;
};

// [SECTION] Timeline over a Program --------------------------------------------------------------

struct AllocatorSample {
  TimeNs t_ns = 0;
  Bytes reserved_bytes = 0;
  Bytes allocated_bytes = 0;  // rounded block sizes
  Bytes largest_free_block_bytes = 0;
  int segments = 0;
};

struct EmptyCacheEffect {
  TimeNs t_ns = 0;
  int step = 0;
  Bytes released_bytes = 0;  // reserved before - after
  Bytes reserved_after_bytes = 0;
  Bytes allocated_bytes = 0;  // allocated blocks at the call (empty_cache leaves them alone)
};

struct GpuAllocatorTimeline {
  int gpu = 0;
  Bytes capacity_bytes = 0;  // usable memory
  Bytes peak_reserved_bytes = 0;
  Bytes peak_allocated_bytes = 0;        // rounded blocks
  int cache_releases = 0;                // failed cudaMalloc retried after releasing the cache
  int unmatched_frees = 0;               // frees with no live allocation of that size (ignored)
  std::vector<AllocatorSample> samples;  // one per instant the state changed, time order
  std::vector<EmptyCacheEffect> empty_cache;
};

struct AllocatorOom {
  int gpu = 0;
  OpId op = kNoOp;
  std::string op_name;
  Bytes requested_bytes = 0;
  Bytes reserved_bytes = 0;   // reserved before the failed cudaMalloc, after releasing the cache
  Bytes allocated_bytes = 0;  // allocated (rounded) at that moment
  Bytes segment_bytes = 0;    // the cudaMalloc (expandable: the pages to map) that did not fit
  Bytes capacity_bytes = 0;
  TimeNs at_ns = 0;
  bool expandable = false;  // the allocator ran with expandable segments
  // Default allocator only (memory_timeline, docs/memory.md "OOM verdict"): the same ops through
  // an allocator with expandable segments, on this GPU: its peak reserved bytes, and whether it
  // runs out too (then the OOM is the verdict; else a note says why it is not).
  Bytes expandable_peak_reserved_bytes = -1;  // -1: not simulated
  bool expandable_oom = false;
};

struct AllocatorReport {
  std::vector<GpuAllocatorTimeline> gpus;  // same GPUs and order as MemoryReport::gpus
  std::optional<AllocatorOom> oom;  // the first allocation, in time, the allocator cannot serve
};

// Alloc / free ops (and kEmptyCacheOpName markers) in execution order: by start time, then op id.
// A free releases the oldest live allocation of its GPU with the same category and bytes,
// preferring one of the same name (docs/memory.md, "Driving it with a Program").
// Expandable segments when program.expandable_segments (training.allocator.expandable_segments).
AllocatorReport simulate_caching_allocator(const Program& program,
                                           const std::vector<OpTiming>& timings,
                                           const std::vector<int>& gpus,
                                           const std::vector<Bytes>& capacity_bytes);
// The same, from `ops`: op ids already in that order (memory_timeline() sorts once for both); ops
// that are not the allocator's (zero-byte alloc / free, markers other than kEmptyCacheOpName, ops
// that never ran) are skipped. `expandable_segments` in place of the program's setting.
AllocatorReport simulate_caching_allocator(const Program& program,
                                           const std::vector<OpTiming>& timings,
                                           const std::vector<OpId>& ops,
                                           const std::vector<int>& gpus,
                                           const std::vector<Bytes>& capacity_bytes,
                                           bool expandable_segments);

}  // namespace csim::core
