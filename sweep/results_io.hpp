// Sweep results on disk (docs/sweep.md, "Results file"): CSV, JSON Lines or JSON by the file's
// extension, one row per variant, sorted; a header naming the scenario, the knobs and whether the
// sweep is complete (in the JSON file itself; beside a CSV or JSON Lines file, in its sidecar
// PATH.meta.json, so that pandas reads the rows as they are). Written atomically
// (profiler/atomic_file.hpp) at checkpoints and at the end, and read back to resume an interrupted
// sweep. No wall-clock figure is written, so the same sweep gives the same bytes however it was run
// (threads, MPI ranks, resumed).
#pragma once

#include <string>
#include <vector>

#include "sweep/evaluate.hpp"
#include "sweep/variant_space.hpp"

namespace csim::sweep {

struct ResultsHeader {
  std::string scenario;  // the scenario path as given
  // What the sweep changed in the scenario before its grid (--hf-config's model, then the --set
  // overrides), as base_fingerprint() gives it: a file is resumed only by the same base.
  std::string base = "none";
  std::vector<std::string> keys;   // knob keys, in order
  std::size_t variants_total = 0;  // variants in the sweep
  bool complete = false;           // every variant simulated
};

// "none" without overrides, else 16 hex digits of the 64-bit FNV-1a hash of the overrides, each
// followed by a newline (docs/sweep.md, "Results file").
std::string base_fingerprint(const std::vector<std::string>& overrides);

enum class SortKey { kThroughput, kStepTime, kMfu, kMemory, kIndex };
bool parse_sort_key(const std::string& text, SortKey* out);

// Fitting variants first (status ok), best first by `key`; then OOM ones, then invalid and failed,
// each by index. Ties by index: the order is total.
void sort_results(std::vector<VariantResult>& rows, SortKey key);

// Atomic write; the format follows the extension (.csv, .jsonl, else JSON). CSV and JSON Lines
// get the sidecar results_sidecar_path(path), written after them.
void write_results(const std::string& path, const ResultsHeader& header,
                   const std::vector<VariantResult>& rows);

// PATH.meta.json: the header of a CSV or JSON Lines results file, as JSON.
std::string results_sidecar_path(const std::string& path);

// The rows of an earlier run of the same sweep, or none when `path` does not exist. Throws
// csim::InputError when the file is not a results file or its scenario or keys differ.
std::vector<VariantResult> read_results(const std::string& path, const ResultsHeader& expect);

// Rows as text, without a header (the values as a JSON array): how MPI ranks send them to rank 0.
std::string rows_to_text(const std::vector<VariantResult>& rows);
std::vector<VariantResult> rows_from_text(const std::string& text);

}  // namespace csim::sweep
