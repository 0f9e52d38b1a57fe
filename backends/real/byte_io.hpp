// Fixed-layout byte writing and bounds-checked reading for what the launcher hands its exec'd
// ranks (program_codec.hpp, rank_job.hpp): scalars in native byte order, strings and vectors
// as a 64-bit count then their elements.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace csim::real {

class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>);
    out_->append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void put_str(std::string_view s) {
    put<std::uint64_t>(s.size());
    out_->append(s.data(), s.size());
  }
  template <typename T>
  void put_vec(const std::vector<T>& v) {
    put<std::uint64_t>(v.size());
    for (const T& x : v) put(x);
  }

 private:
  std::string* out_;
};

// Every read checks the bytes left; after the first failure ok() is false and reads return
// zeros, so a decoder reads on and checks once.
class ByteReader {
 public:
  ByteReader(std::string_view bytes, std::size_t offset) : b_(bytes), at_(offset) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T> && !std::is_pointer_v<T>);
    T v{};
    if (!ok_ || b_.size() - at_ < sizeof v) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, b_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  // A count of elements of `elem_bytes` each, refused when more than the bytes left could hold
  // (a corrupt count must not allocate gigabytes).
  std::size_t get_count(std::size_t elem_bytes) {
    const std::uint64_t n = get<std::uint64_t>();
    if (!ok_ || (elem_bytes > 0 && n > (b_.size() - at_) / elem_bytes)) {
      ok_ = false;
      return 0;
    }
    return static_cast<std::size_t>(n);
  }
  std::string get_str() {
    const std::size_t n = get_count(1);
    if (!ok_) return {};
    std::string s(b_.substr(at_, n));
    at_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> get_vec() {
    std::vector<T> v(get_count(sizeof(T)));
    for (T& x : v) x = get<T>();
    return v;
  }
  bool ok() const { return ok_; }
  void fail() { ok_ = false; }
  std::size_t offset() const { return at_; }

 private:
  std::string_view b_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace csim::real
