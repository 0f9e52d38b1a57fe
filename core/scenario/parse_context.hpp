// The scenario parser's reading context (core/scenario/scenario_parser.cpp and the strategy
// validators, core/parse_parallel*.cpp): where each value came from (file or --set), warnings, and
// Obj, a JSON object checked against its valid keys whose typed getters name the JSON path in every
// error. Internal to core/: not part of the parser's interface (core/scenario/scenario_parser.hpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_diagnostics.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/scenario_parser.hpp"

namespace csim::core::parse {

using json = nlohmann::json;
using i64 = std::int64_t;

struct Override {
  std::string path;                         // "strategy.kind"
  std::string origin;                       // "--set strategy.kind"
  const FileOverride* from_file = nullptr;  // a value another file gives (a device profile)
};

inline bool path_under(const std::string& path, const std::string& prefix) {
  if (path.size() < prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '.' || path[prefix.size()] == '[';
}

struct Ctx {
  std::string file;
  std::vector<Override> overrides;
  const json* doc = nullptr;  // the document after the overrides: which keys the user gave
  std::string cluster_file;   // "cluster": "FILE" inlined: where the cluster.* keys came from
  std::vector<std::string> warnings;
  ScenarioLimits limits;  // the top-level "limits" object, read first (docs/limits.md)

  // The origin of the value at `path`: the last --set that wrote it, inside it or above it,
  // otherwise the file.
  std::string origin(const std::string& path) const {
    const Override* o = last_override(path);
    return o ? file + " (" + o->origin + ")" : file;
  }
  // The last override that wrote the value at `path` (inside it or above it); nullptr: the file.
  const Override* last_override(const std::string& path) const {
    if (path.empty()) return nullptr;
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
      if (path_under(path, it->path) || path_under(it->path, path)) return &*it;
    return nullptr;
  }
  // A value another file gave is named by that file and its place there (FileOverride).
  [[noreturn]] void fail(const std::string& path, const std::string& message,
                         const std::string& hint = {}) const {
    const Override* o = last_override(path);
    if (o && o->from_file) throw_in_file(*o->from_file, path, message, hint);
    throw InputError(origin(path), path, message, hint);
  }
  [[noreturn]] static void throw_in_file(const FileOverride& f, const std::string& path,
                                         const std::string& message, const std::string& hint) {
    const std::string rest =
        path.compare(0, f.path.size(), f.path) == 0 ? path.substr(f.path.size()) : std::string();
    throw InputError(f.file, f.json_path + rest, message, hint.empty() ? f.hint : hint);
  }
  // Values at several paths that cannot hold together: the error names every key, each with
  // where its value came from ("model.gpt.layers (--set), strategy.pp (file)"), not just the
  // last one read or set.
  // A key no one gave is "(default)" (its default or a value derived from other keys), so that
  // the message never blames the file for a key it does not hold.
  [[noreturn]] void fail_conflict(const std::vector<std::string>& paths, const std::string& message,
                                  const std::string& hint = {}) const {
    std::string keys;
    for (const std::string& p : paths)
      keys += (keys.empty() ? "" : ", ") + p + " (" + source_of(p) + ")";
    throw InputError(file, "conflicting keys " + keys, message, hint);
  }
  // Where the value at `path` came from: the last --set that wrote it, else the file (the
  // cluster file for cluster.* keys it holds), else "default" when no one gave it.
  std::string source_of(const std::string& path) const {
    for (auto it = overrides.rbegin(); it != overrides.rend(); ++it)
      if (path_under(path, it->path) || path_under(it->path, path)) return it->origin;
    if (doc != nullptr && find_at_path(*doc, path) == nullptr) return "default";
    if (!cluster_file.empty() && path_under(path, "cluster")) return cluster_file;
    return "file";
  }
  void warn(const std::string& path, const std::string& message) {
    warnings.push_back(path.empty() ? message : path + ": " + message);
  }
  // A size past a resource limit (docs/limits.md): names the limit and how to raise it.
  [[noreturn]] void over_limit(const std::string& path, const std::string& what, i64 limit,
                               const std::string& limit_key, i64 ceiling,
                               const std::string& why = {}) const {
    const std::string raise = limit < ceiling
                                  ? "raise it with \"limits\": {\"" + limit_key +
                                        "\": N} in the scenario or --set limits." + limit_key +
                                        "=N (at most " + std::to_string(ceiling) + ")"
                                  : "that is the hard ceiling of limits." + limit_key;
    fail(path,
         what + " exceeds the limit of " + std::to_string(limit) + " (limits." + limit_key +
             ", docs/limits.md)" + (why.empty() ? "" : ": " + why),
         raise);
  }
};

// "1..16"; an upper bound of 10^18 or more stands for "no bound": ">= 0".
inline std::string range_text(double lo, double hi) {
  std::ostringstream os;
  if (hi >= 1e18)
    os << ">= " << lo;
  else
    os << lo << ".." << hi;
  return os.str();
}

inline std::string num_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// A JSON object checked against its list of valid keys on construction; typed getters check the
// type and range of each value and name its path in every error.
class Obj {
 public:
  Obj(Ctx& ctx, const json& j, std::string path, std::vector<std::string> keys)
      : ctx_(ctx), j_(j), path_(std::move(path)), keys_(std::move(keys)) {
    if (!j_.is_object()) {
      ctx_.fail(path_.empty() ? std::string() : path_,
                "expected an object, got " + describe_value(j_), type_hint("object", j_));
    }
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      bool known = false;
      for (const std::string& k : keys_) known = known || k == it.key();
      if (!known) {
        ctx_.fail(at(it.key()), "unknown key '" + it.key() + "'",
                  unknown_key_hint(it.key(), keys_));
      }
    }
  }

  const std::string& path() const { return path_; }
  std::string at(const std::string& key) const { return child_path(path_, key); }
  bool has(const std::string& key) const { return j_.contains(key); }
  const json& raw(const std::string& key) const { return j_.at(key); }

  const json& require(const std::string& key) const {
    if (!j_.contains(key)) {
      ctx_.fail(at(key), "missing required key '" + key + "'",
                "add \"" + key + "\" (docs/scenario.md lists every key)");
    }
    return j_.at(key);
  }

  i64 integer(const std::string& key, i64 def, i64 lo, i64 hi) const {
    if (!has(key)) return def;
    return to_int(j_.at(key), at(key), lo, hi);
  }
  i64 req_integer(const std::string& key, i64 lo, i64 hi) const {
    return to_int(require(key), at(key), lo, hi);
  }
  double number(const std::string& key, double def, double lo, double hi) const {
    if (!has(key)) return def;
    return to_num(j_.at(key), at(key), lo, hi);
  }
  double req_number(const std::string& key, double lo, double hi) const {
    return to_num(require(key), at(key), lo, hi);
  }
  bool boolean(const std::string& key, bool def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    if (!v.is_boolean())
      ctx_.fail(at(key), "expected true or false, got " + describe_value(v),
                type_hint("boolean", v));
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    if (!v.is_string())
      ctx_.fail(at(key), "expected a string, got " + describe_value(v), type_hint("string", v));
    return v.get<std::string>();
  }
  // One of `choices`; returns its index (def when absent).
  int choice(const std::string& key, const std::vector<std::string>& choices, int def) const {
    if (!has(key)) return def;
    return to_choice(j_.at(key), at(key), choices);
  }

  int to_choice(const json& v, const std::string& path,
                const std::vector<std::string>& choices) const {
    std::string list;
    for (std::size_t i = 0; i < choices.size(); ++i) list += (i ? ", " : "") + choices[i];
    if (!v.is_string())
      ctx_.fail(path, "expected one of " + list + ", got " + describe_value(v),
                "write one of them in quotes, e.g. \"" + choices.front() + "\"");
    const std::string s = v.get<std::string>();
    for (std::size_t i = 0; i < choices.size(); ++i) {
      if (choices[i] == s) return static_cast<int>(i);
    }
    const std::string near = nearest_candidate(s, choices);
    ctx_.fail(path, "'" + s + "' is not one of " + list,
              near.empty() ? "valid values: " + list : "did you mean " + near + "?");
  }

  i64 to_int(const json& v, const std::string& path, i64 lo, i64 hi) const {
    i64 x = 0;
    if (v.is_number_integer() && !v.is_number_unsigned()) {
      x = v.get<i64>();
    } else if (v.is_number_unsigned()) {
      const std::uint64_t u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(hi))
        out_of_range(path, v.dump(), static_cast<double>(u), lo, hi);
      x = static_cast<i64>(u);
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::floor(d) != d)
        ctx_.fail(path, "expected an integer, got " + describe_value(v), type_hint("integer", v));
      if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
        out_of_range(path, v.dump(), d, lo, hi);
      }
      x = static_cast<i64>(d);
    } else {
      ctx_.fail(path, "expected an integer, got " + describe_value(v), type_hint("integer", v));
    }
    if (x < lo || x > hi) out_of_range(path, v.dump(), static_cast<double>(x), lo, hi);
    return x;
  }

  double to_num(const json& v, const std::string& path, double lo, double hi) const {
    if (!v.is_number())
      ctx_.fail(path, "expected a number, got " + describe_value(v), type_hint("number", v));
    const double x = v.get<double>();
    if (!(x >= lo && x <= hi)) out_of_range(path, v.dump(), x, lo, hi);
    return x;
  }

 private:
  [[noreturn]] void out_of_range(const std::string& path, const std::string& got, double value,
                                 double lo, double hi) const {
    ctx_.fail(path, got + " is out of range: must be " + range_text(lo, hi),
              range_hint(value, lo, hi) + "; docs/scenario.md gives each key's range");
  }
  Ctx& ctx_;
  const json& j_;
  std::string path_;
  std::vector<std::string> keys_;
};

// An integer key whose upper bound is a resource limit (docs/limits.md): a value past `limit`,
// however huge (1e300 included), is refused with the limit and how to raise it.
inline i64 limited_int(Ctx& ctx, const Obj& o, const std::string& key, i64 def, i64 lo, i64 limit,
                       const std::string& limit_key, i64 ceiling, const std::string& unit) {
  if (!o.has(key)) return def;
  const json& v = o.raw(key);
  if (v.is_number() && v.get<double>() > static_cast<double>(limit)) {
    ctx.over_limit(o.at(key), v.dump() + " " + unit, limit, limit_key, ceiling);
  }
  return o.to_int(v, o.at(key), lo, limit);
}

inline const json& require_array(Ctx& ctx, const json& v, const std::string& path, bool non_empty) {
  if (!v.is_array())
    ctx.fail(path, "expected an array, got " + describe_value(v), type_hint("array", v));
  if (non_empty && v.empty())
    ctx.fail(path, "must not be empty", "give at least one element (docs/scenario.md)");
  return v;
}

inline constexpr double kHuge = 1e18;

// An empty object to build a key-less Obj on, for its typed converters (to_int, to_choice).
inline const json& empty_object() {
  static const json kEmpty = json::object();
  return kEmpty;
}

}  // namespace csim::core::parse
