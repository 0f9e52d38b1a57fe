// The reader's fast path for one traceEvents element (docs/trace-format.md, "Reading"): the
// records our writer and Kineto write are flat objects of strings and numbers, which are read
// here straight from the input bytes into a Record, without building simdjson's DOM. Anything
// outside that subset returns nullptr and is read through simdjson instead, so that what is
// accepted, the values read and the errors stay those of the DOM path:
//  - strings: no backslash, no control character; non-ASCII bytes are checked as UTF-8 by
//    simdjson's validator (as its parser does);
//  - numbers: JSON's grammar without exponents, at most 18 digits; "-0" goes to simdjson (which
//    reads it as a double); integers are int64, others doubles through std::from_chars (correctly
//    rounded, like simdjson's parser); µs with three decimals ("1234.567", our writer's form) are
//    read as exact ns, which equals llround(double * 1000) below 2^50 ns;
//  - top-level values of other types (arrays, objects, escapes) go to simdjson, except that the
//    keys the reader ignores may hold true, false or null.
#include <simdjson.h>
#include <bit>
#include <charconv>

#include "profiler/chrome_trace_record.hpp"

namespace csim::prof::detail {
namespace {

// Whitespace is ' ', '\n', '\r', '\t', all <= ' '. No whitespace or one space (our writer's
// ": " and ", ") are settled first.
inline bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}
inline const char* skip_ws(const char* p, const char* end) {
  if (p<end&& static_cast<unsigned char>(*p)> ' ') return p;
  if (end - p >= 2 && *p == ' ' && static_cast<unsigned char>(p[1]) > ' ') return p + 1;
  while (p < end && is_ws(*p)) ++p;
  return p;
}

// Bytes of X that end a plain run of string bytes: '"', '\\', control characters (< 0x20) and
// non-ASCII bytes (>= 0x80), each flagged by its high bit. Borrows can flag bytes above a flagged
// one, never below, so the lowest flag is exact.
inline std::uint64_t special_bytes(std::uint64_t x) {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  const std::uint64_t quote = x ^ (kOnes * '"'), backslash = x ^ (kOnes * '\\');
  const std::uint64_t zero_q = (quote - kOnes) & ~quote;
  const std::uint64_t zero_b = (backslash - kOnes) & ~backslash;
  const std::uint64_t control = x - kOnes * 0x20;
  return (zero_q | zero_b | (control & ~x) | x) & kHighs;
}

constexpr bool kLittleEndian = std::endian::native == std::endian::little;  // SWAR byte order

// P is just after an opening quote. Returns the byte after the closing quote, nullptr when the
// string is not in the fast subset. Eight bytes at a time while they are plain.
inline const char* read_string(const char* p, const char* end, std::string_view* out) {
  const char* const s = p;
  bool high = false;
  while (p < end) {
    if (kLittleEndian && !high && end - p >= 8) {
      std::uint64_t x;
      std::memcpy(&x, p, 8);
      const std::uint64_t m = special_bytes(x);
      if (m == 0) {
        p += 8;
        continue;
      }
      const int bit = std::countr_zero(m) & ~7;  // the special byte, taken from X (no reload)
      p += bit / 8;
      if (static_cast<unsigned char>(x >> bit) == '"') {
        *out = std::string_view(s, static_cast<std::size_t>(p - s));
        return p + 1;
      }
    }
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"') {
      if (high && !simdjson::validate_utf8(s, static_cast<std::size_t>(p - s))) return nullptr;
      *out = std::string_view(s, static_cast<std::size_t>(p - s));
      return p + 1;
    }
    if (c < 0x20 || c == '\\') return nullptr;
    high |= c >= 0x80;
    ++p;
  }
  return nullptr;
}

struct Number {
  bool integer = true;  // no fraction
  std::int64_t i = 0;   // integer: the value
  bool ns_exact = false;
  TimeNs ns = 0;                              // µs with 0 or 3 decimals: the value in ns
  const char *from = nullptr, *to = nullptr;  // the literal
};

inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

inline bool is_delimiter(char c) {
  return c == ',' || c == '}' || c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// A number literal at P ('-' or a digit), ending at a delimiter (whitespace, ',' or '}'). nullptr
// when it is not in the fast subset.
inline const char* read_number(const char* p, const char* end, Number* n) {
  n->from = p;
  const bool neg = *p == '-';
  p += neg ? 1 : 0;
  const char* const int_from = p;
  std::uint64_t mant = 0;
  while (p < end && is_digit(*p)) mant = mant * 10 + static_cast<unsigned>(*p++ - '0');
  const auto int_digits = p - int_from;
  if (int_digits == 0 || (int_digits > 1 && *int_from == '0')) return nullptr;  // JSON: no "01"
  std::ptrdiff_t frac = 0;
  if (p < end && *p == '.') {
    const char* const frac_from = ++p;
    while (p < end && is_digit(*p)) mant = mant * 10 + static_cast<unsigned>(*p++ - '0');
    frac = p - frac_from;
    if (frac == 0) return nullptr;
  }
  if (p >= end || int_digits + frac > 18 || !is_delimiter(*p)) return nullptr;
  if (neg && mant == 0) return nullptr;  // "-0", "-0.000": simdjson's doubles
  n->to = p;
  const auto v = static_cast<std::int64_t>(mant);
  n->integer = frac == 0;
  n->i = neg ? -v : v;
  constexpr std::int64_t kExactNs = std::int64_t{1} << 50;
  n->ns_exact = (frac == 3 && v < kExactNs) || (frac == 0 && v < kExactNs / 1000);
  // Only an exact value is scaled: a larger integer (an arg such as a byte count) would overflow.
  n->ns = !n->ns_exact ? 0 : frac == 3 ? n->i : n->i * 1000;
  return p;
}

inline bool to_double(const Number& n, double* d) {
  return std::from_chars(n.from, n.to, *d).ec == std::errc();
}

// The "ts" / "dur" field, as read_time_field in the reader.
inline void time_field(const Number& n, bool* has, bool* bad, TimeNs* out) {
  *has = true;
  if (n.ns_exact) {
    *out = n.ns;
    return;
  }
  double d = 0;
  if (!to_double(n, &d) || !us_to_ns_checked(d, out)) *bad = true;
}

// true, false, null at P: 1, 0, -1 in *V; nullptr otherwise.
inline const char* read_literal(const char* p, const char* end, int* v) {
  const auto is = [&](const char* lit, std::size_t n) {
    return static_cast<std::size_t>(end - p) > n && std::memcmp(p, lit, n) == 0;
  };
  const char* q = nullptr;
  if (is("true", 4)) {
    *v = 1;
    q = p + 4;
  } else if (is("false", 5)) {
    *v = 0;
    q = p + 5;
  } else if (is("null", 4)) {
    *v = -1;
    q = p + 4;
  } else {
    return nullptr;
  }
  const char c = *q;  // in range: is() checked one byte more than the literal
  if (c != ',' && c != '}' && c != ' ' && c != '\n' && c != '\r' && c != '\t') return nullptr;
  return q;
}

// "args": {…} at P ('{'), as read_args in the reader.
const char* read_args(const char* p, const char* end, Record& rec) {
  p = skip_ws(p + 1, end);
  if (p < end && *p == '}') return p + 1;
  for (;;) {
    if (p >= end || *p != '"') return nullptr;
    // Built in place (no temporary RawArg to move and destroy); a null one is dropped again.
    RawArg& a = rec.args.emplace_back();
    p = read_string(p + 1, end, &a.key);
    if (p == nullptr) return nullptr;
    p = skip_ws(p, end);
    if (p >= end || *p != ':') return nullptr;
    p = skip_ws(p + 1, end);
    if (p >= end) return nullptr;
    bool keep = true;
    if (*p == '"') {
      a.kind = RawArg::Kind::kString;
      p = read_string(p + 1, end, &a.s);
    } else if (*p == '-' || is_digit(*p)) {
      Number n;
      p = read_number(p, end, &n);
      if (p == nullptr) return nullptr;
      if (n.integer) {
        a.kind = RawArg::Kind::kInt;
        a.i = n.i;
      } else {
        a.kind = RawArg::Kind::kDouble;
        if (!to_double(n, &a.d)) return nullptr;
      }
    } else {
      int v = 0;
      p = read_literal(p, end, &v);
      keep = v >= 0;  // null args carry nothing
      a.kind = RawArg::Kind::kInt;
      a.i = v;
    }
    if (p == nullptr) return nullptr;
    if (!keep) rec.args.pop_back();
    if (end - p >= 3 && p[0] == ',' && p[1] == ' ' && p[2] == '"') {  // our writer's ", "
      p += 2;
      continue;
    }
    p = skip_ws(p, end);
    if (p >= end) return nullptr;
    if (*p == '}') return p + 1;
    if (*p != ',') return nullptr;
    p = skip_ws(p + 1, end);
  }
}

}  // namespace

namespace {

enum class Field : std::uint8_t {
  kPh,
  kCat,
  kName,
  kPid,
  kTid,
  kTs,
  kDur,
  kArgs,
  kId,
  kBp,
  kOther
};

Field field_of(std::string_view key) {
  switch (key.size()) {
    case 2:
      if (key_is(key, "ph")) return Field::kPh;
      if (key_is(key, "ts")) return Field::kTs;
      if (key_is(key, "id")) return Field::kId;
      if (key_is(key, "bp")) return Field::kBp;
      break;
    case 3:
      if (key_is(key, "pid")) return Field::kPid;
      if (key_is(key, "tid")) return Field::kTid;
      if (key_is(key, "cat")) return Field::kCat;
      if (key_is(key, "dur")) return Field::kDur;
      break;
    case 4:
      if (key_is(key, "name")) return Field::kName;
      if (key_is(key, "args")) return Field::kArgs;
      break;
    default:
      break;
  }
  return Field::kOther;
}

// The known keys as our writer and Kineto write them, quote to the space after the colon
// ("\"ph\": "), as the first bytes of an eight-byte load: a key is then one compare, with the
// literal chosen by the key's first two letters (one jump, whatever order the keys come in).
struct KeyLiteral {
  std::uint64_t bytes, mask;
  int length;
  Field field;
};
constexpr KeyLiteral key_literal(const char* text, Field f) {
  std::uint64_t v = 0;
  int n = 0;
  for (; text[n] != 0; ++n)
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(text[n])) << (8 * n);
  return {v, n == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * n)) - 1, n, f};
}
constexpr KeyLiteral kKeyLiterals[] = {
    key_literal("\"ph\": ", Field::kPh),     key_literal("\"cat\": ", Field::kCat),
    key_literal("\"name\": ", Field::kName), key_literal("\"pid\": ", Field::kPid),
    key_literal("\"tid\": ", Field::kTid),   key_literal("\"ts\": ", Field::kTs),
    key_literal("\"dur\": ", Field::kDur),   key_literal("\"args\": ", Field::kArgs),
    key_literal("\"id\": ", Field::kId),     key_literal("\"bp\": ", Field::kBp),
};
// read_key picks a literal by its index here.
static_assert(sizeof kKeyLiterals / sizeof kKeyLiterals[0] == 10 &&
              kKeyLiterals[0].field == Field::kPh && kKeyLiterals[1].field == Field::kCat &&
              kKeyLiterals[2].field == Field::kName && kKeyLiterals[3].field == Field::kPid &&
              kKeyLiterals[4].field == Field::kTid && kKeyLiterals[5].field == Field::kTs &&
              kKeyLiterals[6].field == Field::kDur && kKeyLiterals[7].field == Field::kArgs &&
              kKeyLiterals[8].field == Field::kId && kKeyLiterals[9].field == Field::kBp);

// P at a key's opening quote: the key's field, and P moved to its value. nullptr when the key is
// not a plain string followed by ':'.
inline const char* read_key(const char* p, const char* end, Field* field) {
  if (kLittleEndian && end - p >= 8) {
    int k = -1;  // index in kKeyLiterals of the only known key that starts with these letters
    switch (p[1]) {
      case 'p':
        k = p[2] == 'h' ? 0 : 3;
        break;
      case 'c':
        k = 1;
        break;
      case 'n':
        k = 2;
        break;
      case 't':
        k = p[2] == 'i' ? 4 : 5;
        break;
      case 'd':
        k = 6;
        break;
      case 'a':
        k = 7;
        break;
      case 'i':
        k = 8;
        break;
      case 'b':
        k = 9;
        break;
      default:
        break;
    }
    if (k >= 0) {
      std::uint64_t x;
      std::memcpy(&x, p, 8);
      const KeyLiteral& lit = kKeyLiterals[k];
      if ((x & lit.mask) == lit.bytes) {
        *field = lit.field;
        return skip_ws(p + lit.length, end);
      }
    }
  }
  std::string_view key;
  p = read_string(p + 1, end, &key);
  if (p == nullptr) return nullptr;
  p = skip_ws(p, end);
  if (p >= end || *p != ':') return nullptr;
  *field = field_of(key);
  return skip_ws(p + 1, end);
}

}  // namespace

const char* parse_record_fast(const char* p, const char* end, Record& rec) {
  if (p >= end || *p != '{') return nullptr;
  rec.clear();
  p = skip_ws(p + 1, end);
  if (p < end && *p == '}') return p + 1;
  for (;;) {
    if (p >= end || *p != '"') return nullptr;
    Field field = Field::kOther;
    p = read_key(p, end, &field);
    if (p == nullptr || p >= end) return nullptr;
    const char c = *p;
    switch (field) {
      case Field::kPh:
      case Field::kCat:
      case Field::kName:
      case Field::kBp: {
        if (c != '"') return nullptr;  // a string field of another type: the DOM path's business
        std::string_view v;
        p = read_string(p + 1, end, &v);
        if (p == nullptr) return nullptr;
        (field == Field::kPh     ? rec.ph
         : field == Field::kCat  ? rec.cat
         : field == Field::kName ? rec.name
                                 : rec.bp) = v;
        break;
      }
      case Field::kPid:
      case Field::kTid:
      case Field::kId:
      case Field::kTs:
      case Field::kDur: {
        if (c != '-' && !is_digit(c)) return nullptr;  // a string pid ("Spans"), a string time
        Number n;
        p = read_number(p, end, &n);
        if (p == nullptr) return nullptr;
        if (field == Field::kTs) {
          time_field(n, &rec.has_ts, &rec.bad_time, &rec.ts_rel_ns);
        } else if (field == Field::kDur) {
          time_field(n, &rec.has_dur, &rec.bad_time, &rec.dur_ns);
        } else if (!n.integer) {
          return nullptr;  // a fractional pid or id: the DOM path's business
        } else if (field == Field::kPid) {
          rec.has_pid = true;
          rec.pid = n.i;
        } else if (field == Field::kTid) {
          rec.has_tid = true;
          rec.tid = n.i;
        } else {
          rec.has_id = true;
          rec.id = n.i;
        }
        break;
      }
      case Field::kArgs:
        if (c != '{') return nullptr;
        p = read_args(p, end, rec);
        if (p == nullptr) return nullptr;
        break;
      case Field::kOther: {  // a key the reader does not use: its value is checked and dropped
        if (c == '"') {
          std::string_view v;
          p = read_string(p + 1, end, &v);
        } else if (c == '-' || is_digit(c)) {
          Number n;
          p = read_number(p, end, &n);
        } else {
          int v = 0;
          p = read_literal(p, end, &v);
        }
        if (p == nullptr) return nullptr;
        break;
      }
    }
    if (end - p >= 3 && p[0] == ',' && p[1] == ' ' && p[2] == '"') {  // our writer's ", "
      p += 2;
      continue;
    }
    p = skip_ws(p, end);
    if (p >= end) return nullptr;
    if (*p == '}') return p + 1;
    if (*p != ',') return nullptr;
    p = skip_ws(p + 1, end);
  }
}

}  // namespace csim::prof::detail
