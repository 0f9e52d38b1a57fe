// The accuracy dashboard (docs/accuracy.md): every row of calibration/published/*.json predicted
// through the simulator's own code paths, grouped by family, and the regression gate against
// calibration/accuracy-baseline.json. bench/bench_accuracy.cpp is the command line.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace csim::accuracy {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTolerance = 0.10;  // "reproduced": within 10 % (the [calibration] tests' bound)

// One published row and what the simulator predicts for it. The signed error is
// predicted / published - 1 in the published metric's own sense (a throughput above the published
// one is positive, a step time above it too); rows with several figures count their worst.
struct Row {
  std::string id, set, family, what, published, predicted, error, how, status;
  double signed_error = kNaN;  // NaN: not predicted
  double abs_error = kNaN;
};

// The case files, in the order the dashboard lists them: "calibration" rows may set constants,
// "development" rows only check (calibration/published/README.md).
struct CaseFile {
  std::string path, set;
};
std::vector<CaseFile> default_case_files();

std::string fmt(double v, int decimals);
std::string num(double v);  // shortest form: 230, 19.6, 6.21, 280000
std::string pct(double e);  // +3.2 %

// The family a row is reported under (Megatron, Korthikanti, ZeRO-3, DDP, NCCL, torchtitan,
// MLPerf, NeMo, Megatron-Bridge, PyTorch eager), from its id.
std::string family_of(const std::string& id);

// Records ERR (signed) and the status text: fitted on it / checked / not reproduced (why).
void set_status(Row& r, double err);
// A row that cannot be predicted yet, and why.
void not_predicted(Row& r, const std::string& why);

// The scenario a simulated row runs: calibration/scenarios/<id>.json, else the bundled
// scenarios/<id>.json; "" when neither exists.
std::string scenario_for(const std::string& id);

// Predictors by category (bench/accuracy/*.cpp).
void predict_collective(Row& r, const nlohmann::json& c);
void predict_host_overhead(Row& r, const nlohmann::json& c);
void predict_simulated(Row& r, const nlohmann::json& c);  // every row run from a scenario

// Every case of FILES, predicted.
std::vector<Row> evaluate(const std::vector<CaseFile>& files);

// [SECTION] Regression gate (bench/accuracy/gate.cpp) ----------------------------------------

// calibration/accuracy-baseline.json: per row its signed and absolute error (percent, 2
// decimals; null when not predicted) and why it is where it is.
struct GateResult {
  std::vector<std::string> failures;  // one line each
  int rows_checked = 0;
};
// Fails a row whose absolute error grew by more than kGateSlackPct over the baseline, a row that
// was predicted and no longer is, a row missing from the baseline, a baseline row gone.
constexpr double kGateSlackPct = 1.0;
GateResult check_against_baseline(const std::vector<Row>& rows, const nlohmann::json& baseline);
// The baseline for ROWS. A row whose error moved by more than 0.05 points from OLD (or is new)
// takes its reason from WHY (id -> text; id "*" for every moved row without its own); without one
// it throws std::invalid_argument naming it. A row that did not move keeps its old reason.
nlohmann::json make_baseline(const std::vector<Row>& rows, const nlohmann::json& old,
                             const std::vector<std::pair<std::string, std::string>>& why);

// The baseline as committed: one row per line, keys in a fixed order (diffs show moved rows).
std::string baseline_text(const nlohmann::json& baseline);

}  // namespace csim::accuracy
