// The C library's allocator tuned for many short evaluations (docs/sweep.md, "Allocator").
#pragma once

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace csim::run {

// Keeps glibc's malloc from handing freed memory back to the kernel after every evaluation:
// a sweep or tune evaluates thousands of variants, each allocating and freeing the same few
// hundred KiB of op lists and schedules; with glibc's defaults a worker thread's arena returns
// them (madvise) or maps them afresh (mmap above the dynamic threshold) every time, and each
// evaluation then page-faults them back in. Call once, at the start of main, before any thread
// starts (simrun, simview, the benchmarks). Elsewhere than glibc it does nothing.
inline void configure_allocator() {
#if defined(__GLIBC__)
  // Blocks up to 32 MiB (glibc's own ceiling for its dynamic threshold, DEFAULT_MMAP_THRESHOLD_MAX
  // on 64-bit) come from the arenas instead of a fresh mmap each; setting it also turns off the
  // dynamic adjustment. A free top of an arena is returned to the kernel only beyond 128 MiB
  // (default 128 KiB), so one evaluation's memory is reused by the next instead of faulted in.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
}

}  // namespace csim::run
