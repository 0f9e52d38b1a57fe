// StringPool: interned names (docs/program.md, "Names"). A Program keeps the name of each op once,
// in its pool, and every Op holds a NameId, a 32-bit index into it (Tracy's StringIdx, Perfetto's
// string pool): ops are smaller, copying one allocates nothing, two ops of the same name share it,
// and readers compare ids. Names are made at the edge: the lowering interns them as it emits the
// ops, the trace builder and the viewers read them back as string_views.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace csim::core {

// An index into a StringPool; the default, 0, is the empty name.
struct NameId {
  std::uint32_t index = 0;
  friend bool operator==(NameId a, NameId b) { return a.index == b.index; }
  friend bool operator!=(NameId a, NameId b) { return a.index != b.index; }
};

class StringPool;

// A name as an op factory takes it: an interned id, or up to kMaxParts pieces whose concatenation
// is the name ("mb3 " + "h.0.attn.qkv" + ".fwd"). The pieces are borrowed, not copied: a NameRef
// lives no longer than the call it is passed to (a temporary std::string argument lives as long).
class NameRef {
 public:
  static constexpr int kMaxParts = 6;
  NameRef(NameId id) : id_(id), n_(0), interned_(true) {}
  NameRef(const char* s) : NameRef(std::string_view(s)) {}
  NameRef(const std::string& s) : NameRef(std::string_view(s)) {}
  NameRef(std::string_view s) : n_(1) { parts_[0] = s; }
  // The concatenation of `parts` (at most kMaxParts).
  static NameRef cat(std::initializer_list<std::string_view> parts);

  NameId intern(StringPool& pool) const;
  std::string str(const StringPool& pool) const;

 private:
  NameRef() = default;
  std::string_view parts_[kMaxParts];
  NameId id_;
  std::uint8_t n_ = 0;
  bool interned_ = false;
};

class StringPool {
 public:
  StringPool();  // holds "" as NameId{0}

  // The id of `s`, added on first sight; ids are handed out in first-interned order.
  NameId intern(std::string_view s);
  // The id of the parts' concatenation, assembled in a buffer the pool reuses: no std::string is
  // built unless the name is new.
  NameId intern_cat(const std::string_view* parts, std::size_t n);
  NameId intern_cat(std::initializer_list<std::string_view> parts) {
    return intern_cat(parts.begin(), parts.size());
  }
  // Whether `s` was interned; its id in *out when it was.
  bool find(std::string_view s, NameId* out) const;

  // Valid as long as the pool (interning more does not move the strings).
  const std::string& str(NameId id) const { return strings_[id.index]; }
  std::string_view view(NameId id) const { return strings_[id.index]; }
  std::size_t size() const { return strings_.size(); }

 private:
  // Open addressing with linear probing. A slot holds (the name's 32-bit hash << 32) | (id + 1),
  // 0 = empty: a probe reads one slot and compares strings only when the hashes agree, and growing
  // rehashes from the slots alone. One hash, about one cache miss and the string's own allocation
  // per new name (a node-based map cost two more allocations and made lowering GPT-3 175B at batch
  // 1,536, 360,402 distinct names, 1.8x slower than std::string names).
  std::uint64_t* probe(std::string_view s, std::uint32_t h);
  void grow();
  std::deque<std::string> strings_;   // by id; a deque so that str() stays put as names are added
  std::vector<std::uint64_t> slots_;  // size a power of two, at most half full
  std::string scratch_;               // intern_cat's buffer
};

}  // namespace csim::core
