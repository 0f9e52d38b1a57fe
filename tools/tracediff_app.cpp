#include "tools/tracediff_app.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "profiler/atomic_file.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/run_metrics_file.hpp"

namespace csim::app {
namespace {

constexpr const char* kFooter = R"(
Inputs: each file is a trace (ours or a PyTorch-profiler/Kineto Chrome trace, .json or .json.gz)
or a summary JSON written by `simrun --summary`; sides may mix kinds (only the metrics both provide
are compared). Several runs per side: repeat --base and --new; each metric is then compared by its
median over the side's runs and the table states the spread (max - min) / median.
  tracediff base.json new.json
  tracediff --base run1.json --base run2.json --base run3.json --new a.json.gz --new b.json.gz

Tolerance file (--tolerances), one rule per line, later matching lines win, '#' starts a comment:
  METRIC-PATTERN  [PERCENT%]  [min=QUANTITY]  [ignore]
  step_time        1%
  peak_memory/*    0%  min=64MiB
  time/*/host/*    ignore
  critical_path/*  10% min=50us
Metric keys and formulas: docs/tracediff.md; CI workflow: docs/ci.md.

Exit codes:
  0    within tolerance (improvements are reported, never fail)
  1    regression: at least one metric worse beyond its tolerance
  2    bad input: missing, truncated, malformed or oversized file, or a bad option (message names it)
  3    internal error (a bug: please report it with the inputs)
)";

}  // namespace

prof::RunMetrics load_run(const std::string& path, std::int64_t max_bytes) {
  return prof::load_run_metrics(path, max_bytes);
}

int tracediff_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "tracediff: compare two training runs (traces or summaries) metric by metric and fail on "
      "regression: step time, throughput, per-GPU peak memory and imbalance, exposed "
      "communication, per (GPU, stream role, op class) time per step, critical path.\n"
      "Usage: tracediff BASE NEW [--tolerance 2%] [--tolerances FILE] [--json OUT]\n"
      "   or: tracediff --base B1 [--base B2 ...] --new N1 [--new N2 ...] [options]",
      "tracediff"};
  std::vector<std::string> positional, base_files, new_files;
  std::string tolerance = "2%", tolerance_file, json_path, max_size = "4GiB";
  int top = 30;
  app.add_option("files", positional, "BASE NEW: one file per side");
  app.add_option("--base", base_files, "a base run (repeat for several runs)");
  app.add_option("--new", new_files, "a new run (repeat for several runs)");
  app.add_option("--tolerance", tolerance,
                 "default allowed relative change, e.g. 2% (the default)");
  app.add_option("--tolerances", tolerance_file, "per-metric tolerances (format below)");
  app.add_option("--json", json_path, "write every compared metric as JSON to this file");
  app.add_option("--top", top, "changed rows printed, biggest first (regressions always; 0: all)");
  app.add_option("--max-size", max_size, "largest input file accepted, e.g. 4GiB (the default)");
  app.footer(kFooter);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kDiffOk;
  } catch (const CLI::ParseError& e) {
    err << "tracediff: " << e.what() << " (hint: tracediff --help)\n";
    return kDiffBadInput;
  }
  try {
    // Outputs first: a --json that cannot be written fails before any file is read
    // (docs/limits.md, "Output paths").
    if (!json_path.empty()) prof::check_output_file("--json", json_path);
    if (!positional.empty()) {
      if (positional.size() != 2 || !base_files.empty() || !new_files.empty()) {
        throw InputError("(command line)", "",
                         "give exactly two files (BASE NEW), or --base/--new options, not both",
                         "tracediff --help");
      }
      base_files = {positional[0]};
      new_files = {positional[1]};
    }
    if (base_files.empty() || new_files.empty()) {
      throw InputError("(command line)", "", "need at least one base and one new file",
                       "tracediff BASE NEW");
    }
    prof::Tolerances tol;
    if (!prof::parse_percent(tolerance, &tol.default_rel)) {
      throw InputError("--tolerance", "", "cannot read '" + tolerance + "'",
                       "write e.g. 2% or 0.5%");
    }
    double max_bytes = 0;
    if (!prof::parse_quantity(max_size, &max_bytes) || max_bytes < 1) {
      throw InputError("--max-size", "", "cannot read '" + max_size + "'",
                       "write e.g. 4GiB or 500MiB");
    }
    if (!tolerance_file.empty()) {
      tol.rules = prof::parse_tolerance_rules(
          core::read_text_file(tolerance_file, "tolerance file",
                               "one rule per line, e.g. step_time 1% (tracediff --help)"),
          tolerance_file);
    }
    // Files are read in parallel (one thread each, at most the hardware's concurrency at a time);
    // the first failure in argument order is the one reported.
    std::vector<std::string> files = base_files;
    files.insert(files.end(), new_files.begin(), new_files.end());
    std::vector<prof::RunMetrics> runs(files.size());
    std::vector<std::exception_ptr> errors(files.size());
    const std::size_t width = std::max(1u, std::thread::hardware_concurrency());
    for (std::size_t from = 0; from < files.size(); from += width) {
      std::vector<std::thread> pool;
      for (std::size_t i = from; i < std::min(files.size(), from + width); ++i) {
        pool.emplace_back([&, i] {
          try {
            runs[i] = load_run(files[i], static_cast<std::int64_t>(max_bytes));
          } catch (...) {
            errors[i] = std::current_exception();
          }
        });
      }
      for (std::thread& t : pool) t.join();
    }
    for (const std::exception_ptr& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    const auto split = static_cast<std::ptrdiff_t>(base_files.size());
    const std::vector<prof::RunMetrics> base(runs.begin(), runs.begin() + split);
    const std::vector<prof::RunMetrics> next(runs.begin() + split, runs.end());
    const prof::DiffResult d = prof::diff_runs(base, next, tol);
    prof::print_diff_table(d, out, top);
    if (!json_path.empty()) {
      prof::write_file_atomically(
          json_path, [&](std::ostream& os) { os << prof::diff_to_json(d).dump(2) << "\n"; });
    }
    return d.regressed() ? kDiffRegression : kDiffOk;
  } catch (const InputError& e) {
    err << "tracediff: " << e.what() << "\n";
    return kDiffBadInput;
  } catch (const std::bad_alloc&) {
    err << "tracediff: out of memory\n";
    return kDiffBadInput;
  } catch (const std::exception& e) {
    err << "tracediff: internal error: " << e.what() << "\n";
    return kDiffInternal;
  }
}

}  // namespace csim::app
