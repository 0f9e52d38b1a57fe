// Errors, in three tiers (docs/STYLE):
//  * programming errors: CSIM_ASSERT, always on, aborts with file:line;
//  * bad user input: InputError, carrying the file, the JSON path and a hint; tools exit with 2;
//  * bad records inside large traces: counted and skipped by the readers (profiler/).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace csim {

// Bad user input. what() is the one line a tool prints: "FILE: PATH: MESSAGE (hint: HINT)".
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string json_path, std::string message, std::string hint = {})
      : std::runtime_error(format(file, json_path, message, hint)),
        file_(std::move(file)),
        json_path_(std::move(json_path)),
        message_(std::move(message)),
        hint_(std::move(hint)) {}

  const std::string& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }

 private:
  static std::string format(const std::string& file, const std::string& path,
                            const std::string& message, const std::string& hint) {
    std::string s = file.empty() ? std::string("<input>") : file;
    if (!path.empty()) s += ": " + path;
    s += ": " + message;
    if (!hint.empty()) s += " (hint: " + hint + ")";
    return s;
  }
  std::string file_, json_path_, message_, hint_;
};

// A backend that cannot run here (no GPU, no driver). Tools exit with 3.
class BackendUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "%s:%d: internal error: assertion '%s' failed%s%s\n", file, line, expr,
               msg ? ": " : "", msg ? msg : "");
  std::abort();
}

}  // namespace csim

#define CSIM_ASSERT(expr) \
  ((expr) ? static_cast<void>(0) : ::csim::assert_fail(#expr, __FILE__, __LINE__, nullptr))
#define CSIM_ASSERT_MSG(expr, msg) \
  ((expr) ? static_cast<void>(0) : ::csim::assert_fail(#expr, __FILE__, __LINE__, (msg)))
