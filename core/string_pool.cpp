// docs/program.md, "Names".
#include "core/string_pool.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace csim::core {

StringPool::StringPool() {
  intern(std::string_view());
}

NameId StringPool::intern(std::string_view s) {
  if (auto it = index_.find(s); it != index_.end()) return NameId{it->second};
  CSIM_ASSERT_MSG(strings_.size() < UINT32_MAX, "more names than a NameId holds");
  // Grow the index 8x at a time, not 2x: a Program can hold hundreds of thousands of names
  // (GPT-3 175B 3D, batch 1,536: 360,402), and each rehash relinks every node (measured there:
  // lowering 630 -> 400 ms CPU). At most 8 bucket pointers per name.
  if (index_.size() + 1 > index_.bucket_count())
    index_.reserve(std::max<std::size_t>(256, 8 * index_.size()));
  const auto id = static_cast<std::uint32_t>(strings_.size());
  strings_.emplace_back(s);
  index_.emplace(strings_.back(), id);
  return NameId{id};
}

NameId StringPool::intern_cat(const std::string_view* parts, std::size_t n) {
  scratch_.clear();
  for (std::size_t i = 0; i < n; ++i) scratch_.append(parts[i]);
  return intern(std::string_view(scratch_));
}

bool StringPool::find(std::string_view s, NameId* out) const {
  const auto it = index_.find(s);
  if (it == index_.end()) return false;
  *out = NameId{it->second};
  return true;
}

NameRef NameRef::cat(std::initializer_list<std::string_view> parts) {
  CSIM_ASSERT_MSG(parts.size() <= kMaxParts, "a NameRef holds at most kMaxParts pieces");
  NameRef r;
  for (std::string_view p : parts) r.parts_[r.n_++] = p;
  return r;
}

NameId NameRef::intern(StringPool& pool) const {
  if (interned_) return id_;
  return n_ == 1 ? pool.intern(parts_[0]) : pool.intern_cat(parts_, n_);
}

std::string NameRef::str(const StringPool& pool) const {
  if (interned_) return pool.str(id_);
  std::string s;
  for (int i = 0; i < n_; ++i) s.append(parts_[i]);
  return s;
}

}  // namespace csim::core
