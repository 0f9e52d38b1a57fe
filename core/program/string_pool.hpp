// StringPool: interned names (docs/program.md, "Names"). A Program keeps the name of each op once,
// in its pool, and every Op holds a NameId, a 32-bit index into it (Tracy's StringIdx, Perfetto's
// string pool): ops are smaller, copying one allocates nothing, two ops of the same name share it,
// and readers compare ids. Names are made at the edge: the lowering interns them as it emits the
// ops, the trace builder and the viewers format them back into text (StringPool::append).
//
// A structured name is a pattern holding one kNameField byte plus an integer kept beside the id
// (NameId::field): "mb\x1f h.5.attn.qkv.fwd" with field 37 reads "mb37 h.5.attn.qkv.fwd". The pool
// then holds a 3D Program's patterns (per layer and pass), not one string per micro-batch.
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

// The byte of a pattern that its name's field replaces (in decimal); no name a scenario or a
// lowering spells contains it (an ASCII control character, the "unit separator").
inline constexpr char kNameField = '\x1f';

// An index into a StringPool, and the field its pattern's kNameField stands for (-1: a plain name,
// whose pattern is its text). The default, index 0, is the empty name. Two ids are equal when both
// the pattern and the field are: one text spelled once as a pattern and once plainly would be two
// ids (the lowering spells every name one way).
struct NameId {
  std::uint32_t index = 0;
  std::int32_t field = -1;
  friend bool operator==(NameId a, NameId b) { return a.index == b.index && a.field == b.field; }
  friend bool operator!=(NameId a, NameId b) { return !(a == b); }
};

class StringPool;

// A name as an op factory takes it: an interned id, or up to kMaxParts pieces whose concatenation
// is the name ("mb3 " + "h.0.attn.qkv" + ".fwd") or, with a field, the pattern ("mb\x1f " +
// "h.0.attn.qkv" + ".fwd", field 3). The pieces are borrowed, not copied: a NameRef lives no
// longer than the call it is passed to (a temporary std::string argument lives as long).
class NameRef {
 public:
  static constexpr int kMaxParts = 6;
  NameRef(NameId id) : id_(id), n_(0), interned_(true) {}
  NameRef(const char* s) : NameRef(std::string_view(s)) {}
  NameRef(const std::string& s) : NameRef(std::string_view(s)) {}
  NameRef(std::string_view s) : n_(1) { parts_[0] = s; }
  // The concatenation of `parts` (at most kMaxParts); with field >= 0 a pattern whose kNameField
  // (if any) reads as `field`.
  static NameRef cat(std::initializer_list<std::string_view> parts, std::int32_t field = -1);

  NameId intern(StringPool& pool) const;
  std::string str(const StringPool& pool) const;

 private:
  NameRef() = default;
  std::string_view parts_[kMaxParts];
  NameId id_;
  std::int32_t field_ = -1;
  std::uint8_t n_ = 0;
  bool interned_ = false;
};

class StringPool {
 public:
  StringPool();  // holds "" as NameId{0}

  // The id of `s`, added on first sight; ids are handed out in first-interned order. With
  // field >= 0 and a kNameField in `s`, `s` is a pattern and the id carries the field; otherwise
  // the field is dropped (-1), so a name without the byte is always plain.
  NameId intern(std::string_view s, std::int32_t field = -1);
  // The id of the parts' concatenation, assembled in a buffer the pool reuses: no std::string is
  // built unless the pattern is new.
  NameId intern_cat(const std::string_view* parts, std::size_t n, std::int32_t field = -1);
  NameId intern_cat(std::initializer_list<std::string_view> parts, std::int32_t field = -1) {
    return intern_cat(parts.begin(), parts.size(), field);
  }
  // Whether the plain name `s` was interned; its id in *out when it was.
  bool find(std::string_view s, NameId* out) const;

  // The name's text: its pattern with the field written in place of kNameField.
  std::string str(NameId id) const;
  // Appends the name's text to `out` (no allocation beyond out's growth): the one way the text
  // is read, which str() and Program::name_of use.
  void append(NameId id, std::string& out) const;
  // The pattern (a plain name's text). Valid as long as the pool: interning more does not move
  // the strings.
  std::string_view pattern(NameId id) const { return strings_[id.index]; }
  // Distinct patterns (and plain names) held, "" included.
  std::size_t size() const { return strings_.size(); }

 private:
  // Open addressing with linear probing. A slot holds (the name's 32-bit hash << 32) | (id + 1),
  // 0 = empty: a probe reads one slot and compares strings only when the hashes agree, and growing
  // rehashes from the slots alone. One hash, about one cache miss and the string's own allocation
  // per new name (a node-based map cost two more allocations and made lowering GPT-3 175B at batch
  // 1,536, 360,402 distinct names, 1.8x slower than std::string names).
  std::uint64_t* probe(std::string_view s, std::uint32_t h);
  void grow();
  std::deque<std::string>
      strings_;  // by id; a deque so that pattern() stays put as names are added
  std::vector<std::uint32_t> field_at_;  // by id: where kNameField is in the pattern, or npos32
  std::vector<std::uint64_t> slots_;     // size a power of two, at most half full
  std::string scratch_;                  // intern_cat's buffer
};

}  // namespace csim::core
