// Input files and the JSON nesting limit (core/input_file.hpp).
#include "core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace csim::core {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& message,
                       const std::string& hint) {
  throw InputError(path, "", message, hint);
}

std::string os_error(int err) {
  return std::strerror(err);
}

// 1-based line and column of byte `offset` (column in bytes).
std::string line_col(std::string_view text, std::size_t offset) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

}  // namespace

void check_input_file(const std::string& path, const std::string& what, const std::string& hint) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail(path, "cannot read the " + what + ": " + os_error(errno), hint);
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a " + what, hint);
  if (::access(path.c_str(), R_OK) != 0)
    fail(path, "cannot read the " + what + ": " + os_error(errno), hint);
}

std::string read_text_file(const std::string& path, const std::string& what,
                           const std::string& hint) {
  check_input_file(path, what, hint);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, "cannot read the " + what + ": " + os_error(errno), hint);
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      fail(path, "cannot read the " + what + ": " + os_error(e), hint);
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b)
    fail(path, "not a text file: it is gzip-compressed; a " + what + " is JSON text",
         "decompress it first (gunzip)");
  if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
    fail(path,
         "not a text file (byte " + std::to_string(nul) + " is a NUL): a " + what + " is JSON text",
         hint);
  return text;
}

JsonDepth json_depth(std::string_view text, int max_depth) {
  JsonDepth d;
  int depth = 0;
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  for (const char* p = begin; p < end; ++p) {
    const char c = *p;
    if (c == '"') {
      // Skip the string: a quote preceded by an odd number of backslashes is escaped.
      for (++p; p < end; ++p) {
        if (*p == '\\') {
          ++p;  // the escaped character, whatever it is
        } else if (*p == '"') {
          break;
        }
      }
    } else if (c == '[' || c == '{') {
      if (++depth > d.depth) d.depth = depth;
      if (depth > max_depth) {
        d.offset = static_cast<std::size_t>(p - begin);
        return d;
      }
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
  }
  return d;
}

void check_json_depth(std::string_view text, const std::string& file, int max_depth) {
  const JsonDepth d = json_depth(text, max_depth);
  if (d.depth <= max_depth) return;
  throw InputError(file, "",
                   "JSON nested deeper than the limit of " + std::to_string(max_depth) +
                       " levels (at " + line_col(text, d.offset) +
                       "; docs/limits.md, \"JSON nesting\")",
                   "no ClusterSim input nests more than a few levels; is this the right file?");
}

}  // namespace csim::core
