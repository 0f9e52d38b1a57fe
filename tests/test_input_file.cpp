// Input files and the JSON nesting limit (core/input_file.hpp; docs/limits.md, "Bad input"), and
// the parser's hints for type and range errors (core/json_diagnostics.hpp). The same refusals
// through the built tools: tests/test_bad_cli.cpp.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_diagnostics.hpp"
#include "tests/test_support.hpp"

namespace {

namespace fs = std::filesystem;
using csim::InputError;
using csim::core::check_json_depth;
using csim::core::json_depth;
using csim::core::kMaxJsonDepth;
using csim::core::read_text_file;

std::string nested(int n) {
  return std::string(static_cast<std::size_t>(n), '[') +
         std::string(static_cast<std::size_t>(n), ']');
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("json_depth counts brackets outside strings, escapes included", "[input]") {
  CHECK(json_depth("{}").depth == 1);
  // {"a": [1, {"b": []}]}: '{' 1, '[' 2, '{' 3, '[' 4.
  CHECK(json_depth("{\"a\": [1, {\"b\": []}]}").depth == 4);
  // Brackets inside strings do not count, nor does an escaped quote end the string.
  CHECK(json_depth("[\"[[[[\"]").depth == 1);
  CHECK(json_depth("[\"a\\\"[[[\"]").depth == 1);
  CHECK(json_depth("[\"a\\\\\", [[]]]").depth == 3);  // "a\\" ends at its second quote
  CHECK(json_depth("").depth == 0);
  CHECK(json_depth("5").depth == 0);
}

TEST_CASE("the nesting limit admits 256 levels and refuses 257 where it is crossed", "[input]") {
  CHECK_NOTHROW(check_json_depth(nested(kMaxJsonDepth), "ok.json"));
  const std::string m =
      message_of([] { check_json_depth(nested(kMaxJsonDepth + 1), "deep.json"); });
  // The 257th '[' is byte 256, column 257 of line 1.
  CHECK(m.find("deep.json: JSON nested deeper than the limit of 256 levels (at line 1, column "
               "257;") == 0);
  CHECK(m.find("(hint: ") != std::string::npos);
  // The scan stops at the first bracket past the limit: 200,000 levels report the same place.
  CHECK(json_depth(nested(200000)).offset == 256);
  CHECK(json_depth(nested(200000)).depth == kMaxJsonDepth + 1);
  // Through the strict parser, before any nlohmann frame.
  CHECK(message_of([] {
          (void)csim::core::parse_json_strict(nested(300), "s.json");
        }).find("limit of 256 levels") != std::string::npos);
}

TEST_CASE("read_text_file names a missing file, a directory and a binary file", "[input]") {
  const fs::path d = csim::test::fresh_dir("csim_input_file_", "read");
  const std::string missing =
      message_of([&] { read_text_file((d / "no.json").string(), "scenario file", "h"); });
  CHECK(
      missing.find("no.json: cannot read the scenario file: No such file or directory (hint: h)") !=
      std::string::npos);
  CHECK(message_of([&] {
          read_text_file(d.string(), "scenario file", "h");
        }).find(": is a directory, not a scenario file (hint: h)") != std::string::npos);
  {
    std::ofstream(d / "bin.json", std::ios::binary).write("{\0}", 3);
    std::ofstream(d / "z.json", std::ios::binary).write("\x1f\x8b\x08\x00", 4);
    std::ofstream(d / "ok.json") << "{\"a\": 1}";
  }
  CHECK(message_of([&] {
          read_text_file((d / "bin.json").string(), "scenario file", "h");
        }).find("not a text file (byte 1 is a NUL): a scenario file is JSON text") !=
        std::string::npos);
  CHECK(message_of([&] {
          read_text_file((d / "z.json").string(), "scenario file", "h");
        }).find("gzip-compressed") != std::string::npos);
  CHECK(read_text_file((d / "ok.json").string(), "scenario file", "h") == "{\"a\": 1}");
  fs::remove_all(d);
}

TEST_CASE("type and range hints give the expected type with an example from the value", "[input]") {
  using csim::core::range_hint;
  using csim::core::type_hint;
  using nlohmann::json;
  CHECK(type_hint("integer", json("128")) == "write the number without quotes: 128");
  CHECK(type_hint("integer", json(1.5)) == "a count is a whole number, e.g. 1 or 2");
  CHECK(type_hint("number", json(" 2.5 ")) == "write the number without quotes: 2.5");
  CHECK(type_hint("boolean", json(1)) == "write true or false, not 1 or 0");
  CHECK(type_hint("string", json(5)) == "write it in quotes: \"5\"");
  CHECK(range_hint(17, 1, 16) == "use at most 16");
  CHECK(range_hint(-1, 0, 11264) == "use at least 0");
}

TEST_CASE("find_at_path follows keys and indexes", "[input]") {
  const nlohmann::json doc = nlohmann::json::parse(R"({"a": {"b": [1, {"c": 2}]}})");
  REQUIRE(csim::core::find_at_path(doc, "a.b[1].c") != nullptr);
  CHECK(*csim::core::find_at_path(doc, "a.b[1].c") == 2);
  CHECK(csim::core::find_at_path(doc, "a.b[2]") == nullptr);
  CHECK(csim::core::find_at_path(doc, "a.x") == nullptr);
  CHECK(csim::core::find_at_path(doc, "a.b[0].c") == nullptr);  // 1 is not an object
}
