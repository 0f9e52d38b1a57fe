// One traceEvents element as the Chrome-trace reader sees it (internal to the reader:
// chrome_trace_reader.cpp fills it from simdjson's DOM, chrome_trace_fast_record.cpp straight from
// the bytes for the common records). Not part of the profiler's API.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "core/units.hpp"

namespace csim::prof::detail {

// KEY == LIT, comparing a constant number of bytes (inlined, unlike string_view's operator==).
template <std::size_t N>
inline bool key_is(std::string_view key, const char (&lit)[N]) {
  return key.size() == N - 1 && std::memcmp(key.data(), lit, N - 1) == 0;
}

// A JSON number of µs → integer ns. Our writer prints k/1000 exactly ("1234.567"); the nearest
// double times 1000, rounded, gives k back exactly while |k| < 2^51 ns (26 days from the base).
// Kineto's absolute 16-digit timestamps may come out 1 ns off, below their own resolution.
inline bool us_to_ns_checked(double us, TimeNs* out) {
  if (!std::isfinite(us) || std::fabs(us) > 9.0e15) return false;
  *out = static_cast<TimeNs>(std::llround(us * 1000.0));
  return true;
}

struct RawArg {
  enum class Kind : std::uint8_t { kInt, kDouble, kString, kRaw };
  std::string_view key;
  Kind kind = Kind::kInt;
  std::int64_t i = 0;
  double d = 0;
  std::string_view s;  // kString: unescaped (in the DOM parser's buffer or the input)
  std::string raw;     // kRaw: minified JSON of an array / object
};

// One traceEvents element. string_views point into the DOM parser's buffers (or the reader's
// input window), valid until the next batch is parsed; everything kept is copied out before that.
struct Record {
  std::string_view ph, cat, name, bp;
  bool has_pid = false, has_tid = false, has_ts = false, has_dur = false, has_id = false;
  bool pid_not_int = false, tid_not_int = false, bad_time = false, bad_id = false;
  std::int64_t pid = 0, tid = 0, id = 0;
  TimeNs ts_rel_ns = 0, dur_ns = 0;
  std::vector<RawArg> args;

  void clear() {
    ph = cat = name = bp = {};
    has_pid = has_tid = has_ts = has_dur = has_id = false;
    pid_not_int = tid_not_int = bad_time = bad_id = false;
    pid = tid = id = 0;
    ts_rel_ns = dur_ns = 0;
    args.clear();
  }

  const RawArg* arg(std::string_view k) const {
    for (const RawArg& a : args) {
      if (a.key == k) return &a;
    }
    return nullptr;
  }
};

// Parses the traceEvents element starting at P (its '{') when it lies in the subset that our
// writer and Kineto write: an object whose keys are plain strings, with string and number values,
// "args" an object of string, number, true, false and null values. Returns the byte after the
// closing '}', with REC filled exactly as the DOM path would fill it; nullptr when the element is
// anything else (escapes, arrays, exponents, 19-digit numbers, a value past END, invalid JSON),
// which the caller then reads through simdjson. Never reads at or past END.
const char* parse_record_fast(const char* p, const char* end, Record& rec);

}  // namespace csim::prof::detail
