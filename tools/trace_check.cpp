// trace_check: the strict Chrome-trace checker of profiler/trace_check.hpp on written files
// (docs/trace-format.md, "Checking a trace").
//
//   trace_check FILE...          each file on its own
//   trace_check --per-rank DIR   DIR/rank-*.json as one per-rank set (launches in their file)
//
// Exit 0: every file passes; 1: problems (listed on stdout); 2: bad usage.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "profiler/trace_check.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::cerr << "usage: trace_check FILE... | trace_check --per-rank DIR\n";
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--per-rank") {
    if (args.size() != 2) {
      std::cerr << "trace_check: --per-rank takes one directory\n";
      return 2;
    }
    std::vector<std::string> files;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(args[1], ec)) {
      const std::string n = f.path().filename().string();
      if (n.rfind("rank-", 0) == 0 && f.path().extension() == ".json") files.push_back(f.path());
    }
    if (ec || files.empty()) {
      std::cerr << "trace_check: " << args[1] << ": no rank-*.json files\n";
      return 2;
    }
    std::sort(files.begin(), files.end());
    const csim::prof::TraceCheckResult r = csim::prof::check_per_rank_files(files);
    std::cout << args[1] << ": " << r.report();
    return r.ok() ? 0 : 1;
  }
  bool all_ok = true;
  for (const std::string& f : args) {
    const csim::prof::TraceCheckResult r = csim::prof::check_chrome_trace_file(f);
    std::cout << f << ": " << r.report();
    all_ok = all_ok && r.ok();
  }
  return all_ok ? 0 : 1;
}
