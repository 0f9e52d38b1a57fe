// sweep/sweep_file.hpp.
#include "sweep/sweep_file.hpp"

#include <unordered_set>
#include <utility>

namespace csim::sweep {

SweepFile::SweepFile(std::string path, ResultsHeader header, const std::vector<Knob>& knobs,
                     const std::vector<Variant>& variants, SortKey key, bool fresh)
    : path_(std::move(path)), header_(std::move(header)), key_(key) {
  if (!path_.empty() && !fresh) kept_ = read_results(path_, header_);
  std::unordered_set<std::string> done_ids;
  for (const VariantResult& r : kept_) done_ids.insert(variant_id(knobs, r.values));
  for (const Variant& v : variants)
    if (!done_ids.count(variant_id(knobs, v.values))) pending_.push_back(v);
}

std::vector<VariantResult> SweepFile::merged(const std::vector<VariantResult>& fresh_rows) const {
  std::vector<VariantResult> rows = kept_;
  rows.insert(rows.end(), fresh_rows.begin(), fresh_rows.end());
  sort_results(rows, key_);
  return rows;
}

void SweepFile::write(const std::vector<VariantResult>& rows, bool complete) {
  header_.complete = complete;
  if (!path_.empty()) write_results(path_, header_, rows);
}

}  // namespace csim::sweep
