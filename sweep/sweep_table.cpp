// docs/sweep.md, "Table".
#include "sweep/sweep_table.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace csim::sweep {
namespace {

// "strategy.micro_batch_size" -> "micro_batch_size": the table's column names.
std::string short_key(const std::string& key) {
  const std::size_t dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

}  // namespace

void print_sweep_table(const std::vector<VariantResult>& rows, const ResultsHeader& h, int top,
                       std::ostream& out) {
  std::vector<std::size_t> width;
  for (const std::string& k : h.keys)
    width.push_back(std::max<std::size_t>(short_key(k).size(), 4));
  const std::size_t shown = std::min(rows.size(), static_cast<std::size_t>(std::max(0, top)));
  for (std::size_t i = 0; i < shown; ++i)
    for (std::size_t k = 0; k < h.keys.size(); ++k)
      width[k] = std::max(width[k], std::min<std::size_t>(rows[i].values[k].size(), 24));
  std::string head = "  #   ";
  for (std::size_t k = 0; k < h.keys.size(); ++k) {
    std::string c = short_key(h.keys[k]);
    c.resize(width[k], ' ');
    head += c + "  ";
  }
  head += "status   step time   samples/s    MFU   peak / usable GiB";
  out << head << "\n";
  char buf[160];
  for (std::size_t i = 0; i < shown; ++i) {
    const VariantResult& r = rows[i];
    std::snprintf(buf, sizeof buf, "  %-3zu ", i + 1);
    std::string line = buf;
    for (std::size_t k = 0; k < h.keys.size(); ++k) {
      std::string v = r.values[k].substr(0, 24);
      v.resize(width[k], ' ');
      line += v + "  ";
    }
    if (r.status == VariantStatus::kInvalid || r.status == VariantStatus::kFailed) {
      line += std::string(to_string(r.status)) + "  " + r.error.substr(0, 100);
    } else {
      std::snprintf(buf, sizeof buf, "%-7s %9.2f ms %11.1f %5.1f%%   %7.2f / %.2f",
                    to_string(r.status), r.step_time_s * 1e3, r.samples_per_s, 100 * r.mfu,
                    r.peak_gib, r.usable_gib);
      line += buf;
    }
    out << line << "\n";
  }
  std::map<VariantStatus, std::size_t> count;
  for (const VariantResult& r : rows) ++count[r.status];
  out << rows.size() << " of " << h.variants_total << " variants: " << count[VariantStatus::kOk]
      << " fit, " << count[VariantStatus::kOom] << " OOM, " << count[VariantStatus::kInvalid]
      << " invalid";
  if (count[VariantStatus::kFailed]) out << ", " << count[VariantStatus::kFailed] << " failed";
  out << (h.complete ? "" : " (incomplete)") << "\n";
}

}  // namespace csim::sweep
