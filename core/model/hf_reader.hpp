// The reader of a Hugging Face config.json's fields (core/model/hf_config.cpp and the per-family
// readers beside it, e.g. core/model/hf_config_deepseek.cpp): typed getters whose errors name the
// file and the field, and the record of the fields read.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_diagnostics.hpp"

namespace csim::core {

// The config object with typed getters that name the file and the field in every error, and the
// set of fields read (the rest, outside the quiet list, become one warning).
class HfReader {
 public:
  HfReader(const nlohmann::json& j, const std::string& file) : j_(j), file_(file) {}

  [[noreturn]] void fail(const std::string& key, const std::string& message,
                         const std::string& hint = {}) const {
    throw InputError(file_, key, message, hint);
  }
  // Present and not null (transformers writes null for "not set": sliding_window, head_dim).
  bool given(const std::string& key) {
    used_.insert(key);
    return j_.contains(key) && !j_.at(key).is_null();
  }
  bool present(const std::string& key) {
    used_.insert(key);
    return j_.contains(key);
  }
  const nlohmann::json& at(const std::string& key) const { return j_.at(key); }
  // The first of `names` given; "" when none is.
  std::string pick(std::initializer_list<const char*> names) {
    std::string found;
    for (const char* n : names) {
      if (given(n) && found.empty()) found = n;
    }
    return found;
  }
  std::int64_t to_int(const std::string& key, std::int64_t lo, std::int64_t hi) const {
    const nlohmann::json& v = j_.at(key);
    double d = 0;
    if (v.is_number_integer() && !v.is_number_unsigned()) {
      d = static_cast<double>(v.get<std::int64_t>());
    } else if (v.is_number_unsigned()) {
      d = static_cast<double>(v.get<std::uint64_t>());
    } else if (v.is_number_float()) {
      d = v.get<double>();
      if (d != static_cast<double>(static_cast<std::int64_t>(d)))
        fail(key, "expected an integer, got " + describe_value(v), type_hint("integer", v));
    } else {
      fail(key, "expected an integer, got " + describe_value(v), type_hint("integer", v));
    }
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
      fail(key,
           v.dump() + " is out of range: must be " + std::to_string(lo) + ".." + std::to_string(hi),
           range_hint(d, static_cast<double>(lo), static_cast<double>(hi)));
    return static_cast<std::int64_t>(d);
  }
  // A required integer under any of `names` (the first is the one messages name).
  std::int64_t req_int(std::initializer_list<const char*> names, std::int64_t lo, std::int64_t hi,
                       const std::string& arch) {
    const std::string key = pick(names);
    if (key.empty())
      fail(*names.begin(), std::string("missing required field '") + *names.begin() + "'",
           "every " + arch + " config.json gives it; is this the model's config.json?");
    return to_int(key, lo, hi);
  }
  std::int64_t opt_int(const std::string& key, std::int64_t def, std::int64_t lo, std::int64_t hi) {
    return given(key) ? to_int(key, lo, hi) : def;
  }
  double number(const std::string& key, double def, double lo, double hi) {
    if (!given(key)) return def;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_number())
      fail(key, "expected a number, got " + describe_value(v), type_hint("number", v));
    const double x = v.get<double>();
    if (!(x >= lo && x <= hi)) {
      std::ostringstream os;
      os << v.dump() << " is out of range: must be " << lo << ".." << hi;
      fail(key, os.str(), range_hint(x, lo, hi));
    }
    return x;
  }
  bool boolean(const std::string& key, bool def) {
    if (!given(key)) return def;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_boolean())
      fail(key, "expected true or false, got " + describe_value(v), type_hint("boolean", v));
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& def) {
    if (!given(key)) return def;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_string())
      fail(key, "expected a string, got " + describe_value(v), type_hint("string", v));
    return v.get<std::string>();
  }
  // Fields of the config neither read nor in `quiet`, in file order.
  std::vector<std::string> unread(const std::set<std::string>& quiet) const {
    std::vector<std::string> out;
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!used_.count(it.key()) && !quiet.count(it.key())) out.push_back(it.key());
    }
    return out;
  }

 private:
  const nlohmann::json& j_;
  const std::string& file_;
  std::set<std::string> used_;
};

}  // namespace csim::core
