// docs/program.md, "Names".
#include "core/program/string_pool.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace csim::core {

namespace {
std::uint32_t hash32(std::string_view s) {
  const std::size_t h = std::hash<std::string_view>{}(s);
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}
constexpr std::uint32_t id_of(std::uint64_t slot) {
  return static_cast<std::uint32_t>(slot) - 1;
}
constexpr std::uint32_t hash_of(std::uint64_t slot) {
  return static_cast<std::uint32_t>(slot >> 32);
}
constexpr std::uint32_t kNoField = UINT32_MAX;
}  // namespace

StringPool::StringPool() : slots_(256, 0) {
  intern(std::string_view());
}

std::uint64_t* StringPool::probe(std::string_view s, std::uint32_t h) {
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    std::uint64_t& slot = slots_[i];
    if (slot == 0 || (hash_of(slot) == h && strings_[id_of(slot)] == s)) return &slot;
  }
}

void StringPool::grow() {
  std::vector<std::uint64_t> bigger(slots_.size() * 2, 0);
  const std::size_t mask = bigger.size() - 1;
  for (const std::uint64_t slot : slots_) {
    if (slot == 0) continue;
    std::size_t i = hash_of(slot) & mask;
    while (bigger[i] != 0) i = (i + 1) & mask;
    bigger[i] = slot;
  }
  slots_ = std::move(bigger);
}

NameId StringPool::intern(std::string_view s, std::int32_t field) {
  const std::uint32_t h = hash32(s);
  std::uint64_t* slot = probe(s, h);
  std::uint32_t id;
  if (*slot != 0) {
    id = id_of(*slot);
  } else {
    CSIM_ASSERT_MSG(strings_.size() < UINT32_MAX - 1, "more names than a NameId holds");
    if (2 * (strings_.size() + 1) > slots_.size()) {
      grow();
      slot = probe(s, h);
    }
    id = static_cast<std::uint32_t>(strings_.size());
    strings_.emplace_back(s);
    const std::size_t at = s.find(kNameField);
    field_at_.push_back(at == std::string_view::npos ? kNoField : static_cast<std::uint32_t>(at));
    *slot = (static_cast<std::uint64_t>(h) << 32) | (id + 1);
  }
  // A field only where the pattern has its byte: the text of an id is then always its pattern's.
  const bool has_field = field >= 0 && field_at_[id] != kNoField;
  return NameId{id, has_field ? field : -1};
}

NameId StringPool::intern_cat(const std::string_view* parts, std::size_t n, std::int32_t field) {
  scratch_.clear();
  for (std::size_t i = 0; i < n; ++i) scratch_.append(parts[i]);
  return intern(std::string_view(scratch_), field);
}

void StringPool::append(NameId id, std::string& out) const {
  const std::string& pat = strings_[id.index];
  const std::uint32_t at = field_at_[id.index];
  if (id.field < 0 || at == kNoField) {
    out.append(pat);
    return;
  }
  // The pattern with its kNameField byte replaced by the field in decimal.
  char digits[12];
  int n = 0;
  std::uint32_t v = static_cast<std::uint32_t>(id.field);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  out.append(pat, 0, at);
  while (n > 0) out.push_back(digits[--n]);
  out.append(pat, at + 1, std::string::npos);
}

std::string StringPool::str(NameId id) const {
  std::string s;
  append(id, s);
  return s;
}

bool StringPool::find(std::string_view s, NameId* out) const {
  const std::uint32_t h = hash32(s);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = h & mask;; i = (i + 1) & mask) {
    const std::uint64_t slot = slots_[i];
    if (slot == 0) return false;
    if (hash_of(slot) == h && strings_[id_of(slot)] == s) {
      *out = NameId{id_of(slot), -1};
      return true;
    }
  }
}

NameRef NameRef::cat(std::initializer_list<std::string_view> parts, std::int32_t field) {
  CSIM_ASSERT_MSG(parts.size() <= kMaxParts, "a NameRef holds at most kMaxParts pieces");
  NameRef r;
  r.field_ = field;
  for (std::string_view p : parts) r.parts_[r.n_++] = p;
  return r;
}

NameId NameRef::intern(StringPool& pool) const {
  if (interned_) return id_;
  return n_ == 1 ? pool.intern(parts_[0], field_) : pool.intern_cat(parts_, n_, field_);
}

std::string NameRef::str(const StringPool& pool) const {
  if (interned_) return pool.str(id_);
  std::string s;
  for (int i = 0; i < n_; ++i) s.append(parts_[i]);
  const std::size_t at = s.find(kNameField);
  if (field_ >= 0 && at != std::string::npos) s.replace(at, 1, std::to_string(field_));
  return s;
}

}  // namespace csim::core
