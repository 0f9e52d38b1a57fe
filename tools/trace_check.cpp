// trace_check: the strict Chrome-trace checker of profiler/trace_check.hpp on written files
// (docs/trace-format.md, "Checking a trace").
//
//   trace_check FILE...          each file on its own
//   trace_check --per-rank DIR   DIR/rank-*.json as one per-rank set (launches in their file)
//
// Exit 0: every file passes; 1: problems (listed on stdout); 2: bad usage or a file that cannot
// be checked at all (missing, a directory, binary, nested past the JSON limit: one line on
// stderr naming it, docs/limits.md).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "profiler/trace_check.hpp"

namespace {

int check_per_rank(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(dir, ec);
  if (ec || !std::filesystem::exists(st)) {
    std::cerr << "trace_check: " << dir
              << ": cannot read the directory: " << (ec ? ec.message() : std::strerror(ENOENT))
              << " (hint: pass the directory simrun --per-rank wrote)\n";
    return 2;
  }
  if (!std::filesystem::is_directory(st)) {
    std::cerr << "trace_check: " << dir
              << ": --per-rank takes a directory, this is a file (hint: trace_check FILE checks "
                 "one trace)\n";
    return 2;
  }
  std::vector<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = f.path().filename().string();
    if (n.rfind("rank-", 0) == 0 && f.path().extension() == ".json") files.push_back(f.path());
  }
  if (ec || files.empty()) {
    std::cerr << "trace_check: " << dir << ": no rank-*.json files"
              << (ec ? ": " + ec.message() : std::string())
              << " (hint: pass the directory simrun --per-rank wrote)\n";
    return 2;
  }
  std::sort(files.begin(), files.end());
  const csim::prof::TraceCheckResult r = csim::prof::check_per_rank_files(files);
  std::cout << dir << ": " << r.report();
  return r.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::cerr << "usage: trace_check FILE... | trace_check --per-rank DIR\n"
                 "exit codes: 0 every file passes, 1 problems (listed on stdout), 2 bad usage or "
                 "a file that cannot be read (docs/limits.md)\n";
    return args.empty() ? 2 : 0;
  }
  try {
    if (args[0] == "--per-rank") {
      if (args.size() != 2) {
        std::cerr << "trace_check: --per-rank takes one directory (hint: trace_check --per-rank "
                     "DIR)\n";
        return 2;
      }
      return check_per_rank(args[1]);
    }
    // Every file is read before any is reported: a missing one fails the command (exit 2)
    // without half a report on stdout.
    std::vector<csim::prof::TraceCheckResult> results;
    for (const std::string& f : args) results.push_back(csim::prof::check_chrome_trace_file(f));
    bool all_ok = true;
    for (std::size_t i = 0; i < args.size(); ++i) {
      std::cout << args[i] << ": " << results[i].report();
      all_ok = all_ok && results[i].ok();
    }
    return all_ok ? 0 : 1;
  } catch (const csim::InputError& e) {
    std::cerr << "trace_check: " << e.what() << "\n";
    return 2;
  }
}
