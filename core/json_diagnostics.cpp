// JSON diagnostics (core/json_diagnostics.hpp).
#include "core/json_diagnostics.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace csim::core {

LineCol line_col_at(std::string_view text, std::size_t offset) {
  LineCol lc;
  const std::size_t end = std::min(offset, text.size());
  for (std::size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++lc.line;
      lc.column = 1;
    } else {
      ++lc.column;
    }
  }
  return lc;
}

namespace {

// Tracks the JSON path while nlohmann's SAX-style callback walks the document, so a duplicate key
// can be reported at its path. Frames: an object (current key) or an array (next index).
struct PathTracker {
  struct Frame {
    bool is_array = false;
    std::size_t next_index = 0;
    std::string key;
    std::set<std::string> keys_seen;
    std::string path;  // path of this container
  };
  std::vector<Frame> stack;

  // Path of the element about to start inside the top container (and advance array indices).
  std::string element_path() {
    if (stack.empty()) return "";
    Frame& f = stack.back();
    if (f.is_array) return index_path(f.path, f.next_index++);
    return child_path(f.path, f.key);
  }
};

// Drops the "[json.exception.parse_error.101] parse error at line 1, column 2: " prefix of
// nlohmann's message: we print our own position.
std::string syntax_detail(const std::string& what) {
  const std::string marker = "syntax error";
  const std::size_t pos = what.find(marker);
  if (pos != std::string::npos) return what.substr(pos);
  const std::size_t colon = what.rfind(": ");
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

}  // namespace

nlohmann::json parse_json_strict(const std::string& text, const std::string& file) {
  // Before the parser: each level costs the tracker a path string and a copy of the document a
  // recursion, so 200,000 nested arrays would take gigabytes (docs/limits.md, "JSON nesting").
  check_json_depth(text, file);
  PathTracker tracker;
  using Event = nlohmann::json::parse_event_t;
  auto callback = [&](int /*depth*/, Event event, nlohmann::json& parsed) -> bool {
    switch (event) {
      case Event::object_start:
      case Event::array_start: {
        PathTracker::Frame f;
        f.is_array = event == Event::array_start;
        f.path = tracker.element_path();
        tracker.stack.push_back(std::move(f));
        break;
      }
      case Event::object_end:
      case Event::array_end:
        if (!tracker.stack.empty()) tracker.stack.pop_back();
        break;
      case Event::key: {
        PathTracker::Frame& f = tracker.stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys_seen.insert(f.key).second) {
          throw InputError(file, child_path(f.path, f.key), "duplicate key '" + f.key + "'",
                           "JSON objects must not repeat a key; keep one");
        }
        break;
      }
      case Event::value:
        if (!tracker.stack.empty() && tracker.stack.back().is_array) tracker.element_path();
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, callback, /*allow_exceptions=*/true,
                                 /*ignore_comments=*/false);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based index of the last byte read, i.e. the offending one.
    const std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    const LineCol lc = line_col_at(text, offset);
    throw InputError(file, "",
                     "malformed JSON at line " + std::to_string(lc.line) + ", column " +
                         std::to_string(lc.column) + ": " + syntax_detail(e.what()),
                     "check for a missing comma, quote or bracket just before that position "
                     "(comments and trailing commas are not JSON)");
  } catch (const nlohmann::json::out_of_range& e) {
    // Found by fuzzing (docs/fuzzing.md; tests/fuzz_regressions/fuzz_scenario/): a number beyond
    // a double's range, e.g. 1e400, is out_of_range 406 rather than a parse_error, and escaped.
    std::string what = e.what();  // "[json.exception.out_of_range.406] number overflow ..."
    if (const std::size_t p = what.find("] "); p != std::string::npos) what.erase(0, p + 2);
    throw InputError(file, "", "malformed JSON: " + what,
                     "numbers must lie within a double's range (about 1.8e308)");
  }
}

int edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1, 0));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string nearest_candidate(std::string_view word, const std::vector<std::string>& candidates) {
  const int limit = std::max(2, static_cast<int>(word.size()) / 3);
  int best = limit + 1;
  std::string best_name;
  for (const std::string& c : candidates) {
    const int d = edit_distance(word, c);
    if (d < best) {
      best = d;
      best_name = c;
    }
  }
  return best_name;
}

std::string unknown_key_hint(std::string_view key, const std::vector<std::string>& valid) {
  const std::string near = nearest_candidate(key, valid);
  if (!near.empty()) return "did you mean " + near + "?";
  std::string s = "valid keys: ";
  for (std::size_t i = 0; i < valid.size(); ++i) s += (i ? ", " : "") + valid[i];
  return s;
}

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string index_path(const std::string& parent, std::size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

namespace {

// A number written as a JSON string ("128", " 2.5"): its text without the blanks, else "".
std::string number_in_string(const nlohmann::json& v) {
  if (!v.is_string()) return "";
  std::string s = v.get<std::string>();
  const std::size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  if (a == std::string::npos) return "";
  s = s.substr(a, b - a + 1);
  const nlohmann::json n = nlohmann::json::parse(s, nullptr, /*allow_exceptions=*/false);
  return !n.is_discarded() && n.is_number() ? s : "";
}

std::string bound_text(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

}  // namespace

std::string type_hint(std::string_view expected, const nlohmann::json& got) {
  const std::string quoted = number_in_string(got);
  if (expected == "integer") {
    if (!quoted.empty()) return "write the number without quotes: " + quoted;
    if (got.is_number_float()) {
      const double d = got.get<double>();
      return "a count is a whole number, e.g. " + bound_text(std::floor(d)) + " or " +
             bound_text(std::ceil(d));
    }
    return "write a whole number without quotes, e.g. 8";
  }
  if (expected == "number") {
    if (!quoted.empty()) return "write the number without quotes: " + quoted;
    return "write a number without quotes, e.g. 2.5";
  }
  if (expected == "boolean") {
    if (got.is_number()) return "write true or false, not 1 or 0";
    return "write true or false without quotes";
  }
  if (expected == "string") {
    if (got.is_number() || got.is_boolean()) return "write it in quotes: \"" + got.dump() + "\"";
    return "write a string in quotes, e.g. \"name\"";
  }
  if (expected == "object")
    return "write an object {\"key\": value, ...}; docs/scenario.md lists its keys";
  if (expected == "array") return "write an array [a, b, ...]; docs/scenario.md lists its elements";
  return "see docs/scenario.md";
}

std::string range_hint(double value, double lo, double hi) {
  return value < lo ? "use at least " + bound_text(lo) : "use at most " + bound_text(hi);
}

const nlohmann::json* find_at_path(const nlohmann::json& doc, const std::string& path) {
  const nlohmann::json* cur = &doc;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '[') {
      const std::size_t close = path.find(']', i);
      if (close == std::string::npos || !cur->is_array()) return nullptr;
      const std::size_t index = std::stoul(path.substr(i + 1, close - i - 1));
      if (index >= cur->size()) return nullptr;
      cur = &(*cur)[index];
      i = close + 1;
      continue;
    }
    if (path[i] == '.') ++i;
    const std::size_t end = path.find_first_of(".[", i);
    const std::string key = path.substr(i, end == std::string::npos ? std::string::npos : end - i);
    if (!cur->is_object()) return nullptr;
    const auto it = cur->find(key);
    if (it == cur->end()) return nullptr;
    cur = &*it;
    i = end == std::string::npos ? path.size() : end;
  }
  return cur;
}

std::string describe_value(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return std::string("boolean ") + (v.get<bool>() ? "true" : "false");
    case nlohmann::json::value_t::string: {
      std::string s = v.get<std::string>();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return "string \"" + s + "\"";
    }
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return "number " + v.dump();
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    default:
      return "a value";
  }
}

}  // namespace csim::core
