// Helpers for clear diagnostics on JSON input: byte offset -> line:column, strict parsing
// (duplicate keys refused), JSON-path building, value descriptions, and "did you mean" by edit
// distance.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace csim::core {

struct LineCol {
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in bytes
};

// Position of the byte at 0-based `offset` in `text` (offset past the end -> just after the last
// byte).
LineCol line_col_at(std::string_view text, std::size_t offset);

// Parses `text` as strict JSON (RFC 8259: no comments, no trailing commas, no duplicate keys),
// nested at most kMaxJsonDepth levels (core/input_file.hpp). Throws csim::InputError naming `file`
// and, for syntax errors and nesting past the limit, "line L, column C".
nlohmann::json parse_json_strict(const std::string& text, const std::string& file);

// Levenshtein distance with adjacent transpositions (optimal string alignment), case-sensitive.
int edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word` by edit_distance, or "" when none is close enough
// (distance <= max(2, |word| / 3)). Ties go to the earlier candidate.
std::string nearest_candidate(std::string_view word, const std::vector<std::string>& candidates);

// "did you mean X?" when a candidate is near, otherwise "valid keys: a, b, c".
std::string unknown_key_hint(std::string_view key, const std::vector<std::string>& valid);

// JSON paths as users write them: "strategy.ddp.bucket_cap_mb", "model.layers[2].out".
std::string child_path(const std::string& parent, const std::string& key);
std::string index_path(const std::string& parent, std::size_t index);

// The hint of a type error: how to write the expected type, with an example made from the value
// given where it can be ("write the number without quotes: 128", "a count is a whole number, e.g.
// 1 or 2"). EXPECTED: "integer", "number", "boolean", "string", "object" or "array".
std::string type_hint(std::string_view expected, const nlohmann::json& got);

// The hint of a value outside [lo, hi]: the nearest bound ("use at least 1", "use at most 16").
std::string range_hint(double value, double lo, double hi);

// The value at a JSON path as child_path/index_path write it ("model.layers[2].out"), or nullptr
// when the document has nothing there.
const nlohmann::json* find_at_path(const nlohmann::json& doc, const std::string& path);

// "string \"abc\"", "number 5", "boolean true", "an object", "an array", "null" (short, for
// messages).
std::string describe_value(const nlohmann::json& v);

}  // namespace csim::core
