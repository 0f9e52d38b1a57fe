// Trace diff: the metrics tracediff compares, extracted from a Trace or from a summary JSON, and
// their comparison (medians of several runs per side, tolerances, verdicts). Every metric's formula
// and the tolerance-file format are in docs/tracediff.md; each function cites its section.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/trace.hpp"

namespace csim::prof {

// [SECTION] Metrics of one run
// ---------------------------------------------------------------------

enum class Unit : std::uint8_t {
  kSeconds,    // seconds (per step for per-step times)
  kBytes,      // bytes
  kRatio,      // dimensionless ratio printed as "1.04x"
  kFraction,   // 0..1 printed as a percentage
  kPerSecond,  // samples per second
};
enum class Better : std::uint8_t { kLower, kHigher };

// Families: a metric is compared only when both sides provide its family (a summary JSON has no
// per-op-class times, a trace without flows no critical path, a trace without counters no memory).
inline constexpr const char* kFamilyStep = "step";               // step_time, throughput
inline constexpr const char* kFamilyComm = "comm";               // exposed_comm, comm_overlap
inline constexpr const char* kFamilyMemory = "memory";           // peak_memory/*, imbalance
inline constexpr const char* kFamilySplit = "split";             // split/gpuN/* (exclusive split)
inline constexpr const char* kFamilyTime = "time";               // time/gpuN|mean/ROLE/CLASS
inline constexpr const char* kFamilyCritical = "critical_path";  // critical_path/*

struct Metric {
  double value = 0;
  Unit unit = Unit::kSeconds;
  Better better = Better::kLower;
  std::string family;    // one of kFamily*
  bool per_gpu = false;  // key names one GPU by position ("gpu3"): compared only when the GPU
                         // counts of the two sides agree
};

struct GpuIdentity {  // one GPU of a run, at its position (key "gpu<position>")
  std::string name;   // "node 0 / GPU 1", "rank 3 / GPU 3"
  int rank = -1, gpu = -1;
};

struct RunMetrics {
  std::string source;                      // file the run came from
  std::string kind;                        // "trace" or "summary"
  int world_size = 0;                      // distributedInfo.world_size (0: unknown)
  std::vector<GpuIdentity> gpus;           // GPUs in position order
  std::map<std::string, Metric> metrics;   // key → value (docs/tracediff.md "Metrics")
  std::set<std::string> families;          // families this run provides
  std::map<std::string, double> op_names;  // "ROLE NAME" → seconds per step, mean over GPUs
  std::vector<std::string> notes;          // "no memory data", ...
};

// docs/tracediff.md "Metrics". Never throws on content: what a trace lacks becomes a note.
RunMetrics extract_metrics(const Trace& trace, const std::string& source);
// A summary JSON as written by `simrun --summary` (summary_to_json). Throws csim::InputError
// naming SOURCE when a required key is missing or mistyped.
RunMetrics metrics_from_summary(const nlohmann::json& summary, const std::string& source);
// True when J looks like a summary JSON (an object with "step_time_s" and "per_gpu").
bool is_summary_json(const nlohmann::json& j);

// [SECTION] Tolerances
// -----------------------------------------------------------------------------

struct Tolerance {
  double rel = 0.02;    // allowed relative change, 0.02 = 2 %
  double min_abs = 0;   // changes smaller than this (metric's unit) never count
  bool ignore = false;  // metric not judged (still listed)
};

struct ToleranceRule {
  std::string pattern;  // metric key with '*' wildcards
  bool has_rel = false;
  double rel = 0;
  bool has_min = false;
  double min_abs = 0;
  bool ignore = false;
  int line = 0;  // line in the file (for messages)
};

struct Tolerances {
  double default_rel = 0.02;         // --tolerance
  std::vector<ToleranceRule> rules;  // from --tolerances FILE, later lines win
  // The tolerance for KEY: defaults (docs/tracediff.md "Tolerances"), then every matching rule
  // in file order.
  Tolerance for_metric(const std::string& key, Unit unit) const;
};

// "2%" → 0.02, "0.5%" → 0.005, "2" → 0.02 (a bare number is a percentage). False when malformed
// or negative.
bool parse_percent(const std::string& text, double* out);
// "50us", "1.5ms", "2s", "64MiB", "1GiB", "100B", "0.01" (bare: the metric's unit). False when
// malformed.
bool parse_quantity(const std::string& text, double* out);
// docs/tracediff.md "Tolerance file". Throws csim::InputError naming FILE and the line.
std::vector<ToleranceRule> parse_tolerance_rules(const std::string& text, const std::string& file);
bool glob_match(const std::string& pattern, const std::string& key);

// [SECTION] Comparison
// -----------------------------------------------------------------------------

enum class Status : std::uint8_t {
  kUnchanged,  // identical medians
  kWithin,     // changed, within tolerance (or ignored)
  kImproved,   // better beyond tolerance
  kRegressed,  // worse beyond tolerance
};
const char* to_string(Status s);

struct SideStats {
  double median = 0, min = 0, max = 0;
  int runs = 0;  // runs that had the metric
  // (max − min) / |median| (0 when one run or median 0): docs/tracediff.md "Several runs"
  double spread() const;
};

struct MetricDiff {
  std::string key;
  Metric shape;  // unit, direction, family (value unused)
  SideStats base, next;
  bool appeared = false;  // absent or 0 in base, > 0 in new
  bool vanished = false;  // > 0 in base, absent or 0 in new
  double change_abs = 0;  // next.median − base.median
  double change_rel = 0;  // change_abs / |base.median|; ±inf when base is 0
  Tolerance tol;
  Status status = Status::kUnchanged;
};

struct OpChange {      // an op name present on one side only
  std::string name;    // "ROLE NAME"
  double seconds = 0;  // per step, median over the side's runs
};

struct DiffResult {
  std::vector<std::string> base_sources, new_sources;
  std::vector<MetricDiff> rows;  // biggest |change_rel| first, then |change_abs|
  std::vector<OpChange> appeared_ops, vanished_ops;  // biggest first
  std::vector<std::string> notes;
  int regressions = 0, improvements = 0;
  double default_rel = 0.02;
  bool regressed() const { return regressions > 0; }
};

// docs/tracediff.md "Comparison". BASE and NEXT hold one or more runs each.
DiffResult diff_runs(const std::vector<RunMetrics>& base, const std::vector<RunMetrics>& next,
                     const Tolerances& tolerances);

// The table (docs/tracediff.md "Output"): changed rows biggest first, at most TOP of them (0: all)
// plus every regression; appeared / vanished ops; notes; the verdict line.
void print_diff_table(const DiffResult& d, std::ostream& out, int top = 30);
nlohmann::json diff_to_json(const DiffResult& d);
// "12.345 ms", "1.50 GiB", "1.040x", "93.1%", "1234.5/s".
std::string format_value(double v, Unit u);

}  // namespace csim::prof
