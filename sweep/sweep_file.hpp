// A sweep with its results file (docs/sweep.md, "Resume"): the rows an earlier run of the same
// sweep wrote are kept and their variants skipped; the rows kept and the rows simulated now are
// merged, sorted, and written atomically at checkpoints and at the end. simrun sweep and the
// clustersim module's sweep(output=...) both resume through this class.
#pragma once

#include <string>
#include <vector>

#include "sweep/results_io.hpp"
#include "sweep/variant_space.hpp"

namespace csim::sweep {

class SweepFile {
 public:
  // Reads `path` (unless it is "" or `fresh`): its rows when it holds this sweep (read_results
  // throws InputError when it holds another: another scenario, base or keys), none when it does
  // not exist. header.variants_total and header.keys must be set.
  SweepFile(std::string path, ResultsHeader header, const std::vector<Knob>& knobs,
            const std::vector<Variant>& variants, SortKey key, bool fresh);

  const std::vector<VariantResult>& kept() const { return kept_; }  // from the file
  const std::vector<Variant>& pending() const { return pending_; }  // still to simulate
  const std::string& path() const { return path_; }
  const ResultsHeader& header() const { return header_; }

  // The kept rows and `fresh_rows`, sorted by the sweep's key.
  std::vector<VariantResult> merged(const std::vector<VariantResult>& fresh_rows) const;
  // Writes `rows` (merged ones) marked complete or not; nothing without a path. The header's
  // `complete` is set either way (the printed table says "(incomplete)" from it).
  void write(const std::vector<VariantResult>& rows, bool complete);

 private:
  std::string path_;
  ResultsHeader header_;
  SortKey key_;
  std::vector<VariantResult> kept_;
  std::vector<Variant> pending_;
};

}  // namespace csim::sweep
