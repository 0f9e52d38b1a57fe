// docs/sweep.md, "Tune": the report.
#include <cstdio>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "sweep/tune.hpp"

namespace csim::sweep {

namespace {

// The cannot-fit candidates whose model states alone (no activations) exceed the usable memory;
// the rest need the saved activations in flight to exceed it (docs/sweep.md, "Tune", "Bounds").
std::size_t cannot_fit_states_alone(const TuneResult& r) {
  std::size_t n = 0;
  for (const TuneCandidate& c : r.candidates)
    n += c.verdict == TuneVerdict::kCannotFit && c.states_alone_gib > c.usable_gib;
  return n;
}

}  // namespace

void print_tune_report(const TuneResult& r, int top, int rejected, std::ostream& out) {
  std::map<TuneVerdict, std::size_t> n;
  for (const TuneCandidate& c : r.candidates) ++n[c.verdict];
  const std::size_t alone = cannot_fit_states_alone(r);
  char line[400];
  std::snprintf(line, sizeof line,
                "%zu layouts: %zu invalid, %zu cannot fit (memory bound: %zu on the model states "
                "alone, %zu with the saved activations), %zu simulated (%zu fit, %zu OOM), %zu "
                "pruned by the compute bound%s%s; %.1f s\n",
                r.candidates.size(), n[TuneVerdict::kInvalid], n[TuneVerdict::kCannotFit], alone,
                n[TuneVerdict::kCannotFit] - alone, r.simulated, n[TuneVerdict::kFits],
                n[TuneVerdict::kOom], n[TuneVerdict::kPruned],
                n[TuneVerdict::kDuplicate] > 0
                    ? (", " + std::to_string(n[TuneVerdict::kDuplicate]) +
                       " duplicates (the same strategy as another layout)")
                          .c_str()
                    : "",
                r.complete ? "" : ", interrupted", r.wall_s);
  out << line;
  const std::vector<std::size_t> rank = r.ranking();
  if (rank.empty()) {
    out << "no layout fits in memory\n";
  } else {
    std::snprintf(line, sizeof line, "  %-3s %-54s %11s %11s %6s %17s %11s\n", "#", "layout",
                  "step time", "samples/s", "MFU", "peak/usable GiB", "bound");
    out << line;
    for (std::size_t i = 0; i < rank.size() && i < static_cast<std::size_t>(top); ++i) {
      const TuneCandidate& c = r.candidates[rank[i]];
      std::snprintf(line, sizeof line,
                    "  %-3zu %-54s %8.2f ms %11.1f %5.1f%% %8.1f / %-6.1f %8.2f ms\n", i + 1,
                    c.label.c_str(), c.result.step_time_s * 1e3, c.result.samples_per_s,
                    100 * c.result.mfu, c.result.peak_gib, c.result.usable_gib, c.lb_step_s * 1e3);
      out << line;
    }
    std::string sets;
    for (const std::string& s : r.candidates[rank[0]].sets) sets += " --set '" + s + "'";
    out << "best:" << sets << "\n";
  }
  const std::vector<std::size_t> rej = r.rejected();
  if (rej.empty() || rejected <= 0) return;
  out << "rejected, most promising first (by compute bound):\n";
  for (std::size_t i = 0; i < rej.size() && i < static_cast<std::size_t>(rejected); ++i) {
    const TuneCandidate& c = r.candidates[rej[i]];
    std::snprintf(line, sizeof line, "  %-58s %8.2f ms  %-10s %s\n", c.label.c_str(),
                  c.lb_step_s * 1e3, to_string(c.verdict), c.reason.substr(0, 110).c_str());
    out << line;
  }
}

nlohmann::json tune_report_json(const TuneResult& r, int top) {
  std::map<TuneVerdict, std::size_t> n;
  for (const TuneCandidate& c : r.candidates) ++n[c.verdict];
  nlohmann::json out = {{"format", "csim-tune"},
                        {"layouts", r.candidates.size()},
                        {"invalid", n[TuneVerdict::kInvalid]},
                        {"cannot_fit", n[TuneVerdict::kCannotFit]},
                        {"cannot_fit_states_alone", cannot_fit_states_alone(r)},
                        {"simulated", r.simulated},
                        {"oom", n[TuneVerdict::kOom]},
                        {"pruned", n[TuneVerdict::kPruned]},
                        {"duplicate", n[TuneVerdict::kDuplicate]},
                        {"complete", r.complete},
                        {"ranking", nlohmann::json::array()}};
  const std::vector<std::size_t> rank = r.ranking();
  for (std::size_t i = 0; i < rank.size() && i < static_cast<std::size_t>(top); ++i) {
    const TuneCandidate& c = r.candidates[rank[i]];
    out["ranking"].push_back({{"label", c.label},
                              {"knobs", c.knobs},
                              {"sets", c.sets},
                              {"step_time_ms", c.result.step_time_s * 1e3},
                              {"samples_per_s", c.result.samples_per_s},
                              {"mfu", c.result.mfu},
                              {"peak_gib", c.result.peak_gib},
                              {"usable_gib", c.result.usable_gib},
                              {"bound_ms", c.lb_step_s * 1e3},
                              {"memory_bound_gib", c.model_states_gib}});
  }
  return out;
}

}  // namespace csim::sweep
