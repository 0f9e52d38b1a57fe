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

std::string gib_text(std::int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB",
                static_cast<double>(bytes) / static_cast<double>(kGiB));
  return buf;
}

bool looks_like_gzip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  return in.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

constexpr const char* kInputHint =
    "pass a trace (.json, .json.gz) or a summary written by `simrun --summary`";

// Summaries are small: only files up to this size are looked at as a possible summary JSON.
constexpr std::int64_t kSummaryProbeBytes = 16 * kMiB;

// Metrics of a trace just read, with a note when the reader skipped records.
prof::RunMetrics trace_metrics(const prof::Trace& t, const prof::ReadStats& stats,
                               const std::string& path) {
  if (t.events.empty()) throw InputError(path, "traceEvents", "the trace has no complete events");
  prof::RunMetrics r = prof::extract_metrics(t, path);
  if (stats.skipped_records > 0) {
    r.notes.push_back(std::to_string(stats.skipped_records) +
                      " malformed records skipped (first: " + stats.first_problem + ")");
  }
  return r;
}

prof::RunMetrics load_trace_text(const std::string& text, const std::string& path) {
  prof::ReadStats stats;
  const prof::Trace t = prof::read_chrome_trace_string(text, path, &stats);
  return trace_metrics(t, stats, path);
}

}  // namespace

prof::RunMetrics load_run(const std::string& path, std::int64_t max_bytes) {
  namespace fs = std::filesystem;
  core::check_input_file(path, "trace or summary file", kInputHint);  // missing, a directory
  std::error_code ec;
  const auto size = static_cast<std::int64_t>(fs::file_size(path, ec));
  if (ec) throw InputError(path, "", "cannot read its size: " + ec.message(), kInputHint);
  if (size == 0) throw InputError(path, "", "the file is empty", kInputHint);
  if (size > max_bytes) {
    throw InputError(path, "",
                     "the file is " + gib_text(size) + ", over the limit of " + gib_text(max_bytes),
                     "raise it with --max-size if this machine has the memory (about 10x the "
                     "uncompressed size)");
  }
  try {
    if (!looks_like_gzip(path) && size <= kSummaryProbeBytes) {
      const std::string text = core::read_text_file(path, "trace or summary file", kInputHint);
      core::check_json_depth(text, path);  // before either parser (docs/limits.md)
      const std::size_t first = text.find_first_not_of(" \t\r\n");
      const bool object = first != std::string::npos && text[first] == '{';
      if (object && text.find("\"traceEvents\"") == std::string::npos) {
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(text);
        } catch (const nlohmann::json::parse_error& e) {
          throw InputError(path, "", std::string("malformed JSON: ") + e.what(),
                           "is the file truncated?");
        }
        if (prof::is_summary_json(j)) return prof::metrics_from_summary(j, path);
        throw InputError(path, "",
                         "neither a trace (no traceEvents) nor a summary (no step_time_s/per_gpu)",
                         "pass a Chrome/Kineto trace or a summary written by `simrun --summary`");
      }
      return load_trace_text(text, path);
    }
    prof::ReadStats stats;
    const prof::Trace t = prof::read_chrome_trace_file(path, &stats);
    return trace_metrics(t, stats, path);
  } catch (const std::bad_alloc&) {
    throw InputError(path, "", "out of memory while reading the file",
                     "lower its size or use a bigger machine");
  }
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
