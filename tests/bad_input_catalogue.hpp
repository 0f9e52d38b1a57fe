// The scenario catalogue of bad inputs (tests/bad_inputs/cases.json; docs/limits.md, "Bad
// input"): each case is a valid base scenario with keys set or removed. Shared by
// tests_bad_inputs (the parser in-process, every case) and tests_bad_cli (simrun on each case).
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace csim::test {

inline std::filesystem::path bad_inputs_dir() {
  return std::filesystem::path(CSIM_SOURCE_DIR) / "tests" / "bad_inputs";
}

inline nlohmann::json load_bad_input_catalogue() {
  std::ifstream in(bad_inputs_dir() / "cases.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// "a.b[2].c" -> "/a/b/2/c"
inline nlohmann::json::json_pointer pointer_of(const std::string& path) {
  std::string p, part;
  for (char ch : path) {
    if (ch == '.' || ch == '[') {
      if (!part.empty()) p += "/" + part;
      part.clear();
    } else if (ch != ']') {
      part += ch;
    }
  }
  if (!part.empty()) p += "/" + part;
  return nlohmann::json::json_pointer(p);
}

// Case `c` of catalogue `cat` applied to its base: its "set" keys replaced, its "remove" keys
// erased (an array element by index). `first_path` gets the first key it touched, the path the
// error must name unless the case gives its own "path".
inline nlohmann::json apply_bad_input_case(const nlohmann::json& cat, const nlohmann::json& c,
                                           std::string* first_path) {
  nlohmann::json doc = cat.at("bases").at(c.at("base").get<std::string>());
  first_path->clear();
  if (c.contains("set")) {
    for (auto it = c.at("set").begin(); it != c.at("set").end(); ++it) {
      if (first_path->empty()) *first_path = it.key();
      doc[pointer_of(it.key())] = it.value();
    }
  }
  if (c.contains("remove")) {
    for (const nlohmann::json& r : c.at("remove")) {
      const std::string p = r.get<std::string>();
      if (first_path->empty()) *first_path = p;
      const nlohmann::json::json_pointer ptr = pointer_of(p);
      nlohmann::json& parent = doc[ptr.parent_pointer()];
      if (parent.is_array())
        parent.erase(static_cast<std::size_t>(std::stoul(ptr.back())));
      else
        parent.erase(ptr.back());
    }
  }
  return doc;
}

}  // namespace csim::test
