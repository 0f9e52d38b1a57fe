// Transparent huge pages for a large vector's fresh storage (docs/trace-format.md, "Reading" and
// "Building speed"): the reader's and build_trace's event vectors are reserved once, a few hundred
// MiB for a 1 M-event trace, and with 4 KiB pages their first-touch page faults are a large part
// of the cost (about 4 µs each on our shared virtual machine).
#pragma once

#include <sys/mman.h>

#include <cstdint>
#include <vector>

namespace csim::prof {

// Asks for transparent huge pages on the storage V has reserved and not yet touched, when it is
// large. Where the kernel offers huge pages only on request (transparent_hugepage "madvise"), this
// request is what gets them; with "always" or "never" it changes nothing. Only whole 2 MiB pages
// inside the storage are advised; the contents are never affected.
template <typename T>
void advise_huge_pages(const std::vector<T>& v) {
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const std::size_t bytes = v.capacity() * sizeof(T);
  if (bytes < 4 * kHuge) return;
  const auto at = reinterpret_cast<std::uintptr_t>(v.data());
  const std::uintptr_t from = (at + kHuge - 1) & ~(kHuge - 1), to = (at + bytes) & ~(kHuge - 1);
  if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_HUGEPAGE);
}

}  // namespace csim::prof
