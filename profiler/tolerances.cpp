// Tolerances for tracediff: the defaults, the tolerance file and wildcard matching.
// Format and defaults: docs/tracediff.md "Tolerances" and "Tolerance file".
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"
#include "core/units.hpp"
#include "profiler/trace_diff.hpp"

namespace csim::prof {
namespace {

bool parse_double(const std::string& s, double* out, std::size_t* used) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno == ERANGE || !std::isfinite(v)) return false;
  *out = v;
  *used = static_cast<std::size_t>(end - s.c_str());
  return true;
}

}  // namespace

bool parse_percent(const std::string& text, double* out) {
  std::string s = text;
  if (!s.empty() && s.back() == '%') s.pop_back();
  double v = 0;
  std::size_t used = 0;
  if (!parse_double(s, &v, &used) || used != s.size() || v < 0) return false;
  *out = v / 100.0;
  return true;
}

bool parse_quantity(const std::string& text, double* out) {
  double v = 0;
  std::size_t used = 0;
  if (!parse_double(text, &v, &used) || v < 0) return false;
  const std::string unit = text.substr(used);
  static const std::pair<const char*, double> kUnits[] = {{"", 1.0},
                                                          {"ns", 1e-9},
                                                          {"us", 1e-6},
                                                          {"\xc2\xb5s", 1e-6},  // µs
                                                          {"ms", 1e-3},
                                                          {"s", 1.0},
                                                          {"B", 1.0},
                                                          {"KiB", static_cast<double>(kKiB)},
                                                          {"MiB", static_cast<double>(kMiB)},
                                                          {"GiB", static_cast<double>(kGiB)},
                                                          {"KB", 1e3},
                                                          {"MB", 1e6},
                                                          {"GB", 1e9},
                                                          {"%", 0.01},
                                                          {"x", 1.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      *out = v * scale;
      return true;
    }
  }
  return false;
}

// '*' matches any run of characters, '/' included; everything else literally.
bool glob_match(const std::string& pattern, const std::string& key) {
  std::size_t p = 0, k = 0, star = std::string::npos, mark = 0;
  while (k < key.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = k;
    } else if (p < pattern.size() && pattern[p] == key[k]) {
      ++p;
      ++k;
    } else if (star != std::string::npos) {
      p = star + 1;
      k = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<ToleranceRule> parse_tolerance_rules(const std::string& text, const std::string& file) {
  std::vector<ToleranceRule> rules;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (const std::size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    const std::string where = "line " + std::to_string(line_no);
    ToleranceRule r;
    r.pattern = word;
    r.line = line_no;
    bool any = false;
    while (words >> word) {
      any = true;
      if (word == "ignore") {
        r.ignore = true;
      } else if (word.rfind("min=", 0) == 0) {
        if (!parse_quantity(word.substr(4), &r.min_abs)) {
          throw InputError(file, where, "bad minimum '" + word + "'",
                           "write min=50us, min=2ms, min=64MiB, min=0.01 (no space around =)");
        }
        r.has_min = true;
      } else if (parse_percent(word, &r.rel)) {
        r.has_rel = true;
      } else {
        throw InputError(file, where, "cannot read '" + word + "'",
                         "each line is: METRIC-PATTERN [PERCENT%] [min=QUANTITY] [ignore]");
      }
    }
    if (!any) {
      throw InputError(file, where, "pattern '" + r.pattern + "' has no tolerance",
                       "add e.g. 5%, min=1ms or ignore after the pattern");
    }
    rules.push_back(std::move(r));
  }
  return rules;
}

Tolerance Tolerances::for_metric(const std::string& key, Unit unit) const {
  Tolerance t;
  t.rel = default_rel;
  // Default floors (docs/tracediff.md "Tolerances"): 1 µs for times, 1 MiB for memory.
  if (unit == Unit::kSeconds) t.min_abs = 1e-6;
  if (unit == Unit::kBytes) t.min_abs = static_cast<double>(kMiB);
  for (const ToleranceRule& r : rules) {
    if (!glob_match(r.pattern, key)) continue;
    if (r.has_rel) t.rel = r.rel;
    if (r.has_min) t.min_abs = r.min_abs;
    t.ignore = r.ignore;
  }
  return t;
}

}  // namespace csim::prof
