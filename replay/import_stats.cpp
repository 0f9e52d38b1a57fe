#include "replay/import_stats.hpp"

#include <iomanip>

namespace csim::replay {

const char* to_string(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kInferred:
      return "inferred";
    case Severity::kDataLoss:
      return "data loss";
    case Severity::kError:
      return "error";
  }
  return "?";
}

namespace {
constexpr StatInfo kInfo[] = {
#define CSIM_REPLAY_STAT_INFO(name, sev, desc) {#name, Severity::sev, desc},
    CSIM_REPLAY_STATS(CSIM_REPLAY_STAT_INFO)
#undef CSIM_REPLAY_STAT_INFO
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == kNumStats);
}  // namespace

const StatInfo& info(Stat s) {
  return kInfo[static_cast<std::size_t>(s)];
}

std::int64_t ImportStats::errors() const {
  std::int64_t n = 0;
  for (int i = 0; i < kNumStats; ++i)
    if (kInfo[i].severity == Severity::kError) n += v_[static_cast<std::size_t>(i)];
  return n;
}

void ImportStats::print(std::ostream& out) const {
  for (int i = 0; i < kNumStats; ++i) {
    const std::int64_t v = v_[static_cast<std::size_t>(i)];
    if (v == 0) continue;
    out << "  " << std::left << std::setw(22) << kInfo[i].name << std::right << std::setw(9) << v
        << "  " << std::left << std::setw(9) << to_string(kInfo[i].severity) << "  "
        << kInfo[i].description << std::right << "\n";
  }
}

}  // namespace csim::replay
