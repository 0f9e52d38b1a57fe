// Chrome Trace Event JSON reader: our own files (exact round trip) and PyTorch-profiler (Kineto)
// traces (docs/trace-format.md, "Reading").
//
// Index:
//  [SECTION] Sources: plain file, gzip file (zlib), string
//  [SECTION] Scanner: streaming tokenizer that cuts the input into top-level values and events
//  [SECTION] Record: one traceEvents element from simdjson's DOM, fields in any order
//  [SECTION] Reader: top-level object, record dispatch, finishing (flows, B/E, roles)
//  [SECTION] Entry points
//
// Pipeline (as Perfetto's JSON importer): the input is read in 4 MiB chunks; a light scanner that
// only tracks strings and bracket depth cuts out each traceEvents element; elements are gathered
// into ~1 MiB batches parsed by simdjson's DOM parser (which dispatches at run time to the CPU's
// SIMD kernels; its On-Demand front end would be bound to the portable scalar kernel by our
// compile flags). Memory stays at a few MiB besides the Trace itself, and no whole-file buffer is
// faulted in. A record with a wrong type or a missing field is counted and skipped; a JSON syntax
// error or a truncated file fails the read with the byte offset.
#include "profiler/chrome_trace_reader.hpp"

#include <zlib.h>

#include <simdjson.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <unordered_map>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "profiler/chrome_trace_record.hpp"
#include "profiler/huge_pages.hpp"
#include "profiler/trace_classify.hpp"

namespace csim::prof {
namespace {

namespace dom = simdjson::dom;

[[noreturn]] void fail_input(const std::string& file, const std::string& msg,
                             const std::string& hint = {}) {
  throw InputError(file, "", msg, hint);
}

// [SECTION] Sources ------------------------------------------------------------------------------

// The scanner's window: a byte buffer that is not zero-filled when it grows (a read overwrites the
// bytes anyway), and that always has simdjson's padding allocated after its end, so that a part of
// it can be parsed in place.
class ByteBuffer {
 public:
  const char* data() const { return storage_.get(); }
  char* data() { return storage_.get(); }
  std::size_t size() const { return size_; }
  // Room for n more bytes at data() + size(); commit(k) then makes k of them part of the buffer.
  char* append_space(std::size_t n) {
    if (size_ + n + simdjson::SIMDJSON_PADDING > cap_) {
      const std::size_t cap = std::max(size_ + n + simdjson::SIMDJSON_PADDING, 2 * cap_);
      std::unique_ptr<char[]> p(new char[cap]);
      if (size_ > 0) std::memcpy(p.get(), storage_.get(), size_);
      storage_ = std::move(p);
      cap_ = cap;
    }
    return storage_.get() + size_;
  }
  void commit(std::size_t k) { size_ += k; }
  void drop_front(std::size_t n) {
    std::memmove(storage_.get(), storage_.get() + n, size_ - n);
    size_ -= n;
  }

 private:
  std::unique_ptr<char[]> storage_;
  std::size_t size_ = 0, cap_ = 0;
};

class Source {
 public:
  virtual ~Source() = default;
  // Appends up to n bytes to out; returns how many (0 at the end).
  virtual std::size_t read(ByteBuffer& out, std::size_t n) = 0;
  // Total bytes when known up front (0: unknown), to reserve the event vector once.
  virtual std::size_t size_hint() const { return 0; }
};

class FileSource final : public Source {
 public:
  FileSource(const std::string& path, std::FILE* f) : path_(path), f_(f) {
    if (std::fseek(f_, 0, SEEK_END) == 0) {
      const long n = std::ftell(f_);
      size_ = n > 0 ? static_cast<std::size_t>(n) : 0;
    }
    std::rewind(f_);
  }
  ~FileSource() override { std::fclose(f_); }
  std::size_t size_hint() const override { return size_; }
  std::size_t read(ByteBuffer& out, std::size_t n) override {
    const std::size_t got = std::fread(out.append_space(n), 1, n, f_);
    out.commit(got);
    if (got == 0 && std::ferror(f_)) fail_input(path_, "read error");
    return got;
  }

 private:
  std::string path_;
  std::FILE* f_;
  std::size_t size_ = 0;
};

class GzipSource final : public Source {
 public:
  GzipSource(const std::string& path, gzFile gz) : path_(path), gz_(gz) { gzbuffer(gz_, 1 << 18); }
  ~GzipSource() override { gzclose(gz_); }
  std::size_t read(ByteBuffer& out, std::size_t n) override {
    const int got = gzread(gz_, out.append_space(n), static_cast<unsigned>(n));
    // A damaged stream fails the read; a truncated one ends early with Z_BUF_ERROR ("unexpected
    // end of file"). Both are a corrupt file, whatever was inflated before (not "empty input").
    int err = Z_OK;
    const char* zmsg = gzerror(gz_, &err);
    if (got < 0 || (err != Z_OK && err != Z_STREAM_END)) {
      fail_input(path_,
                 std::string("corrupt gzip file: ") + (zmsg != nullptr ? zmsg : "read error"),
                 "the .gz file is damaged or truncated; copy or compress it again");
    }
    out.commit(static_cast<std::size_t>(got));
    return static_cast<std::size_t>(got);
  }

 private:
  std::string path_;
  gzFile gz_;
};

class StringSource final : public Source {
 public:
  explicit StringSource(const std::string& s) : text_(s) {}
  std::size_t size_hint() const override { return text_.size(); }
  std::size_t read(ByteBuffer& out, std::size_t n) override {
    const std::size_t k = std::min(n, text_.size() - at_);
    if (k > 0) std::memcpy(out.append_space(k), text_.data() + at_, k);
    out.commit(k);
    at_ += k;
    return k;
  }

 private:
  const std::string& text_;
  std::size_t at_ = 0;
};

std::unique_ptr<Source> open_source(const std::string& path) {
  // A directory opens (fopen succeeds on Linux) and then reads as garbage: refuse it by name.
  core::check_input_file(path, "trace file",
                         "pass a Chrome trace (.json or .json.gz) written by simrun -o or the "
                         "PyTorch profiler");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) fail_input(path, std::string("cannot open file: ") + std::strerror(errno));
  unsigned char magic[2] = {0, 0};
  const std::size_t n = std::fread(magic, 1, 2, f);
  if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {  // gzip magic
    std::fclose(f);
    gzFile gz = gzopen(path.c_str(), "rb");
    if (gz == nullptr) fail_input(path, "cannot open gzip file");
    return std::make_unique<GzipSource>(path, gz);
  }
  std::rewind(f);
  return std::make_unique<FileSource>(path, f);
}

// [SECTION] Scanner ------------------------------------------------------------------------------

// Pulls the input through a window buffer. Bytes before `mark` (or before `pos` when no mark is
// set) may be dropped when more input is read, so a caller sets a mark at the start of a value it
// wants to keep whole. Only strings (with escapes) and bracket depth are tracked: full validation
// is simdjson's job on the cut-out values.
class Scanner {
 public:
  static constexpr std::size_t kNoMark = std::numeric_limits<std::size_t>::max();
  Scanner(Source& src, std::string file) : src_(src), file_(std::move(file)) {}

  std::size_t offset() const { return base_ + pos_; }  // absolute byte offset of pos
  std::size_t abs(std::size_t i) const { return base_ + i; }
  std::string_view buf() const { return {buf_.data(), buf_.size()}; }
  // For framing a batch in place (Reader::try_fast_batch); bytes changed must be restored.
  char* mutable_data() { return buf_.data(); }
  std::size_t pos() const { return pos_; }
  void set_mark(std::size_t i) { mark_ = i; }
  void clear_mark() { mark_ = kNoMark; }
  std::size_t mark() const { return mark_; }

  // The next byte without consuming it; -1 at the end of the input.
  int peek() {
    if (pos_ >= buf_.size() && !fill()) return -1;
    return static_cast<unsigned char>(buf_.data()[pos_]);
  }
  void advance() { ++pos_; }
  void set_pos(std::size_t p) { pos_ = p; }
  // Reads until n bytes from pos are buffered or the input ends; false when fewer are available.
  bool ensure(std::size_t n) {
    while (buf_.size() - pos_ < n) {
      if (!fill()) return false;
    }
    return true;
  }

  int skip_ws_peek() {
    for (;;) {
      const int c = peek();
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c;
      ++pos_;
    }
  }

  // Moves pos past one JSON value that starts at pos (after whitespace). `outer` is the nesting
  // depth the value sits at (1 inside the top-level object or array, 2 inside traceEvents): the
  // value may nest to core::kMaxJsonDepth in all (docs/limits.md, "JSON nesting").
  void skip_value(int outer) {
    const int c = peek();
    if (c == '"') {
      ++pos_;
      skip_string_body();
      return;
    }
    if (c == '{' || c == '[') {
      // Tight loop on raw pointers; a refill moves the buffer, so positions are re-derived.
      int depth = 0;
      for (;;) {
        const char* data = buf_.data();
        const char* p = data + pos_;
        const char* const end = data + buf_.size();
        while (p < end) {
          const char ch = *p++;
          if (ch == '"') {
            pos_ = static_cast<std::size_t>(p - data);
            skip_string_body();
            data = buf_.data();
            p = data + pos_;
            if (p >= data + buf_.size()) break;
            continue;
          }
          if (ch == '{' || ch == '[') {
            if (++depth + outer > core::kMaxJsonDepth) {
              pos_ = static_cast<std::size_t>(p - data);
              too_deep();
            }
          } else if ((ch == '}' || ch == ']') && --depth == 0) {
            pos_ = static_cast<std::size_t>(p - data);
            return;
          }
        }
        pos_ = static_cast<std::size_t>(p - data);
        if (pos_ >= buf_.size() && !fill()) truncated("an unclosed array or object");
      }
    }
    if (c < 0) truncated("an array or object, where a value was expected");
    // Scalar: up to the next delimiter.
    for (;;) {
      const int d = peek();
      if (d < 0 || d == ',' || d == '}' || d == ']' || d == ' ' || d == '\n' || d == '\r' ||
          d == '\t') {
        return;
      }
      ++pos_;
    }
  }

  [[noreturn]] void too_deep() {
    fail_input(file_,
               "JSON nested deeper than the limit of " + std::to_string(core::kMaxJsonDepth) +
                   " levels at byte " + std::to_string(offset()) +
                   " (docs/limits.md, \"JSON nesting\")",
               "a trace event nests a few levels; is this the right file?");
  }
  [[noreturn]] void truncated(const char* inside) {
    fail_input(file_,
               std::string("truncated trace: the input ends inside ") + inside + " at byte " +
                   std::to_string(offset()),
               "the file looks cut short; was the writer interrupted?");
  }
  [[noreturn]] void malformed(const std::string& expected) {
    const int c = peek();
    std::string found = c < 0 ? "the end of the input" : std::string("'") + char(c) + "'";
    if (c < 0) truncated(("a value where " + expected + " was expected").c_str());
    fail_input(file_,
               "malformed JSON at byte " + std::to_string(offset()) + ": expected " + expected +
                   ", found " + found,
               "is the file valid JSON?");
  }

 private:
  // pos is just after an opening quote; moves past the closing one. memchr finds quotes with
  // SIMD; a quote preceded by an odd number of backslashes is escaped.
  void skip_string_body() {
    for (;;) {
      if (pos_ >= buf_.size() && !fill()) truncated("a string");
      const char* start = buf_.data() + pos_;
      const auto* q = static_cast<const char*>(std::memchr(start, '"', buf_.size() - pos_));
      if (q == nullptr) {
        pos_ = buf_.size();
        continue;
      }
      std::size_t qi = static_cast<std::size_t>(q - buf_.data());
      std::size_t bs = 0;
      while (qi - bs > 0 && buf_.data()[qi - bs - 1] == '\\') ++bs;
      pos_ = qi + 1;
      if (bs % 2 == 0) return;
    }
  }

  // One byte before pos (or the mark) is kept, so that a batch starting at pos can be framed in
  // place with a '[' (Reader::try_fast_batch).
  bool fill() {
    const std::size_t keep_from = mark_ == kNoMark ? pos_ : std::min(mark_, pos_);
    const std::size_t drop = keep_from > 0 ? keep_from - 1 : 0;
    if (drop > 0) {
      buf_.drop_front(drop);
      base_ += drop;
      pos_ -= drop;
      if (mark_ != kNoMark) mark_ -= drop;
    }
    return src_.read(buf_, kChunk) > 0;
  }

  static constexpr std::size_t kChunk = 256 << 10;
  Source& src_;
  std::string file_;
  ByteBuffer buf_;
  std::size_t base_ = 0;  // absolute offset of buf_[0]
  std::size_t pos_ = 0;
  std::size_t mark_ = kNoMark;
};

// [SECTION] Record -------------------------------------------------------------------------------

using detail::key_is;
using detail::RawArg;
using detail::Record;
using detail::us_to_ns_checked;

void read_int_field(dom::element v, bool* has, bool* not_int, std::int64_t* out) {
  *has = true;
  std::int64_t i = 0;
  if (v.get_int64().get(i) == simdjson::SUCCESS) {
    *out = i;
  } else {
    *not_int = true;  // a string pid ("Spans") or a fractional one: the record is ignored
  }
}

void read_time_field(dom::element v, bool* has, bool* bad, TimeNs* out) {
  *has = true;
  double d = 0;
  if (v.get_double().get(d) != simdjson::SUCCESS || !us_to_ns_checked(d, out)) *bad = true;
}

void read_args(dom::element v, Record& rec) {
  dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) return;  // not an object: no args
  for (const dom::key_value_pair kv : obj) {
    RawArg a;
    a.key = kv.key;
    const dom::element val = kv.value;
    switch (val.type()) {
      case dom::element_type::STRING:
        a.kind = RawArg::Kind::kString;
        a.s = val.get_string().value_unsafe();
        break;
      case dom::element_type::INT64:
        a.kind = RawArg::Kind::kInt;
        a.i = val.get_int64().value_unsafe();
        break;
      case dom::element_type::UINT64:  // above INT64_MAX: kept as a double
      case dom::element_type::DOUBLE:
        a.kind = RawArg::Kind::kDouble;
        a.d = val.get_double().value_unsafe();
        break;
      case dom::element_type::BOOL:
        a.kind = RawArg::Kind::kInt;
        a.i = val.get_bool().value_unsafe() ? 1 : 0;
        break;
      case dom::element_type::NULL_VALUE:
        continue;  // null args carry nothing (non-finite doubles are written as null)
      default:
        a.kind = RawArg::Kind::kRaw;
        a.raw = simdjson::minify(val);
    }
    rec.args.push_back(std::move(a));
  }
}

std::string_view string_or_empty(dom::element v) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) return {};
  return s;
}

void read_record(dom::object obj, Record& rec) {
  rec.clear();
  for (const dom::key_value_pair kv : obj) {
    const std::string_view key = kv.key;
    // Dispatch on the length first: each branch then compares a constant number of bytes.
    switch (key.size()) {
      case 2:
        if (key_is(key, "ph")) {
          rec.ph = string_or_empty(kv.value);
        } else if (key_is(key, "ts")) {
          read_time_field(kv.value, &rec.has_ts, &rec.bad_time, &rec.ts_rel_ns);
        } else if (key_is(key, "id")) {
          bool not_int = false;
          read_int_field(kv.value, &rec.has_id, &not_int, &rec.id);
          rec.bad_id = rec.bad_id || not_int;
        } else if (key_is(key, "bp")) {
          rec.bp = string_or_empty(kv.value);
        }
        break;
      case 3:
        if (key_is(key, "pid")) {
          read_int_field(kv.value, &rec.has_pid, &rec.pid_not_int, &rec.pid);
        } else if (key_is(key, "tid")) {
          read_int_field(kv.value, &rec.has_tid, &rec.tid_not_int, &rec.tid);
        } else if (key_is(key, "cat")) {
          rec.cat = string_or_empty(kv.value);
        } else if (key_is(key, "dur")) {
          read_time_field(kv.value, &rec.has_dur, &rec.bad_time, &rec.dur_ns);
        }
        break;
      case 4:
        if (key_is(key, "name")) {
          rec.name = string_or_empty(kv.value);
        } else if (key_is(key, "args")) {
          read_args(kv.value, rec);
        }
        break;
      default:
        break;  // other keys (s, tts, …) are not used
    }
  }
}

// [SECTION] Reader -------------------------------------------------------------------------------

std::uint64_t lane_key(std::int32_t pid, std::int32_t tid) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 32) |
         static_cast<std::uint32_t>(tid);
}

bool fits_i32(std::int64_t v) {
  return v >= std::numeric_limits<std::int32_t>::min() &&
         v <= std::numeric_limits<std::int32_t>::max();
}

struct FlowEnd {
  std::uint32_t cat = 0, name = 0;  // indices into Reader::flow_strings_
  std::int64_t id = 0;
  std::int32_t pid = 0, tid = 0;
  TimeNs ts_rel_ns = 0;
  std::size_t order = 0;  // position in the file
};

class Reader {
 public:
  Reader(std::string file, Source& src, ReadStats* stats)
      : file_(std::move(file)), sc_(src, file_), stats_(stats) {
    batch_.reserve(kBatchBytes + (1 << 16));
    // A batch frames its elements in one more array, one level less than the file's
    // {"traceEvents": [...]}: the same nesting limit as skip_value's (docs/limits.md).
    // (Out of memory here fails the first parse the same way, with simdjson's MEMALLOC.)
    const simdjson::error_code depth_set = parser_.allocate(1 << 16, core::kMaxJsonDepth - 1);
    (void)depth_set;
    // One event line of ours is ~230 bytes; reserving avoids moving a million events on growth.
    trace_.events.reserve(src.size_hint() / 256);
    advise_huge_pages(trace_.events);
  }

  Trace run() {
    const int c = sc_.skip_ws_peek();
    if (c < 0) fail_input(file_, "empty input: not a trace", "expected {\"traceEvents\": [...]}");
    if (c == '[') {
      read_events_array();  // JSON Array Format: the document is the event list
    } else if (c == '{') {
      read_top_object();
    } else {
      // A binary file (an executable, an image) says so, rather than "not a trace".
      if (sc_.buf().substr(0, 4096).find('\0') != std::string_view::npos)
        fail_input(file_,
                   "not a text file (a NUL byte in its first 4 KiB): a trace is JSON text, plain "
                   "or gzip-compressed",
                   "pass a Chrome trace (.json or .json.gz) written by simrun -o or the PyTorch "
                   "profiler");
      fail_input(file_, "not a trace: the document does not start with '{' or '['",
                 "expected a Chrome trace {\"traceEvents\": [...]}");
    }
    if (sc_.skip_ws_peek() >= 0) {
      fail_input(file_,
                 "trailing content after the JSON document at byte " + std::to_string(sc_.offset()),
                 "the file holds more than one JSON value");
    }
    if (!saw_events_) {
      fail_input(file_, "not a trace: no \"traceEvents\" array",
                 "expected a Chrome trace {\"traceEvents\": [...]}");
    }
    finish();
    if (stats_ != nullptr) *stats_ = st_;
    return std::move(trace_);
  }

 private:
  static constexpr std::size_t kBatchBytes = 1 << 20;

  // Cuts the value at the scanner's position out of the input (as text).
  std::string take_value(std::size_t* at) {
    sc_.skip_ws_peek();
    const std::size_t start = sc_.pos();
    *at = sc_.abs(start);
    sc_.set_mark(start);
    sc_.skip_value(1);
    std::string text(sc_.buf().substr(sc_.mark(), sc_.pos() - sc_.mark()));
    sc_.clear_mark();
    return text;
  }

  nlohmann::json parse_small(const std::string& text, std::size_t at, const std::string& key) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      fail_input(
          file_,
          "malformed JSON in the value of \"" + key + "\" starting at byte " + std::to_string(at),
          "is the file valid JSON?");
    }
    return j;
  }

  void read_top_object() {
    sc_.advance();  // '{'
    int c = sc_.skip_ws_peek();
    if (c == '}') {
      sc_.advance();
      return;
    }
    for (;;) {
      if (sc_.skip_ws_peek() != '"') sc_.malformed("a key string");
      std::size_t at = 0;
      const nlohmann::json key_json = parse_small(take_value(&at), at, "key");
      const std::string key = key_json.is_string() ? key_json.get<std::string>() : "";
      if (sc_.skip_ws_peek() != ':') sc_.malformed("':'");
      sc_.advance();
      c = sc_.skip_ws_peek();
      if (key == "traceEvents") {
        if (c != '[') {
          fail_input(file_,
                     "\"traceEvents\" is not an array (byte " + std::to_string(sc_.offset()) + ")",
                     "expected \"traceEvents\": [...]");
        }
        read_events_array();
      } else {
        const std::string text = take_value(&at);
        top_value(key, parse_small(text, at, key));
      }
      c = sc_.skip_ws_peek();
      if (c == ',') {
        sc_.advance();
        continue;
      }
      if (c == '}') {
        sc_.advance();
        return;
      }
      sc_.malformed("',' or '}' after a top-level value");
    }
  }

  void top_value(const std::string& key, const nlohmann::json& v) {
    if (key == "clustersim" && v.is_object()) {
      st_.clustersim_file = true;
      for (auto it = v.begin(); it != v.end(); ++it) trace_.metadata[it.key()] = it.value();
    } else if (key == "distributedInfo" && v.is_object()) {
      for (auto it = v.begin(); it != v.end(); ++it) {
        const auto& x = it.value();
        if (it.key() == "rank" && x.is_number_integer() && fits_i32(x.get<std::int64_t>())) {
          trace_.rank = x.get<int>();
        } else if (it.key() == "world_size" && x.is_number_integer() &&
                   fits_i32(x.get<std::int64_t>()) && x.get<std::int64_t>() > 0) {
          trace_.world_size = x.get<int>();
        } else {
          // backend, pg_config, nccl_version, …: kept so that writing the trace keeps them.
          trace_.metadata["distributedInfo"][it.key()] = x;
        }
      }
    } else if (key == "deviceProperties" && v.is_array()) {
      trace_.metadata["deviceProperties"] = v;
    } else if (key == "baseTimeNanoseconds" && v.is_number_integer()) {
      trace_.base_ns = v.get<std::int64_t>();
    }
    // schemaVersion, displayTimeUnit, traceName, INFO, …: not used.
  }

  // Two ways to cut the array into batches. Fast: guess a cut at the first "}," after ~1 MiB and
  // let simdjson validate the guess: a cut inside an object leaves its '{' unclosed, so a guess
  // is wrong exactly when the batch fails to parse (or, for a cut inside an array element, yields
  // a non-object element); then the batch is redone exactly. Exact: the scanner walks element by
  // element (strings and depth), which also pins a syntax error to its element.
  void read_events_array() {
    saw_events_ = true;
    sc_.advance();  // '['
    if (sc_.skip_ws_peek() == ']') {
      sc_.advance();
      return;
    }
    for (;;) {
      sc_.skip_ws_peek();
      if (direct_elements()) break;
      if (try_fast_batch()) continue;
      if (exact_batch()) break;
    }
  }

  // Reads elements straight from the window (detail::parse_record_fast) while they are in its
  // subset, each followed by ',' or ']'. Stops at the first other element, leaving the scanner
  // at its start for the simdjson paths; true at the end of the array. Views into the window
  // stay valid while an element is dispatched: the window is refilled only between elements.
  bool direct_elements() {
    constexpr std::size_t kLookahead = 1 << 16;  // refill when fewer bytes than this are left
    bool at_end = false;                         // the window holds the rest of the input
    for (;;) {
      // Refilled below 2 x kLookahead, left at kLookahead: each round moves on at least that much.
      if (!at_end && sc_.buf().size() - sc_.pos() < 2 * kLookahead) {
        at_end = !sc_.ensure(2 * kLookahead);
      }
      const char* const base = sc_.buf().data();
      const char* const end = base + sc_.buf().size();
      const char* p = base + sc_.pos();
      const char* const stop = at_end ? end : end - kLookahead;
      for (;;) {
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
        sc_.set_pos(static_cast<std::size_t>(p - base));
        if (p >= end || (!at_end && p >= stop)) break;
        const char* q = detail::parse_record_fast(p, end, rec_);
        if (q == nullptr) return false;
        while (q < end && (*q == ' ' || *q == '\n' || *q == '\r' || *q == '\t')) ++q;
        if (q == end || (*q != ',' && *q != ']')) return false;
        ++index_;
        dispatch();
        sc_.set_pos(static_cast<std::size_t>(q + 1 - base));
        if (*q == ']') return true;
        p = q + 1;
      }
      if (at_end) return false;
    }
  }

  bool try_fast_batch() {
    if (!sc_.ensure(2 * kBatchBytes)) return false;  // near the end: exact path
    const std::string_view b = sc_.buf();
    const std::size_t from = sc_.pos();
    std::size_t at = from + kBatchBytes;
    std::size_t cut = std::string::npos, next = 0;
    while (at < b.size()) {
      const auto* q = static_cast<const char*>(std::memchr(b.data() + at, '}', b.size() - at));
      if (q == nullptr) break;
      std::size_t k = static_cast<std::size_t>(q - b.data()) + 1;
      while (k < b.size() && (b[k] == ' ' || b[k] == '\n' || b[k] == '\r' || b[k] == '\t')) ++k;
      if (k < b.size() && b[k] == ',') {
        cut = static_cast<std::size_t>(q - b.data()) + 1;
        next = k + 1;
        break;
      }
      at = k;
    }
    if (cut == std::string::npos || from == 0) return false;
    // The elements [from, cut) are framed as a JSON array in place: the byte before them ('[',
    // ',' or whitespace, kept by the scanner) becomes '[', the one after them (',' or
    // whitespace) ']'. Both are restored right after the parse (the DOM holds its own copies of
    // strings); the scanner's buffer has simdjson's padding after its end.
    char* const d = sc_.mutable_data();
    const char before = d[from - 1], after = d[cut];
    d[from - 1] = '[';
    d[cut] = ']';
    dom::element root;
    const simdjson::error_code err = parser_.parse(d + from - 1, cut - from + 2, false).get(root);
    d[from - 1] = before;
    d[cut] = after;
    dom::array events;
    if (err != simdjson::SUCCESS || root.get_array().get(events) != simdjson::SUCCESS) return false;
    for (const dom::element elem : events) {
      if (elem.type() != dom::element_type::OBJECT) return false;
    }
    dispatch_all(events);
    sc_.set_pos(next);
    return true;
  }

  // Cuts elements one by one into a batch of about kBatchBytes and parses it. True at the end of
  // the array.
  bool exact_batch() {
    bool done = false;
    for (;;) {
      sc_.skip_ws_peek();
      const std::size_t start = sc_.pos();
      sc_.set_mark(start);
      sc_.skip_value(2);
      batch_ += batch_.empty() ? '[' : ',';
      batch_starts_.push_back(sc_.abs(sc_.mark()));
      batch_offsets_.push_back(batch_.size());
      batch_.append(sc_.buf(), sc_.mark(), sc_.pos() - sc_.mark());  // the mark moves on refills
      sc_.clear_mark();
      const int c = sc_.skip_ws_peek();
      if (c == ',') {
        sc_.advance();
      } else if (c == ']') {
        sc_.advance();
        done = true;
        break;
      } else {
        sc_.malformed("',' or ']' after a traceEvents element");
      }
      if (batch_.size() >= kBatchBytes) break;
    }
    flush_batch();
    return done;
  }

  void flush_batch() {
    if (batch_.empty()) return;
    batch_ += ']';
    batch_.reserve(batch_.size() + simdjson::SIMDJSON_PADDING);
    dom::element root;
    if (const auto err = parser_.parse(batch_).get(root)) locate_error(err);
    dom::array events;
    if (const auto err = root.get_array().get(events)) locate_error(err);
    dispatch_all(events);
    batch_.clear();
    batch_starts_.clear();
    batch_offsets_.clear();
  }

  void dispatch_all(dom::array events) {
    for (const dom::element elem : events) {
      ++index_;
      dom::object obj;
      if (elem.get_object().get(obj) != simdjson::SUCCESS) {
        skip(where() + " is not an object");
        continue;
      }
      read_record(obj, rec_);
      dispatch();
    }
  }

  // A batch failed to parse: parse its elements one by one to name the first bad one. Element k
  // is batch_[offsets_[k], offsets_[k+1] - 1): one comma (or the closing ']') follows each.
  [[noreturn]] void locate_error(simdjson::error_code batch_err) {
    dom::parser p;
    for (std::size_t k = 0; k < batch_offsets_.size(); ++k) {
      const std::size_t from = batch_offsets_[k];
      const std::size_t to =
          k + 1 < batch_offsets_.size() ? batch_offsets_[k + 1] - 1 : batch_.size() - 1;
      const std::string one = batch_.substr(from, to - from);
      dom::element e;
      if (const auto err = p.parse(one).get(e)) {
        fail_input(file_,
                   "malformed JSON in traceEvents[" + std::to_string(index_ + k) +
                       "] starting at byte " + std::to_string(batch_starts_[k]) + ": " +
                       simdjson::error_message(err),
                   "is the file valid JSON?");
      }
    }
    fail_input(file_,
               std::string("malformed JSON in traceEvents: ") + simdjson::error_message(batch_err),
               "is the file valid JSON?");
  }

  std::string where() const { return "traceEvents[" + std::to_string(index_ - 1) + "]"; }

  void skip(const std::string& why) {
    ++st_.skipped_records;
    if (st_.first_problem.empty()) st_.first_problem = why;
  }
  void dispatch() {
    const Record& r = rec_;
    if (r.ph.size() != 1) {
      skip(where() + ": missing or invalid \"ph\"");
      return;
    }
    const char ph = r.ph[0];
    if ((ph == 'i' || ph == 'I') && r.name == "[memory]") {
      add_memory_instant();
      return;
    }
    if (ph == 'i' || ph == 'I' || ph == 'R' || ph == 'n' || ph == 'O' || ph == 'N' || ph == 'D' ||
        ph == 'P' || ph == 'b' || ph == 'e' || ph == 't') {
      ++st_.ignored_records;  // instants, marks, objects, samples, async: not in our model
      return;
    }
    if (r.pid_not_int || r.tid_not_int) {
      ++st_.ignored_records;  // Kineto's "Spans"/"Traces" pseudo-processes
      return;
    }
    if ((r.has_pid && !fits_i32(r.pid)) || (r.has_tid && !fits_i32(r.tid))) {
      skip(where() + ": pid or tid out of the 32-bit range");
      return;
    }
    if (r.bad_time) {
      skip(where() + ": \"ts\" or \"dur\" is not a number of microseconds");
      return;
    }
    const auto pid = static_cast<std::int32_t>(r.pid);
    const auto tid = static_cast<std::int32_t>(r.tid);
    switch (ph) {
      case 'X': {
        if (!r.has_pid || !r.has_ts) {
          skip(where() + ": complete event without pid or ts");
          return;
        }
        if (r.dur_ns < 0) {
          skip(where() + ": negative \"dur\"");
          return;
        }
        add_event(pid, tid, r.ts_rel_ns, r.dur_ns);
        return;
      }
      case 'B': {
        if (!r.has_pid || !r.has_ts) {
          skip(where() + ": begin event without pid or ts");
          return;
        }
        open_[lane_key(pid, tid)].push_back(pending_from_record(pid, tid));
        return;
      }
      case 'E': {
        auto it = open_.find(lane_key(pid, tid));
        if (!r.has_ts || it == open_.end() || it->second.empty()) {
          skip(where() + ": end event without a matching begin");
          return;
        }
        TraceEvent e = std::move(it->second.back());
        it->second.pop_back();
        if (r.ts_rel_ns < e.ts_ns) {
          skip(where() + ": end before its begin");
          return;
        }
        e.dur_ns = r.ts_rel_ns - e.ts_ns;
        commit_event(std::move(e));
        return;
      }
      case 'C':
        add_counter(pid);
        return;
      case 's':
      case 'f':
        add_flow_end(ph, pid, tid);
        return;
      case 'M':
        add_metadata(pid, tid);
        return;
      default:
        skip(where() + ": unknown \"ph\" '" + std::string(r.ph) + "'");
    }
  }

  // Builds an event from the record: our reserved args (written before "class") become fields;
  // for traces without "class", correlation becomes a field and device/stream are dropped (the
  // writer derives them from pid/tid), everything else stays an arg in file order.
  TraceEvent pending_from_record(std::int32_t pid, std::int32_t tid) {
    TraceEvent e;
    fill_event(e, pid, tid);
    return e;
  }

  // E is a default-constructed event.
  void fill_event(TraceEvent& e, std::int32_t pid, std::int32_t tid) {
    const Record& r = rec_;
    e.pid = pid;
    e.tid = tid;
    e.ts_ns = r.ts_rel_ns;
    // E's strings are empty: constructed from the views and moved in (assign() on an empty string
    // takes basic_string's general replace path, a tenth of the read's instructions).
    e.name = std::string(r.name);
    e.cat = std::string(r.cat);
    std::size_t class_at = r.args.size();
    for (std::size_t i = 0; i < r.args.size(); ++i) {
      if (key_is(r.args[i].key, "class") && r.args[i].kind == RawArg::Kind::kString) {
        class_at = i;
        break;
      }
    }
    const bool ours = class_at < r.args.size();
    bool classified = false;
    if (ours) {
      // Runs of events share their class: the previous answer is checked first.
      const std::string_view text = r.args[class_at].s;
      if (last_class_known_ && text == last_class_text_) {
        e.cls = last_class_;
        classified = true;
      } else {
        last_class_text_.assign(text);
        last_class_known_ = classified = parse_event_class(last_class_text_, &e.cls);
        last_class_ = e.cls;
      }
    }
    if (!classified) e.cls = classify(r.cat, r.name);
    e.args.reserve(ours ? r.args.size() - class_at - 1 : r.args.size());
    for (std::size_t i = 0; i < r.args.size(); ++i) {
      const RawArg& a = r.args[i];
      const bool reserved_zone = ours ? i <= class_at : true;
      if (reserved_zone && a.kind == RawArg::Kind::kInt) {
        if (key_is(a.key, "correlation")) {
          e.correlation = a.i;
          continue;
        }
        if (key_is(a.key, "op_id") && ours) {
          e.op_id = a.i;
          continue;
        }
        if (key_is(a.key, "device")) {
          if (is_gpu_work(e.cls) && fits_i32(a.i)) device_of_pid_.try_emplace(pid, int(a.i));
          continue;
        }
        if (key_is(a.key, "stream")) continue;
      }
      if (ours && i == class_at) continue;
      Arg out;
      out.key = std::string(a.key);
      switch (a.kind) {
        case RawArg::Kind::kInt:
          out.value = a.i;
          break;
        case RawArg::Kind::kDouble:
          out.value = a.d;
          break;
        case RawArg::Kind::kString:
          out.value = std::string(a.s);
          break;
        case RawArg::Kind::kRaw:
          out.value = a.raw;
          break;
      }
      e.args.push_back(std::move(out));
    }
  }

  // Built in place at the end of the event list (no temporary to move).
  void add_event(std::int32_t pid, std::int32_t tid, TimeNs ts_rel, TimeNs dur) {
    TraceEvent& e = trace_.events.emplace_back();
    fill_event(e, pid, tid);
    e.ts_ns = ts_rel;
    e.dur_ns = dur;
    count_event(e);
  }

  void commit_event(TraceEvent&& e) {
    trace_.events.push_back(std::move(e));
    count_event(trace_.events.back());
  }

  void count_event(const TraceEvent& e) {
    const std::uint64_t lane = lane_key(e.pid, e.tid);
    if (tally_ == nullptr || lane != tally_lane_) {  // events come in runs on one lane
      tally_ = &tallies_[lane];
      tally_lane_ = lane;
      seen_pid(e.pid);
    }
    tally_->add(e.cls, e.dur_ns);
    ++st_.events;
  }

  void seen_pid(std::int32_t pid) {
    if (pid_seen_.emplace(pid, pid_seen_.size()).second) pid_order_.push_back(pid);
  }

  void add_counter(std::int32_t pid) {
    const Record& r = rec_;
    if (!r.has_pid || !r.has_ts) {
      skip(where() + ": counter without pid or ts");
      return;
    }
    CounterSample c;
    c.pid = pid;
    c.name.assign(r.name);
    c.ts_ns = r.ts_rel_ns;
    for (const RawArg& a : r.args) {
      if (a.kind == RawArg::Kind::kInt) {
        c.values.emplace_back(std::string(a.key), static_cast<double>(a.i));
      } else if (a.kind == RawArg::Kind::kDouble) {
        c.values.emplace_back(std::string(a.key), a.d);
      }
    }
    trace_.counters.push_back(std::move(c));
    ++st_.counters;
  }

  // Kineto's profile_memory=True record of one allocation or free (docs/trace-format.md, "Reading
  // PyTorch-profiler traces"): args "Device Type" (1: CUDA; 0: host memory, not in our model),
  // "Device Id", "Total Allocated" and "Total Reserved" (bytes, the caching allocator's totals
  // after the event). A CUDA one becomes samples of that GPU's counters, on the pid Kineto gives
  // the GPU's device events (the device index): "memory" {"allocated"} and "memory reserved"
  // {"reserved"}, which the summary, tracediff and simview's memory view read.
  void add_memory_instant() {
    const Record& r = rec_;
    std::int64_t type = -1, device = -1;
    double allocated = -1, reserved = -1;
    const auto number = [](const RawArg& a, double* out) {
      if (a.kind == RawArg::Kind::kInt) *out = static_cast<double>(a.i);
      if (a.kind == RawArg::Kind::kDouble) *out = a.d;
    };
    for (const RawArg& a : r.args) {
      if (a.kind == RawArg::Kind::kInt && a.key == "Device Type") type = a.i;
      if (a.kind == RawArg::Kind::kInt && a.key == "Device Id") device = a.i;
      if (a.key == "Total Allocated") number(a, &allocated);
      if (a.key == "Total Reserved") number(a, &reserved);
    }
    if (type != 1 || device < 0 || !fits_i32(device) || allocated < 0 || !r.has_ts) {
      ++st_.ignored_records;
      return;
    }
    const auto pid = static_cast<std::int32_t>(device);
    device_of_pid_.try_emplace(pid, static_cast<int>(device));
    seen_pid(pid);  // the GPU gets a process even when no device event of it was recorded
    CounterSample c;
    c.pid = pid;
    c.name = "memory";
    c.ts_ns = r.ts_rel_ns;
    c.values.emplace_back("allocated", allocated);
    trace_.counters.push_back(std::move(c));
    if (reserved >= 0) {
      CounterSample rc;
      rc.pid = pid;
      rc.name = kReservedMemoryCounter;
      rc.ts_ns = r.ts_rel_ns;
      rc.values.emplace_back("reserved", reserved);
      trace_.counters.push_back(std::move(rc));
      ++st_.counters;
    }
    ++st_.counters;
    ++st_.memory_events;
  }

  void add_flow_end(char ph, std::int32_t pid, std::int32_t tid) {
    const Record& r = rec_;
    if (!r.has_id || r.bad_id || !r.has_ts) {
      skip(where() + ": flow event without an integer id or ts");
      return;
    }
    FlowEnd f;
    f.cat = intern_flow_string(r.cat, &last_flow_cat_);
    f.name = intern_flow_string(r.name, &last_flow_name_);
    f.id = r.id;
    f.pid = pid;
    f.tid = tid;
    f.ts_rel_ns = r.ts_rel_ns;
    f.order = index_;
    (ph == 's' ? flow_starts_ : flow_finishes_).push_back(std::move(f));
  }

  // Flow ends share a few names and categories ("ac2g"): each distinct string is kept once. LAST
  // caches the previous answer for this field, which is usually the same string again.
  std::uint32_t intern_flow_string(std::string_view v, std::uint32_t* last) {
    if (*last < flow_strings_.size() && flow_strings_[*last] == v) return *last;
    auto it = flow_string_ids_.find(v);
    if (it == flow_string_ids_.end()) {
      flow_strings_.emplace_back(v);  // a deque: the view below stays valid
      it = flow_string_ids_
               .emplace(std::string_view(flow_strings_.back()),
                        static_cast<std::uint32_t>(flow_strings_.size() - 1))
               .first;
    }
    *last = it->second;
    return it->second;
  }

  struct ProcSlot {
    ProcessInfo info;
    bool labelled_gpu = false;  // gpu set by our args or a "GPU N" label
  };
  struct ThreadSlot {
    ThreadInfo info;
    bool role_known = false;
  };

  ProcSlot& proc(std::int32_t pid) {
    auto [it, fresh] = proc_index_.try_emplace(pid, procs_.size());
    if (fresh) {
      ProcSlot s;
      s.info.pid = pid;
      s.info.sort_index = pid;
      procs_.push_back(s);
    }
    return procs_[it->second];
  }
  ThreadSlot& thread(std::int32_t pid, std::int32_t tid) {
    auto [it, fresh] = thread_index_.try_emplace(lane_key(pid, tid), threads_.size());
    if (fresh) {
      ThreadSlot s;
      s.info.pid = pid;
      s.info.tid = tid;
      s.info.sort_index = tid;
      threads_.push_back(s);
    }
    return threads_[it->second];
  }

  static bool int_arg(const Record& r, std::string_view k, std::int64_t* out) {
    const RawArg* a = r.arg(k);
    if (a == nullptr || a->kind != RawArg::Kind::kInt) return false;
    *out = a->i;
    return true;
  }

  void add_metadata(std::int32_t pid, std::int32_t tid) {
    const Record& r = rec_;
    std::int64_t n = 0;
    if (r.name == "process_name") {
      ProcSlot& p = proc(pid);
      if (const RawArg* a = r.arg("name"); a != nullptr && a->kind == RawArg::Kind::kString) {
        p.info.name.assign(a->s);
      }
      if (int_arg(r, "rank", &n) && fits_i32(n)) p.info.rank = int(n);
      if (int_arg(r, "node", &n) && fits_i32(n)) p.info.node = int(n);
      if (int_arg(r, "gpu", &n) && fits_i32(n)) {
        p.info.gpu = int(n);
        p.labelled_gpu = true;
      }
      if (int_arg(r, "capacity_bytes", &n)) p.info.capacity_bytes = n;
    } else if (r.name == "process_sort_index") {
      if (int_arg(r, "sort_index", &n) && fits_i32(n)) proc(pid).info.sort_index = int(n);
    } else if (r.name == "process_labels") {
      // Kineto labels GPU processes "GPU 3" and the host process "CPU".
      const RawArg* a = r.arg("labels");
      if (a != nullptr && a->kind == RawArg::Kind::kString && a->s.substr(0, 4) == "GPU ") {
        int g = -1;
        const std::string_view digits = a->s.substr(4);
        if (std::from_chars(digits.data(), digits.data() + digits.size(), g).ec == std::errc()) {
          ProcSlot& p = proc(pid);
          if (!p.labelled_gpu) p.info.gpu = g;
          p.labelled_gpu = true;
        }
      }
    } else if (r.name == "thread_name") {
      ThreadSlot& t = thread(pid, tid);
      if (const RawArg* a = r.arg("name"); a != nullptr && a->kind == RawArg::Kind::kString) {
        t.info.name.assign(a->s);
      }
      if (const RawArg* a = r.arg("role"); a != nullptr && a->kind == RawArg::Kind::kString) {
        t.role_known = parse_lane_role(std::string(a->s), &t.info.role);
      }
    } else if (r.name == "thread_sort_index") {
      if (int_arg(r, "sort_index", &n) && fits_i32(n)) thread(pid, tid).info.sort_index = int(n);
    } else {
      ++st_.ignored_records;  // process_labels "CPU", process_uptime, …
    }
  }

  // Pairs flow starts and finishes by (cat, id), k-th start with k-th finish in file order;
  // flows come out in the order of their starts. Categories compare by their interned index: any
  // consistent order of (cat, id) groups gives the same pairs.
  void pair_flows() {
    auto by_key = [](const FlowEnd& a, const FlowEnd& b) {
      if (a.cat != b.cat) return a.cat < b.cat;
      if (a.id != b.id) return a.id < b.id;
      return a.order < b.order;
    };
    // Usually already in key order (ids increase through the file): then no sort is needed.
    if (!std::is_sorted(flow_starts_.begin(), flow_starts_.end(), by_key)) {
      std::sort(flow_starts_.begin(), flow_starts_.end(), by_key);
    }
    if (!std::is_sorted(flow_finishes_.begin(), flow_finishes_.end(), by_key)) {
      std::sort(flow_finishes_.begin(), flow_finishes_.end(), by_key);
    }
    const std::vector<FlowEnd>& s = flow_starts_;
    const std::vector<FlowEnd>& f = flow_finishes_;
    std::vector<std::pair<const FlowEnd*, const FlowEnd*>> pairs;
    pairs.reserve(std::min(s.size(), f.size()));
    std::size_t i = 0, j = 0;
    while (i < s.size() && j < f.size()) {
      const bool same = s[i].cat == f[j].cat && s[i].id == f[j].id;
      if (same) {
        pairs.emplace_back(&s[i++], &f[j++]);
      } else if (by_key(s[i], f[j])) {
        ++i;
      } else {
        ++j;
      }
    }
    st_.ignored_records += static_cast<std::int64_t>(s.size() + f.size() - 2 * pairs.size());
    const auto by_start = [](const auto& a, const auto& b) {
      return a.first->order < b.first->order;
    };
    if (!std::is_sorted(pairs.begin(), pairs.end(), by_start)) {
      std::sort(pairs.begin(), pairs.end(), by_start);
    }
    trace_.flows.reserve(trace_.flows.size() + pairs.size());
    advise_huge_pages(trace_.flows);
    for (const auto& [a, b] : pairs) {
      FlowEvent& fe = trace_.flows.emplace_back();
      fe.id = a->id;
      fe.name = flow_strings_[a->name];
      fe.cat = flow_strings_[a->cat];
      fe.from_pid = a->pid;
      fe.from_tid = a->tid;
      fe.from_ts_ns = a->ts_rel_ns;
      fe.to_pid = b->pid;
      fe.to_tid = b->tid;
      fe.to_ts_ns = b->ts_rel_ns;
    }
    st_.flows = static_cast<std::int64_t>(pairs.size());
  }

  void finish() {
    for (auto& [key, stack] : open_) {
      for (std::size_t k = 0; k < stack.size(); ++k) skip("begin event without a matching end");
    }
    pair_flows();
    const bool ours = st_.clustersim_file;
    // A trace not written by us: every pid and lane with events gets an entry, roles and GPUs are
    // inferred, ranks come from distributedInfo (a Kineto file is one rank's).
    if (!ours) {
      for (const std::int32_t pid : pid_order_) proc(pid);
      std::vector<std::uint64_t> lanes;
      for (const auto& [key, tally] : tallies_) lanes.push_back(key);
      std::sort(lanes.begin(), lanes.end(), [](std::uint64_t a, std::uint64_t b) {
        return std::pair(std::int32_t(a >> 32), std::int32_t(a)) <
               std::pair(std::int32_t(b >> 32), std::int32_t(b));
      });
      for (const std::uint64_t key : lanes) {
        thread(static_cast<std::int32_t>(key >> 32), static_cast<std::int32_t>(key));
      }
      for (ProcSlot& p : procs_) {
        if (!p.labelled_gpu) {
          if (const auto it = device_of_pid_.find(p.info.pid); it != device_of_pid_.end()) {
            p.info.gpu = it->second;
          }
        }
        if (p.info.rank < 0) p.info.rank = trace_.rank;
        if (p.info.capacity_bytes == 0 && p.info.gpu >= 0) {
          p.info.capacity_bytes = device_memory(p.info.gpu);
        }
      }
    }
    for (ThreadSlot& t : threads_) {
      if (t.role_known) continue;
      const auto it = tallies_.find(lane_key(t.info.pid, t.info.tid));
      t.info.role = it == tallies_.end() ? LaneRole::kOther : infer_lane_role(it->second);
    }
    for (ProcSlot& p : procs_) trace_.processes.push_back(std::move(p.info));
    for (ThreadSlot& t : threads_) trace_.threads.push_back(std::move(t.info));
    // Relative → absolute: the base may come after traceEvents (Kineto writes it last).
    const TimeNs base = trace_.base_ns;
    if (base != 0) {  // our files have base 0: then nothing to add (saves a pass over the events)
      for (TraceEvent& e : trace_.events) e.ts_ns += base;
      for (CounterSample& c : trace_.counters) c.ts_ns += base;
      for (FlowEvent& f : trace_.flows) {
        f.from_ts_ns += base;
        f.to_ts_ns += base;
      }
    }
    if (!ours) rebase_far_timestamps();
  }

  // Written µs are exact only while |ts − base| < 2^51 ns (see us_to_ns_checked). Kineto's
  // relative timestamps can exceed that (4.4e12 µs after its base), so a foreign trace whose
  // events lie that far from its base gets the earliest timestamp (floored to a µs) as base: the
  // absolute times do not change, and what we write from it reads back exactly.
  void rebase_far_timestamps() {
    constexpr TimeNs kFar = TimeNs{1} << 50;
    TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
    const auto see = [&](TimeNs t) {
      lo = std::min(lo, t);
      hi = std::max(hi, t);
    };
    for (const TraceEvent& e : trace_.events) see(e.ts_ns);
    for (const CounterSample& c : trace_.counters) see(c.ts_ns);
    for (const FlowEvent& f : trace_.flows) {
      see(f.from_ts_ns);
      see(f.to_ts_ns);
    }
    if (lo > hi) return;
    const TimeNs base = trace_.base_ns;
    const bool far =
        lo - base >= kFar || base - lo >= kFar || hi - base >= kFar || base - hi >= kFar;
    if (far) trace_.base_ns = lo - ((lo % 1000) + 1000) % 1000;
  }

  // deviceProperties[].totalGlobalMem of the device with this id (Kineto), 0 when unknown.
  Bytes device_memory(int gpu) const {
    const auto it = trace_.metadata.find("deviceProperties");
    if (it == trace_.metadata.end() || !it->is_array()) return 0;
    for (const auto& d : *it) {
      if (d.is_object() && d.value("id", -1) == gpu) {
        const auto mem = d.find("totalGlobalMem");
        if (mem != d.end() && mem->is_number_integer()) return mem->get<Bytes>();
      }
    }
    return 0;
  }

  std::string file_;
  Scanner sc_;
  ReadStats* stats_;
  ReadStats st_;
  dom::parser parser_;
  std::string batch_;                       // "[elem,elem,…]" being gathered
  std::vector<std::size_t> batch_starts_;   // absolute byte offset of each element in the input
  std::vector<std::size_t> batch_offsets_;  // offset of each element in batch_
  Trace trace_;
  Record rec_;
  std::string last_class_text_;  // the previous "class" arg, when it parsed, and its class
  EventClass last_class_ = EventClass::kOther;
  bool last_class_known_ = false;
  std::size_t index_ = 0;  // traceEvents elements dispatched
  bool saw_events_ = false;
  std::vector<ProcSlot> procs_;
  std::unordered_map<std::int32_t, std::size_t> proc_index_;
  std::vector<ThreadSlot> threads_;
  std::unordered_map<std::uint64_t, std::size_t> thread_index_;
  std::unordered_map<std::uint64_t, ClassTally> tallies_;  // node-based: pointers stay valid
  ClassTally* tally_ = nullptr;
  std::uint64_t tally_lane_ = 0;
  std::unordered_map<std::int32_t, std::size_t> pid_seen_;
  std::vector<std::int32_t> pid_order_;
  std::unordered_map<std::int32_t, int> device_of_pid_;
  std::unordered_map<std::uint64_t, std::vector<TraceEvent>> open_;
  std::vector<FlowEnd> flow_starts_, flow_finishes_;
  std::deque<std::string> flow_strings_;  // distinct flow names and categories
  std::unordered_map<std::string_view, std::uint32_t> flow_string_ids_;
  std::uint32_t last_flow_cat_ = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t last_flow_name_ = std::numeric_limits<std::uint32_t>::max();
};

}  // namespace

// [SECTION] Entry points -----------------------------------------------------------------------

Trace read_chrome_trace_file(const std::string& path, ReadStats* stats) {
  const std::unique_ptr<Source> src = open_source(path);
  return Reader(path, *src, stats).run();
}

Trace read_chrome_trace_string(const std::string& json, const std::string& name_for_errors,
                               ReadStats* stats) {
  StringSource src(json);
  return Reader(name_for_errors, src, stats).run();
}

}  // namespace csim::prof
