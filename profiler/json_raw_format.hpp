// Formatting primitives of the Chrome-trace writer (its lines: chrome_trace_lines.hpp): each
// writes at P, which has room for what it writes (the caller reserves a bound per line), and
// returns the end. No capacity checks and no std::string on the per-event path.
#pragma once

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "core/units.hpp"

namespace csim::prof {

// Whether JSON escapes no byte of S ('"', '\\', bytes < 0x20): a JSON string of S is S quoted.
constexpr bool json_plain(std::string_view s) {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == '"' || c == '\\') return false;
  }
  return true;
}

// A string known to need no JSON escaping, so that the writer copies it without reading its
// bytes (docs/trace-format.md, "Plain strings"): a literal, checked when it is compiled (a key, a
// category), or a string checked once where it is made and then written many times (an enum's
// spelling, an interned name's pattern). A view: it lives no longer than the text it names.
class PlainStr {
 public:
  constexpr PlainStr() = default;  // ""
  // A literal that needs escaping does not compile (the throw is not a constant expression).
  template <std::size_t N>
  consteval PlainStr(const char (&s)[N]) : s_(s, N - 1) {
    if (!json_plain(s_)) throw "PlainStr: the literal holds a byte that JSON escapes";
  }
  // S, when it is plain.
  static std::optional<PlainStr> checked(std::string_view s) {
    if (!json_plain(s)) return std::nullopt;
    return PlainStr(s, Checked{});
  }
  // S, which the caller has checked: a checked pattern with decimal digits written into it.
  static PlainStr assume_checked(std::string_view s) { return PlainStr(s, Checked{}); }
  std::string_view view() const { return s_; }
  std::size_t size() const { return s_.size(); }

 private:
  struct Checked {};
  constexpr PlainStr(std::string_view s, Checked) : s_(s) {}
  std::string_view s_;
};

// A string and whether it is plain, known where it was made without reading it again (an op's
// name, from its interned pattern's check: backends/common/trace_builder.cpp).
struct FlaggedStr {
  std::string_view s;
  bool plain = false;
};

}  // namespace csim::prof

namespace csim::prof::detail {

template <std::size_t N>
inline char* raw_lit(char* p, const char (&s)[N]) {
  std::memcpy(p, s, N - 1);
  return p + N - 1;
}

// "00" "01" … "99": two decimal digits per lookup.
inline constexpr char kDigitPairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

// Decimal digits of V (1 for 0): from the bit width, log10(2) ~ 1233 / 4096, then one compare
// with the power of ten (the usual digit count without a loop; exact for every uint64).
inline int decimal_digits(std::uint64_t v) {
  static constexpr std::uint64_t kPow10[20] = {1ULL,
                                               10ULL,
                                               100ULL,
                                               1000ULL,
                                               10000ULL,
                                               100000ULL,
                                               1000000ULL,
                                               10000000ULL,
                                               100000000ULL,
                                               1000000000ULL,
                                               10000000000ULL,
                                               100000000000ULL,
                                               1000000000000ULL,
                                               10000000000000ULL,
                                               100000000000000ULL,
                                               1000000000000000ULL,
                                               10000000000000000ULL,
                                               100000000000000000ULL,
                                               1000000000000000000ULL,
                                               10000000000000000000ULL};
  const std::uint64_t w = v | 1;  // 0 has one digit, as 1; the powers of ten above 1 are even
  const int t = (std::bit_width(w) * 1233) >> 12;
  return t - (w < kPow10[t] ? 1 : 0) + 1;
}

// V in decimal, as std::to_chars writes it (tests/test_trace_writer_format.cpp compares them),
// inlined: the digit count first, then two digits per step from the end.
inline char* raw_uint(char* p, std::uint64_t v) {
  char* const end = p + decimal_digits(v);
  char* q = end;
  while (v >= 100) {
    const auto r = static_cast<unsigned>(v % 100);
    v /= 100;
    q -= 2;
    std::memcpy(q, kDigitPairs + 2 * r, 2);
  }
  // The leading one or two digits, at P.
  if (v >= 10) {
    std::memcpy(p, kDigitPairs + 2 * v, 2);
  } else {
    *p = static_cast<char>('0' + v);
  }
  return end;
}

inline char* raw_int(char* p, std::int64_t v) {
  if (v < 0) {
    *p++ = '-';
    return raw_uint(p, 0 - static_cast<std::uint64_t>(v));
  }
  return raw_uint(p, static_cast<std::uint64_t>(v));
}

// Integer ns → µs with exactly three decimals, no floating point: 1234567 → "1234.567",
// -1500 → "-1.500" (docs/trace-format.md, "Timestamps").
inline char* raw_us(char* p, TimeNs ns) {
  const std::uint64_t mag =
      ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  if (ns < 0) *p++ = '-';
  p = raw_uint(p, mag / 1000);
  const auto frac = static_cast<unsigned>(mag % 1000);
  p[0] = '.';
  p[1] = static_cast<char>('0' + frac / 100);
  p[2] = static_cast<char>('0' + frac / 10 % 10);
  p[3] = static_cast<char>('0' + frac % 10);
  return p + 4;
}

// Room raw_string needs for S: quotes, six bytes per byte at worst ("\u001f"), and eight bytes of
// slack for its eight-byte copies.
inline std::size_t raw_string_bound(std::string_view s) {
  return 6 * s.size() + 2 + 8;
}
inline std::size_t raw_string_bound(PlainStr s) {
  return s.size() + 2;
}
inline std::size_t raw_string_bound(FlaggedStr s) {
  return s.plain ? s.s.size() + 2 : raw_string_bound(s.s);
}

// The high bit of each byte of X (eight bytes of a string, read little-endian) that JSON escapes:
// '"', '\\', bytes < 0x20 (bytes >= 0x80 are excluded: they are written as they are). The lowest
// flag is exact (borrows only flag bytes above a flagged one).
inline std::uint64_t escape_flags(std::uint64_t x) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  const std::uint64_t q = x ^ (kOnes * '"'), b = x ^ (kOnes * '\\');
  return (((q - kOnes) & ~q) | ((b - kOnes) & ~b) | ((x - kOnes * 0x20) & ~x)) & kHighs;
}
// How many of the eight bytes at IN (read little-endian) come before the first one JSON escapes:
// 8 when none does.
inline int plain_prefix8(const char* in) {
  std::uint64_t x;
  std::memcpy(&x, in, 8);
  const std::uint64_t m = escape_flags(x);
  return m == 0 ? 8 : std::countr_zero(m) / 8;
}

// S as a JSON string: '"', '\\' and control characters escaped (\", \\, \n, \r, \t, \b, \f, else
// \u00XX); other bytes, UTF-8 included, as they are. Plain runs are copied eight bytes at a time.
inline char* raw_string(char* p, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  constexpr bool kLittleEndian = std::endian::native == std::endian::little;
  *p++ = '"';
  const char* in = s.data();
  const char* const end = in + s.size();
  while (in < end) {
    if (kLittleEndian && end - in >= 8) {
      std::memcpy(p, in, 8);  // copied ahead; only the plain prefix is kept
      const int n = plain_prefix8(in);
      in += n;
      p += n;
      if (n == 8) continue;
    }
    const auto c = static_cast<unsigned char>(*in++);
    if (c >= 0x20 && c != '"' && c != '\\') {
      *p++ = static_cast<char>(c);
      continue;
    }
    *p++ = '\\';
    switch (c) {
      case '"':
        *p++ = '"';
        break;
      case '\\':
        *p++ = '\\';
        break;
      case '\n':
        *p++ = 'n';
        break;
      case '\r':
        *p++ = 'r';
        break;
      case '\t':
        *p++ = 't';
        break;
      case '\b':
        *p++ = 'b';
        break;
      case '\f':
        *p++ = 'f';
        break;
      default:
        p = raw_lit(p, "u00");
        *p++ = kHex[c >> 4];
        *p++ = kHex[c & 15];
    }
  }
  *p++ = '"';
  return p;
}

// S quoted, copied as it is.
inline char* raw_string(char* p, PlainStr s) {
  *p++ = '"';
  std::memcpy(p, s.view().data(), s.size());
  p += s.size();
  *p++ = '"';
  return p;
}

inline char* raw_string(char* p, FlaggedStr s) {
  return s.plain ? raw_string(p, PlainStr::assume_checked(s.s)) : raw_string(p, s.s);
}

inline constexpr std::size_t kRawNumberBound = 40;  // room for raw_double_arg, raw_counter_value

// A double arg: shortest round-trip repr (std::to_chars), always recognisable as a double when
// read back ("2.0", not "2"); non-finite values are not JSON and are written as null.
inline char* raw_double_arg_uncached(char* p, double v) {
  if (!std::isfinite(v)) return raw_lit(p, "null");
  char* const from = p;
  p = std::to_chars(p, p + 32, v).ptr;
  for (const char* c = from; c < p; ++c) {
    if (*c == '.' || *c == 'e' || *c == 'n') return p;
  }
  return raw_lit(p, ".0");
}
// The same text, remembered per thread for the last value of each of 64 slots (by a hash of the
// value's bits): a trace's double args are a kernel's FLOPs, which repeat for every micro-batch
// and rank, and std::to_chars's shortest repr costs about 250 instructions a value. The text is
// at most 26 bytes; a hit copies 32, inside the kRawNumberBound bytes the caller has room for.
inline char* raw_double_arg(char* p, double v) {
  struct Remembered {
    std::uint64_t bits = 0;
    std::uint32_t size = 0;  // 0: empty (every value's text has at least one byte)
    char text[32] = {};
  };
  thread_local Remembered memo[64];
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  Remembered& m = memo[(bits * 0x9E3779B97F4A7C15ULL) >> 58];
  if (m.size != 0 && m.bits == bits) {
    std::memcpy(p, m.text, sizeof m.text);
    return p + m.size;
  }
  char* const end = raw_double_arg_uncached(p, v);
  m.bits = bits;
  m.size = static_cast<std::uint32_t>(end - p);
  std::memcpy(m.text, p, m.size);
  return end;
}

// A counter value: integral values (bytes) below 2^53 print as integers, others as the shortest
// round-trip repr; readers take every counter value as a double.
inline char* raw_counter_value(char* p, double v) {
  if (!std::isfinite(v)) return raw_lit(p, "null");
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    return raw_int(p, static_cast<std::int64_t>(v));
  }
  return std::to_chars(p, p + 32, v).ptr;
}

// [SECTION] Counting: a line's length without its bytes (the first build of a streamed
// FormattedTrace, docs/trace-format.md "Streaming the text"). Each raw_* above has a twin taking a
// Count that adds the bytes it would write, so that a line's functions (chrome_trace_lines.hpp),
// templates on where they write, count with the same code they format with.
struct Count {
  std::size_t n = 0;
};

template <std::size_t N>
inline Count raw_lit(Count c, const char (&)[N]) {
  c.n += N - 1;
  return c;
}
inline Count raw_uint(Count c, std::uint64_t v) {
  c.n += static_cast<std::size_t>(decimal_digits(v));
  return c;
}
inline Count raw_int(Count c, std::int64_t v) {
  if (v < 0) {
    ++c.n;
    return raw_uint(c, 0 - static_cast<std::uint64_t>(v));
  }
  return raw_uint(c, static_cast<std::uint64_t>(v));
}
inline Count raw_us(Count c, TimeNs ns) {
  const std::uint64_t mag =
      ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  c.n += (ns < 0 ? 1 : 0) + 4;
  return raw_uint(c, mag / 1000);
}
// As raw_string: plain runs skipped eight bytes at a time, each escaped byte 2 bytes (\", \\, \n,
// \r, \t, \b, \f) or 6 (\u00XX).
inline Count raw_string(Count c, std::string_view s) {
  constexpr bool kLittleEndian = std::endian::native == std::endian::little;
  c.n += 2 + s.size();
  const char* in = s.data();
  const char* const end = in + s.size();
  while (in < end) {
    if (kLittleEndian && end - in >= 8) {
      const int n = plain_prefix8(in);
      in += n;
      if (n == 8) continue;
    }
    const auto ch = static_cast<unsigned char>(*in++);
    if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
    const bool short_escape = ch == '"' || ch == '\\' || ch == '\n' || ch == '\r' || ch == '\t' ||
                              ch == '\b' || ch == '\f';
    c.n += short_escape ? 1 : 5;
  }
  return c;
}
inline Count raw_string(Count c, PlainStr s) {
  c.n += 2 + s.size();
  return c;
}
inline Count raw_string(Count c, FlaggedStr s) {
  return s.plain ? raw_string(c, PlainStr::assume_checked(s.s)) : raw_string(c, s.s);
}
inline Count raw_double_arg(Count c, double v) {
  char b[kRawNumberBound];
  c.n += static_cast<std::size_t>(raw_double_arg(b, v) - b);
  return c;
}

}  // namespace csim::prof::detail
