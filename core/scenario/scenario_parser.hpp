// Strict scenario.json parser (format v1, docs/scenario.md). Every error is a csim::InputError
// naming the file (or the --set override it came from), the JSON path and a hint; nothing is
// accepted silently: unknown keys, wrong types, out-of-range values, nonexistent or duplicated
// devices, dtypes the GPU lacks and inconsistent strategies are refused. Defaults are filled in
// (device_ids, output_device, catalog figures); accepted-but-noteworthy input lands in
// Scenario::warnings.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// Reads and validates `path`. `overrides` are "dotted.path=VALUE" strings (the command line's
// --set): VALUE is read as JSON when it parses as JSON, otherwise as a string; they are applied
// to the document in order, before validation, so they are validated like the file.
Scenario parse_scenario_file(const std::string& path,
                             const std::vector<std::string>& overrides = {});

// As parse_scenario_file, for JSON text; `name_for_errors` stands for the file in messages.
Scenario parse_scenario_string(const std::string& json_text, const std::string& name_for_errors,
                               const std::vector<std::string>& overrides = {});

// The scenario file as strict JSON, not yet validated (the same read and JSON errors as
// parse_scenario_file): sweeps read it once and validate each variant with
// parse_scenario_document.
nlohmann::json read_scenario_document(const std::string& path);

// As parse_scenario_string, for a document already parsed (sweeps parse the file once and
// validate each variant's overrides on a copy).
Scenario parse_scenario_document(const nlohmann::json& doc, const std::string& name_for_errors,
                                 const std::vector<std::string>& overrides = {});

// A value for one path of the document that another file gives (a device profile's "overrides"
// entry): set as the JSON value it is, not printed and read back as a --set. An error in it names
// `file` and `json_path`, its place in that file (`json_path` + the rest of the path below
// `path`), with `hint` when the check that failed has none; a later --set of the same path wins.
struct FileOverride {
  std::string path;  // "cluster.gpu"
  nlohmann::json value;
  std::string file;       // "h200.profile.json"
  std::string json_path;  // overrides["cluster.gpu"]
  std::string hint;
};

// As above, with `file_overrides` applied first, in order, then `overrides`.
Scenario parse_scenario_document(const nlohmann::json& doc, const std::string& name_for_errors,
                                 const std::vector<FileOverride>& file_overrides,
                                 const std::vector<std::string>& overrides);

// A cluster file (docs/scenario.md, "Cluster files"; scenarios/clusters/*.json): a scenario's
// "cluster" object on its own, validated by the same code. `overrides` are "cluster.KEY=VALUE"
// (--set cluster.nodes=4); messages name the JSON paths as in a scenario (cluster.nodes).
// Accepted-but-noteworthy input goes to `warnings` when given.
ClusterSpec parse_cluster_file(const std::string& path,
                               const std::vector<std::string>& overrides = {},
                               std::vector<std::string>* warnings = nullptr);

// For a front end that writes the run's trace: throws InputError when the parser's estimate of
// its events (Scenario::estimated_trace_events) exceeds limits.max_trace_events, naming the key
// that reduces it most directly and every other lever (docs/limits.md, "Trace size"). Runs that
// write no trace are limited only by memory (checked by the parser).
void check_trace_limit(const Scenario& scenario);

// For `simrun --per-rank` writing every rank's file (rank symmetry's mirrors included): throws
// InputError when the estimate of the events of all the files (estimate_trace_events with every
// GPU's model replica, not only the simulated ones) exceeds limits.max_per_rank_events, with the
// levers: --per-rank-representatives, fewer steps, raising the limit (docs/limits.md, "Per-rank
// files").
void check_per_rank_limit(const Scenario& scenario);

// For the lowering, once the first rank's step is built: throws InputError when the whole
// Program, `ops` ops over `simulated_ranks` ranks, would not fit in this machine's physical
// memory at kBytesPerEventSimulated per op (each op is at least one simulated event), before it
// is reserved. The parser's estimate (docs/limits.md, "The trace-size estimate") usually refuses
// such a run first; this is the check on the real count, so a layout whose ranks rank symmetry
// cannot fold fails with the levers instead of std::bad_alloc.
void check_program_memory(const Scenario& scenario, double ops, int simulated_ranks);

// The format version this parser reads (the optional top-level "format_version").
inline constexpr int kScenarioFormatVersion = 1;

}  // namespace csim::core
