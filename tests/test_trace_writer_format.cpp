// The writer's in-place formatting (profiler/json_raw_format.hpp) against the rules of
// docs/trace-format.md, byte by byte: strings escape '"', '\\' and control characters and keep
// every other byte (UTF-8 included); µs are ns / 1000 with exactly three decimals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "profiler/json_raw_format.hpp"

using namespace csim::prof::detail;

namespace {

// The rule, one byte at a time.
std::string reference_string(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string formatted(const std::string& s) {
  std::string buf(raw_string_bound(s), '\0');
  char* end = raw_string(buf.data(), s);
  buf.resize(static_cast<std::size_t>(end - buf.data()));
  return buf;
}

}  // namespace

TEST_CASE("in-place string escaping matches the byte-by-byte rule", "[trace]") {
  for (const std::string& s :
       {std::string(), std::string("kernel"),
        std::string("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
        std::string("a\"b\\c\nd\re\tf\bg\fh"), std::string("\x01\x1f\x7f µs naïve ∑ \xff"),
        std::string("12345678\"12345678\\"), std::string(17, '\x1f')}) {
    INFO(s);
    CHECK(formatted(s) == reference_string(s));
  }
  // Random strings of every length up to 40 over bytes that need escaping and bytes that do not,
  // so that special bytes fall at every position of the eight-byte copies.
  std::mt19937 rng(17);
  const std::string alphabet = std::string("ab\"\\\n\x01\x1f \x7f\x80\xc3\xa9", 13);
  for (int k = 0; k < 20000; ++k) {
    std::string s(rng() % 41, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    INFO(k);
    REQUIRE(formatted(s) == reference_string(s));
  }
}

// A plain string (prof::PlainStr) is copied as it is, and only a string the byte-by-byte rule would
// leave unchanged between its quotes is plain: the same bytes and the same count either way.
TEST_CASE("plain strings: checked by the rule, written and counted as escaped ones are",
          "[trace]") {
  using csim::prof::FlaggedStr;
  using csim::prof::PlainStr;
  const auto write = [](auto s, std::size_t bound) {
    std::string buf(bound, '\0');
    buf.resize(static_cast<std::size_t>(raw_string(buf.data(), s) - buf.data()));
    return buf;
  };
  std::mt19937 rng(29);
  const std::string alphabet = std::string("ab\"\\\n\x01\x1f \x7f\x80\xc3\xa9", 13);
  int plain_seen = 0;
  for (int k = 0; k < 20000; ++k) {
    // Every fourth string from plain bytes only, so that both answers come often.
    std::string s(rng() % 41, ' ');
    for (char& c : s) c = k % 4 == 0 ? "ab \x7f\xc3"[rng() % 5] : alphabet[rng() % alphabet.size()];
    INFO(k);
    // Plain exactly when escaping changes nothing: the reference is then S quoted.
    const bool plain = reference_string(s) == "\"" + s + "\"";
    REQUIRE(csim::prof::json_plain(s) == plain);
    const std::optional<PlainStr> checked = PlainStr::checked(s);
    REQUIRE(checked.has_value() == plain);
    // A string flagged not plain is escaped as any string_view is.
    REQUIRE(write(FlaggedStr{s, false}, raw_string_bound(FlaggedStr{s, false})) == formatted(s));
    REQUIRE(raw_string(Count{}, FlaggedStr{s, false}).n == formatted(s).size());
    if (!plain) continue;
    ++plain_seen;
    REQUIRE(write(*checked, raw_string_bound(*checked)) == formatted(s));
    REQUIRE(write(FlaggedStr{s, true}, raw_string_bound(FlaggedStr{s, true})) == formatted(s));
    // The bound of a plain string is exact: its bytes and two quotes.
    REQUIRE(raw_string_bound(*checked) == formatted(s).size());
    REQUIRE(raw_string(Count{}, *checked).n == formatted(s).size());
  }
  CHECK(plain_seen > 5000);
  // A literal is checked when compiled (PlainStr("a\"b") does not compile); one that compiles
  // is its text.
  constexpr PlainStr kKey("memory bandwidth (GB/s)");
  CHECK(kKey.view() == "memory bandwidth (GB/s)");
  CHECK(PlainStr().view().empty());
}

TEST_CASE("in-place µs and numbers", "[trace]") {
  const auto us = [](csim::TimeNs ns) {
    char buf[32];
    return std::string(buf, raw_us(buf, ns));
  };
  // 1234567 ns = 1234.567 µs; −1500 ns = −1.500 µs; 0 = 0.000
  CHECK(us(1234567) == "1234.567");
  CHECK(us(-1500) == "-1.500");
  CHECK(us(0) == "0.000");
  CHECK(us(5) == "0.005");
  const auto dbl = [](double v) {
    char buf[kRawNumberBound];
    return std::string(buf, raw_double_arg(buf, v));
  };
  // Shortest round trip, always with a '.' or an exponent; non-finite values are null.
  CHECK(dbl(2.0) == "2.0");
  CHECK(dbl(0.1) == "0.1");
  CHECK(dbl(1e300) == "1e+300");
  CHECK(dbl(1.0 / 0.0) == "null");
  const auto counter = [](double v) {
    char buf[kRawNumberBound];
    return std::string(buf, raw_counter_value(buf, v));
  };
  // Integral values below 2^53 print as integers, others as the shortest repr.
  CHECK(counter(1e9) == "1000000000");
  CHECK(counter(2.5) == "2.5");
  CHECK(counter(1e300) == "1e+300");
}

TEST_CASE("a remembered double's text is the one std::to_chars gives", "[trace]") {
  // raw_double_arg remembers the last value of each of 64 slots; whatever the order of values
  // (repeats, values sharing a slot, the longest texts), it writes what the uncached one writes.
  const auto text = [](double v, bool cached) {
    char buf[kRawNumberBound];
    return std::string(buf, cached ? raw_double_arg(buf, v) : raw_double_arg_uncached(buf, v));
  };
  std::vector<double> values = {0.0,
                                -0.0,
                                1.0,
                                2.0,
                                0.1,
                                1e22,
                                1e23,
                                -std::numeric_limits<double>::denorm_min(),
                                -std::numeric_limits<double>::min(),
                                -std::numeric_limits<double>::max(),
                                -1.2345678901234567e-300,
                                123456789012345680000.0,
                                std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::quiet_NaN()};
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<double> exponent(-310.0, 310.0);
  for (int i = 0; i < 2000; ++i) values.push_back(std::pow(10.0, exponent(rng)) * (i % 2 ? -1 : 1));
  for (int i = 0; i < 2000; ++i) values.push_back(static_cast<double>(rng() % 1000000) * 1e9);
  std::size_t longest = 0;
  for (int round = 0; round < 3; ++round) {  // each value again, after others took its slot
    for (double v : values) {
      const std::string expected = text(v, false);
      longest = std::max(longest, expected.size());
      CHECK(text(v, true) == expected);
      CHECK(text(v, true) == expected);  // the remembered copy
    }
    std::shuffle(values.begin(), values.end(), rng);
  }
  CHECK(longest <= 26);  // what a slot's 32 bytes hold
}

TEST_CASE("in-place integers are std::to_chars's digits", "[trace]") {
  const auto mine = [](std::int64_t v) {
    char buf[24];
    return std::string(buf, raw_int(buf, v));
  };
  const auto reference = [](std::int64_t v) {
    char buf[24];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  };
  // Every power of ten and its neighbours (where the digit count changes), both signs, and the
  // extremes of int64.
  // 10^18 is the largest power of ten an int64 holds: multiply only while another one follows.
  std::int64_t pow10 = 1;
  for (int k = 0; k <= 18; ++k) {
    for (const std::int64_t v : {pow10 - 1, pow10, pow10 + 1}) {
      INFO(v);
      CHECK(mine(v) == reference(v));
      CHECK(mine(-v) == reference(-v));
    }
    if (k < 18) pow10 *= 10;
  }
  CHECK(mine(0) == "0");
  CHECK(mine(std::numeric_limits<std::int64_t>::max()) == "9223372036854775807");
  CHECK(mine(std::numeric_limits<std::int64_t>::min()) == "-9223372036854775808");
  // Random values of every magnitude: a random bit width, then random bits.
  std::mt19937_64 rng(17);
  for (int k = 0; k < 20000; ++k) {
    const auto v = static_cast<std::int64_t>(rng() >> (rng() % 64));
    INFO(v);
    REQUIRE(mine(v) == reference(v));
  }
  // µs of large times: the integer part is the same digits.
  char buf[32];
  CHECK(std::string(buf, raw_us(buf, 9223372036854775807)) == "9223372036854775.807");
}
