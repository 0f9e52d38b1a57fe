// PyTorch's CUDA caching allocator as a model (caching_allocator.hpp). Every rule cites
// docs/memory.md, which names its source in c10/cuda/CUDACachingAllocator.cpp.
#include "core/program/caching_allocator.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>

#include "core/error.hpp"

namespace csim::core {

// [SECTION] Rounding rules ------------------------------------------------------------------------

Bytes allocator_round_size(Bytes request_bytes) {
  // docs/memory.md rule 1 (round_size): up to a multiple of kMinBlockSize, at least kMinBlockSize.
  if (request_bytes < kAllocMinBlockSize) return kAllocMinBlockSize;
  return (request_bytes + kAllocMinBlockSize - 1) / kAllocMinBlockSize * kAllocMinBlockSize;
}

Bytes allocator_segment_size(Bytes request_bytes) {
  // docs/memory.md rule 3 (get_allocation_size): small requests get a 2 MiB segment, 1-10 MiB a
  // 20 MiB one, larger ones their size rounded up to 2 MiB.
  const Bytes size = allocator_round_size(request_bytes);
  if (size <= kAllocSmallSize) return kAllocSmallBuffer;
  if (size < kAllocMinLargeAlloc) return kAllocLargeBuffer;
  return (size + kAllocRoundLarge - 1) / kAllocRoundLarge * kAllocRoundLarge;
}

// [SECTION] CachingAllocator ----------------------------------------------------------------------

CachingAllocator::CachingAllocator(Bytes usable_bytes, bool expandable)
    : usable_(usable_bytes), expandable_(expandable) {}

CachingAllocator::BlockId CachingAllocator::new_block(Block b) {
  blocks_.push_back(b);
  return static_cast<BlockId>(blocks_.size() - 1);
}

void CachingAllocator::insert_free(BlockId b) {
  pool(blocks_[b].small).insert(key(b));
}

CachingAllocator::BlockId CachingAllocator::insert_free_after(BlockId b, Bytes addr, Bytes size) {
  Block r;
  r.size = size;
  r.addr = addr;
  r.stream = blocks_[b].stream;
  r.small = blocks_[b].small;
  r.segment = blocks_[b].segment;
  r.prev = b;
  r.next = blocks_[b].next;
  const BlockId rid = new_block(r);
  if (blocks_[rid].next != kNoBlock) blocks_[blocks_[rid].next].prev = rid;
  blocks_[b].next = rid;
  insert_free(rid);
  return rid;
}

void CachingAllocator::erase_free(BlockId b) {
  pool(blocks_[b].small).erase(key(b));
}

namespace {

// The largest block of a pool ordered by (stream, size, addr, id): the last one of each stream's
// run, found from the end one stream at a time (a GPU's allocator sees a few streams).
template <class Pool>
Bytes largest_in_pool(const Pool& p) {
  using Key = typename Pool::key_type;
  Bytes best = 0;
  auto it = p.end();
  while (it != p.begin()) {
    --it;  // the largest block of its stream
    best = std::max(best, std::get<1>(*it));
    it = p.lower_bound(Key{std::get<0>(*it), std::numeric_limits<Bytes>::min(),
                           std::numeric_limits<Bytes>::min(),
                           std::numeric_limits<std::tuple_element_t<3, Key>>::min()});
  }
  return best;
}

}  // namespace

void CachingAllocator::update_largest_free() {
  stats_.largest_free_block_bytes =
      std::max(largest_in_pool(small_pool_), largest_in_pool(large_pool_));
}

CachingAllocator::BlockId CachingAllocator::get_free_block(Bytes size, bool small, int stream) {
  // Rule 4 (get_free_block): the smallest cached block of this stream's pool that fits; pools are
  // ordered by (stream, size, address), so lower_bound is the best fit.
  std::set<Key>& p = pool(small);
  auto it = p.lower_bound(Key{stream, size, 0, 0});
  if (it == p.end() || std::get<0>(*it) != stream) return kNoBlock;
  if (expandable_) {
    // Expandable segments: a block followed by unmapped space counts as the size it can grow to,
    // so among the blocks that fit the walk moves on while the next one's is smaller
    // (get_free_block's expandable_size).
    auto grows_to = [&](BlockId b) {
      const BlockId n = blocks_[b].next;
      return blocks_[b].size + (n != kNoBlock && !blocks_[n].mapped ? blocks_[n].size : 0);
    };
    auto next = std::next(it);
    while (next != p.end() && std::get<0>(*next) == stream &&
           grows_to(std::get<3>(*next)) < grows_to(std::get<3>(*it)))
      it = next++;
  }
  const BlockId b = std::get<3>(*it);
  erase_free(b);
  return b;
}

CachingAllocator::Allocation CachingAllocator::malloc(Bytes request_bytes, int stream) {
  CSIM_ASSERT_MSG(request_bytes > 0, "allocation of 0 bytes");
  Allocation out;
  const Bytes size = allocator_round_size(request_bytes);
  const bool small = size <= kAllocSmallSize;  // rule 2 (get_pool): <= 1 MiB -> small pool
  BlockId b = get_free_block(size, small, stream);
  if (b == kNoBlock && expandable_) {
    // Expandable segments (docs/memory.md): map the pages the request lacks at the end of this
    // stream's segment; when they do not fit, unmap every free page and retry once.
    out.reserved_before = stats_.reserved_bytes;
    b = try_allocate_expandable(size, small, stream, false);
    if (b == kNoBlock) {
      release_free_segments();
      out.released_cache = true;
      out.reserved_before = stats_.reserved_bytes;
      b = try_allocate_expandable(size, small, stream, false);
      if (b == kNoBlock) {
        out.oom = true;
        out.reserved_before = stats_.reserved_bytes;
        b = try_allocate_expandable(size, small, stream, true);  // so the timeline goes on
      }
    }
    out.grew_bytes = stats_.reserved_bytes - out.reserved_before;
  } else if (b == kNoBlock) {
    // Rule 5 (alloc_block): a new segment; when it does not fit in the usable memory, release
    // every fully free cached segment (release_cached_blocks) and retry once (rule 6).
    const Bytes seg = allocator_segment_size(request_bytes);
    if (usable_ > 0 && stats_.reserved_bytes + seg > usable_) {
      release_free_segments();
      out.released_cache = true;
      if (stats_.reserved_bytes + seg > usable_) out.oom = true;
    }
    Block blk;
    blk.size = seg;
    blk.addr = next_addr_;
    blk.stream = stream;
    blk.small = small;
    next_addr_ += seg;
    b = new_block(blk);
    out.reserved_before = stats_.reserved_bytes;
    out.grew_bytes = seg;
    stats_.reserved_bytes += seg;
    stats_.segments += 1;
  }
  // Rule 7 (should_split): split off the rest when it is at least kMinBlockSize (small pool, or
  // any pool with expandable segments) or more than kSmallSize (large pool); the allocation keeps
  // the front of the block.
  const Bytes rest = blocks_[b].size - size;
  if (((small || expandable_) && rest >= kAllocMinBlockSize) ||
      (!small && rest > kAllocSmallSize)) {
    blocks_[b].size = size;
    insert_free_after(b, blocks_[b].addr + size, rest);
  }
  blocks_[b].allocated = true;
  blocks_[b].requested = request_bytes;
  stats_.allocated_bytes += blocks_[b].size;
  stats_.requested_bytes += request_bytes;
  update_largest_free();
  out.block = b;
  return out;
}

bool CachingAllocator::try_merge(BlockId dst, BlockId src) {
  // try_merge_blocks: src is dst's neighbour; merged when it is free and mapped alike.
  if (src == kNoBlock) return false;
  Block& s = blocks_[src];
  Block& d = blocks_[dst];
  if (s.allocated || s.mapped != d.mapped) return false;
  if (s.mapped) {
    erase_free(src);
  } else {
    unmapped_.erase(ukey(src));
  }
  if (s.addr < d.addr) {  // src before dst
    d.addr = s.addr;
    d.prev = s.prev;
    if (d.prev != kNoBlock) blocks_[d.prev].next = dst;
  } else {
    d.next = s.next;
    if (d.next != kNoBlock) blocks_[d.next].prev = dst;
  }
  d.size += s.size;
  s.live = false;
  return true;
}

void CachingAllocator::free(BlockId b) {
  CSIM_ASSERT_MSG(
      b >= 0 && b < static_cast<BlockId>(blocks_.size()) && blocks_[b].allocated && blocks_[b].live,
      "free of a block that is not allocated");
  stats_.allocated_bytes -= blocks_[b].size;
  stats_.requested_bytes -= blocks_[b].requested;
  blocks_[b].allocated = false;
  blocks_[b].requested = 0;
  // Rule 8 (free_block / try_merge_blocks): merge with a free neighbour on either side; the block
  // goes back to the pool of the stream it was allocated on.
  try_merge(b, blocks_[b].prev);
  try_merge(b, blocks_[b].next);
  insert_free(b);
  update_largest_free();
}

Bytes CachingAllocator::release_free_segments() {
  // release_cached_blocks -> release_blocks: a free block with no neighbours is a whole segment;
  // a free block of an expandable segment gives back its whole pages (unmap_block), and a
  // segment left with no page is released.
  Bytes released = 0;
  std::vector<BlockId> to_unmap;
  for (std::set<Key>* p : {&large_pool_, &small_pool_}) {
    for (auto it = p->begin(); it != p->end();) {
      const BlockId b = std::get<3>(*it);
      if (blocks_[b].segment >= 0) {
        to_unmap.push_back(b);
        ++it;
      } else if (blocks_[b].prev == kNoBlock && blocks_[b].next == kNoBlock) {
        released += blocks_[b].size;
        stats_.reserved_bytes -= blocks_[b].size;
        stats_.segments -= 1;
        blocks_[b].live = false;
        it = p->erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const BlockId b : to_unmap) released += unmap_block(b);
  update_largest_free();
  return released;
}

// [SECTION] Expandable segments -------------------------------------------------------------------
// c10/cuda/CUDACachingAllocator.cpp with expandable_segments (docs/memory.md, "Expandable
// segments"): find_expandable_block, map_block, try_allocate_expandable_block, unmap_block,
// release_expandable_segment.

CachingAllocator::BlockId CachingAllocator::find_expandable_block(Bytes size, bool small,
                                                                  int stream) {
  // The lowest-address unmapped block of this stream and pool (with the free block before it)
  // whose run of free and unmapped blocks holds `size`; else a new segment.
  const auto allocatable = [&](BlockId b) { return b != kNoBlock && !blocks_[b].allocated; };
  const int pool_index = small ? 1 : 0;
  for (auto it = unmapped_.lower_bound(UKey{stream, pool_index, 0, 0});
       it != unmapped_.end() && std::get<0>(*it) == stream && std::get<1>(*it) == pool_index;
       ++it) {
    BlockId c = std::get<3>(*it);
    if (allocatable(blocks_[c].prev)) c = blocks_[c].prev;
    Bytes room = 0;
    for (BlockId x = c; room < size && allocatable(x); x = blocks_[x].next) room += blocks_[x].size;
    if (room >= size) return c;
  }
  // ExpandableSegment reserves the device's memory and an eighth more of address space, in pages
  // of kSmallBuffer (small pool) or kLargeBuffer; the usable memory stands for the device's here.
  // A request beyond that (one that cannot fit anyway: an OOM) gets a range its size.
  Segment sg;
  sg.page = small ? kAllocSmallBuffer : kAllocLargeBuffer;
  const Bytes want = std::max(size, usable_ > 0 ? usable_ + usable_ / 8 : Bytes{1} << 44);
  sg.size = std::max(sg.page, (want + sg.page - 1) / sg.page * sg.page);
  sg.base = next_addr_;
  next_addr_ += sg.size;
  segments_.push_back(sg);
  stats_.segments += 1;
  Block blk;
  blk.size = sg.size;
  blk.addr = sg.base;
  blk.stream = stream;
  blk.small = small;
  blk.mapped = false;
  blk.segment = static_cast<int>(segments_.size()) - 1;
  const BlockId b = new_block(blk);
  unmapped_.insert(ukey(b));
  return b;
}

bool CachingAllocator::map_block(BlockId b, Bytes size, bool force) {
  // Maps the pages covering the first `size` bytes of unmapped block b (whole pages: an unmapped
  // block starts on a page), merges them with free neighbours; fails when the usable memory
  // cannot hold them (cuMemCreate failing), unless `force`.
  Block& blk = blocks_[b];
  const Bytes page = segments_[static_cast<std::size_t>(blk.segment)].page;
  const Bytes mapped = std::min(blk.size, (size + page - 1) / page * page);
  if (!force && usable_ > 0 && stats_.reserved_bytes + mapped > usable_) return false;
  unmapped_.erase(ukey(b));
  blocks_[b].mapped = true;
  if (mapped < blocks_[b].size) {
    Block r;
    r.size = blocks_[b].size - mapped;
    r.addr = blocks_[b].addr + mapped;
    r.stream = blocks_[b].stream;
    r.small = blocks_[b].small;
    r.segment = blocks_[b].segment;
    r.mapped = false;
    r.prev = b;
    r.next = blocks_[b].next;
    const BlockId rid = new_block(r);
    if (blocks_[rid].next != kNoBlock) blocks_[blocks_[rid].next].prev = rid;
    blocks_[b].next = rid;
    blocks_[b].size = mapped;
    unmapped_.insert(ukey(rid));
  }
  try_merge(b, blocks_[b].prev);
  try_merge(b, blocks_[b].next);
  insert_free(b);
  stats_.reserved_bytes += mapped;
  return true;
}

CachingAllocator::BlockId CachingAllocator::try_allocate_expandable(Bytes size, bool small,
                                                                    int stream, bool force) {
  BlockId c = find_expandable_block(size, small, stream);
  // The candidate is unmapped, or free and followed by unmapped space: map until it holds size.
  if (!blocks_[c].mapped && !map_block(c, std::min(blocks_[c].size, size), force)) return kNoBlock;
  while (blocks_[c].size < size) {
    const BlockId n = blocks_[c].next;
    CSIM_ASSERT(n != kNoBlock && !blocks_[n].mapped);
    if (!map_block(n, std::min(size - blocks_[c].size, blocks_[n].size), force)) return kNoBlock;
    c = n;  // map_block merged c into n
  }
  erase_free(c);
  return c;
}

Bytes CachingAllocator::unmap_block(BlockId b) {
  // unmap_block: the whole pages inside free block b go back; the partial pages at its ends stay
  // mapped as free blocks of their own. A segment left without pages is released.
  const Segment& sg = segments_[static_cast<std::size_t>(blocks_[b].segment)];
  const Bytes lo = blocks_[b].addr - sg.base, hi = lo + blocks_[b].size;
  const Bytes begin = (lo + sg.page - 1) / sg.page * sg.page, end = hi / sg.page * sg.page;
  if (end <= begin) return 0;
  erase_free(b);
  if (begin > lo) {
    Block f;
    f.size = begin - lo;
    f.addr = blocks_[b].addr;
    f.stream = blocks_[b].stream;
    f.small = blocks_[b].small;
    f.segment = blocks_[b].segment;
    f.prev = blocks_[b].prev;
    f.next = b;
    const BlockId fid = new_block(f);
    if (blocks_[fid].prev != kNoBlock) blocks_[blocks_[fid].prev].next = fid;
    blocks_[b].prev = fid;
    insert_free(fid);
  }
  if (hi > end) {
    insert_free_after(b, sg.base + end, hi - end);
  }
  blocks_[b].addr = sg.base + begin;
  blocks_[b].size = end - begin;
  blocks_[b].mapped = false;
  try_merge(b, blocks_[b].prev);
  try_merge(b, blocks_[b].next);
  unmapped_.insert(ukey(b));
  stats_.reserved_bytes -= end - begin;
  if (blocks_[b].prev == kNoBlock && blocks_[b].next == kNoBlock) {
    // release_expandable_segment
    unmapped_.erase(ukey(b));
    blocks_[b].live = false;
    segments_[static_cast<std::size_t>(blocks_[b].segment)].live = false;
    stats_.segments -= 1;
  }
  return end - begin;
}

Bytes CachingAllocator::empty_cache() {
  return release_free_segments();
}

// [SECTION] Timeline over a Program
// ----------------------------------------------------------------

namespace {

struct LiveAlloc {
  NameId name;  // the alloc op's (Program::names)
  CachingAllocator::BlockId block;
};

}  // namespace

// Memory ops (and empty-cache markers) by start time, then op id: (start, id) pairs are unique,
// so std::sort gives the order a stable sort by start time of the ids in issue order would.
AllocatorReport simulate_caching_allocator(const Program& program,
                                           const std::vector<OpTiming>& timings,
                                           const std::vector<int>& gpus,
                                           const std::vector<Bytes>& capacity_bytes) {
  std::vector<std::pair<TimeNs, OpId>> order;
  for (const Op& op : program.ops) {
    if (op.id >= static_cast<OpId>(timings.size()) || timings[op.id].start_ns < 0) continue;
    if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree || op.kind == OpKind::kMarker)
      order.emplace_back(timings[op.id].start_ns, op.id);
  }
  std::sort(order.begin(), order.end());
  std::vector<OpId> ops;
  ops.reserve(order.size());
  for (const auto& [t, id] : order) ops.push_back(id);
  return simulate_caching_allocator(program, timings, ops, gpus, capacity_bytes,
                                    program.expandable_segments);
}

AllocatorReport simulate_caching_allocator(const Program& program,
                                           const std::vector<OpTiming>& timings,
                                           const std::vector<OpId>& ops_in_order,
                                           const std::vector<int>& gpus,
                                           const std::vector<Bytes>& capacity_bytes,
                                           bool expandable_segments) {
  AllocatorReport rep;
  std::vector<std::size_t> index;  // gpu -> position in rep.gpus; gpus.size() when not tracked
  std::vector<CachingAllocator> allocators;
  allocators.reserve(gpus.size());
  for (std::size_t k = 0; k < gpus.size(); ++k) {
    if (gpus[k] >= 0) {
      const auto g_index = static_cast<std::size_t>(gpus[k]);
      if (index.size() <= g_index) index.resize(g_index + 1, gpus.size());
      index[g_index] = k;
    }
    GpuAllocatorTimeline g;
    g.gpu = gpus[k];
    g.capacity_bytes = capacity_bytes[k];
    rep.gpus.push_back(g);
    allocators.emplace_back(capacity_bytes[k], expandable_segments);
  }
  NameId empty_cache_name;  // interned once: ops are told apart by id, not by comparing text
  const bool any_empty_cache = program.names.find(kEmptyCacheOpName, &empty_cache_name);
  std::vector<OpId> ops;
  ops.reserve(ops_in_order.size());
  for (OpId id : ops_in_order) {
    if (id < 0 || id >= static_cast<OpId>(timings.size()) || timings[id].start_ns < 0) continue;
    const Op& op = program.ops[id];
    const bool mem = (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) && op.bytes > 0;
    const bool empty = any_empty_cache && op.kind == OpKind::kMarker && op.name == empty_cache_name;
    if (mem || empty) ops.push_back(id);
  }
  // Live allocations per GPU by (category, bytes), oldest first.
  std::vector<std::map<std::pair<int, Bytes>, std::deque<LiveAlloc>>> live(gpus.size());
  for (OpId id : ops) {
    const Op& op = program.ops[id];
    if (op.gpu < 0 || static_cast<std::size_t>(op.gpu) >= index.size()) continue;
    const std::size_t k = index[static_cast<std::size_t>(op.gpu)];
    if (k == gpus.size()) continue;
    CachingAllocator& a = allocators[k];
    GpuAllocatorTimeline& g = rep.gpus[k];
    const TimeNs t = timings[id].start_ns;
    if (op.kind == OpKind::kMarker) {
      // torch.cuda.empty_cache() (docs/memory.md rule 9): every fully free segment is released.
      EmptyCacheEffect e;
      e.t_ns = t;
      e.step = op.step;
      e.released_bytes = a.empty_cache();
      e.reserved_after_bytes = a.stats().reserved_bytes;
      e.allocated_bytes = a.stats().allocated_bytes;
      g.empty_cache.push_back(e);
    } else if (op.kind == OpKind::kAlloc) {
      const CachingAllocator::Allocation r = a.malloc(op.bytes, op.stream);
      live[k][{static_cast<int>(op.mem_category), op.bytes}].push_back({op.name, r.block});
      if (r.released_cache) g.cache_releases += 1;
      if (r.oom && (!rep.oom || t < rep.oom->at_ns)) {
        AllocatorOom o;
        o.gpu = op.gpu;
        o.op = id;
        o.op_name = program.name_of(op);
        o.requested_bytes = op.bytes;
        o.segment_bytes = r.grew_bytes;
        o.reserved_bytes = r.reserved_before;
        o.allocated_bytes = a.stats().allocated_bytes - a.block_bytes(r.block);
        o.capacity_bytes = g.capacity_bytes;
        o.at_ns = t;
        o.expandable = a.expandable();
        rep.oom = o;
      }
    } else {
      // docs/memory.md, "Driving it with a Program": the oldest live allocation of the same
      // category and size, preferring the same name.
      auto lt = live[k].find({static_cast<int>(op.mem_category), op.bytes});
      if (lt == live[k].end() || lt->second.empty()) {
        g.unmatched_frees += 1;
        continue;
      }
      std::deque<LiveAlloc>& q = lt->second;
      auto pick =
          std::find_if(q.begin(), q.end(), [&](const LiveAlloc& l) { return l.name == op.name; });
      if (pick == q.end()) pick = q.begin();
      a.free(pick->block);
      q.erase(pick);
    }
    const AllocatorStats& s = a.stats();
    const AllocatorSample smp{t, s.reserved_bytes, s.allocated_bytes, s.largest_free_block_bytes,
                              s.segments};
    if (!g.samples.empty() && g.samples.back().t_ns == t) {
      g.samples.back() = smp;  // several changes at one instant: keep the last state
    } else {
      g.samples.push_back(smp);
    }
    g.peak_reserved_bytes = std::max(g.peak_reserved_bytes, s.reserved_bytes);
    g.peak_allocated_bytes = std::max(g.peak_allocated_bytes, s.allocated_bytes);
  }
  return rep;
}

}  // namespace csim::core
