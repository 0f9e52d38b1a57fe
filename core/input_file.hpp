// Reading an input file the user named, and the JSON nesting limit, shared by every reader of the
// project (scenarios, cluster files, Hugging Face configs, device profiles, tolerance and curve
// files, sweep results, traces): a missing file, a directory, a binary file or JSON nested past
// the limit is one InputError naming the file, what is wrong and the OS error or a hint
// (docs/limits.md, "Bad input"), never a misleading "malformed JSON" or an exhausted memory.
//
// Depends on core/error.hpp only, so profiler/ may use it too (FOLDERS.md).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace csim::core {

// The deepest nesting of arrays and objects any JSON input may have (docs/limits.md, "JSON
// nesting"). The deepest input the project reads is a Chrome trace event with nested arguments
// (about 6 levels: {traceEvents: [{args: {"Input Dims": [[...]]}}]}); scenarios nest 5 levels.
// 256 leaves room for any real document while bounding what a parser keeps per level (the strict
// parser's path strings grow with depth squared, nlohmann's copies recurse once per level).
inline constexpr int kMaxJsonDepth = 256;

// Checks that `path` names a readable regular file (or a character device or FIFO, e.g.
// /dev/stdin) and returns its whole contents. Throws InputError(path, "", ...) for:
//  - a path that cannot be opened: "cannot read the WHAT: <strerror>" (hint: HINT);
//  - a directory: "is a directory, not a WHAT" (hint: HINT);
//  - a file holding a NUL byte or starting with the gzip magic: "not a text file (...)".
// WHAT names the file's role ("scenario file", "cluster file", ...).
std::string read_text_file(const std::string& path, const std::string& what,
                           const std::string& hint);

// The same checks before a reader opens `path` itself (the streaming trace reader): throws for a
// path that does not exist or cannot be opened, and for a directory. Binary content is left to
// the reader (a trace may be gzip-compressed).
void check_input_file(const std::string& path, const std::string& what, const std::string& hint);

// The deepest nesting of `[` and `{` in `text`, strings skipped (escapes honoured): a linear scan
// with no allocation, so it runs before any parser. Text that is not JSON gives some number; the
// parser reports the syntax.
struct JsonDepth {
  int depth = 0;           // deepest nesting seen, up to max_depth + 1 (the scan stops there)
  std::size_t offset = 0;  // byte offset of the bracket that went past max_depth
};
JsonDepth json_depth(std::string_view text, int max_depth = kMaxJsonDepth);

// Throws InputError(file, "", "JSON nested more than 256 levels deep at line L, column C ...")
// when `text` nests deeper than max_depth.
void check_json_depth(std::string_view text, const std::string& file,
                      int max_depth = kMaxJsonDepth);

}  // namespace csim::core
