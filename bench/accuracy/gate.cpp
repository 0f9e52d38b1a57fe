// The accuracy regression gate (docs/accuracy.md, "The gate"): every row against
// calibration/accuracy-baseline.json.
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>

#include "bench/accuracy/accuracy.hpp"

namespace csim::accuracy {

namespace {

using nlohmann::json;

// Percent with 2 decimals, as the baseline stores it (a stable file: no float noise).
json pct2(double e) {
  if (std::isnan(e)) return nullptr;
  return std::round(e * 1e4) / 100;
}

std::map<std::string, json> by_id(const json& baseline) {
  std::map<std::string, json> m;
  if (baseline.contains("rows") && baseline["rows"].is_array())
    for (const json& b : baseline["rows"]) m[b.at("id").get<std::string>()] = b;
  return m;
}

}  // namespace

GateResult check_against_baseline(const std::vector<Row>& rows, const json& baseline) {
  GateResult g;
  std::map<std::string, json> base = by_id(baseline);
  for (const Row& r : rows) {
    const auto it = base.find(r.id);
    if (it == base.end()) {
      g.failures.push_back(r.id +
                           ": missing from the baseline (a new row: add it with "
                           "--write-baseline and a --why line)");
      continue;
    }
    ++g.rows_checked;
    const json& was = it->second["abs_error_pct"];
    const json now = pct2(r.abs_error);
    if (!was.is_null() && now.is_null())
      g.failures.push_back(r.id + ": predicted before (|error| " + fmt(was.get<double>(), 2) +
                           " %), not predicted now (" + r.status + ")");
    else if (!was.is_null() && now.get<double>() > was.get<double>() + kGateSlackPct)
      g.failures.push_back(r.id + ": |error| " + fmt(was.get<double>(), 2) + " % -> " +
                           fmt(now.get<double>(), 2) + " % (signed " + pct(r.signed_error) +
                           "), more than " + fmt(kGateSlackPct, 0) + " point above the baseline");
    base.erase(it);
  }
  for (const auto& [id, b] : base)
    g.failures.push_back(id + ": in the baseline but no longer a row");
  return g;
}

json make_baseline(const std::vector<Row>& rows, const json& old,
                   const std::vector<std::pair<std::string, std::string>>& why) {
  const std::map<std::string, json> before = by_id(old);
  const std::map<std::string, std::string> reasons(why.begin(), why.end());
  json out = json::object();
  out["about"] =
      "The accuracy gate's baseline (docs/accuracy.md, \"The gate\"): per row of "
      "calibration/published/*.json the signed and absolute error of bench_accuracy's prediction "
      "in percent (null: not predicted), and why it is where it is. Written by bench_accuracy "
      "--write-baseline; a change that moves a row on purpose rewrites it in the same commit with "
      "--why ID=TEXT for each moved row.";
  out["rows"] = json::array();
  std::vector<std::string> unexplained;
  for (const Row& r : rows) {
    json b = {{"id", r.id},
              {"set", r.set},
              {"family", r.family},
              {"signed_error_pct", pct2(r.signed_error)},
              {"abs_error_pct", pct2(r.abs_error)}};
    auto given = reasons.find(r.id);
    if (given == reasons.end()) given = reasons.find("*");
    const auto old_row = before.find(r.id);
    bool moved = old_row == before.end();
    if (!moved) {
      const json& was = old_row->second["signed_error_pct"];
      const json& now = b["signed_error_pct"];
      moved = was.is_null() != now.is_null() ||
              (!now.is_null() && std::abs(now.get<double>() - was.get<double>()) > 0.05);
    }
    // A reason given for this row by its id replaces the old one even when the row did not move
    // (a constant refitted on it, its old reason stale).
    if (!moved && reasons.count(r.id) == 0)
      b["why"] = old_row->second.value("why", "");
    else if (given != reasons.end())
      b["why"] = given->second;
    else
      unexplained.push_back(r.id + " (" +
                            (b["signed_error_pct"].is_null()
                                 ? std::string("not predicted")
                                 : fmt(b["signed_error_pct"].get<double>(), 2) + " %") +
                            ")");
    out["rows"].push_back(b);
  }
  if (!unexplained.empty()) {
    std::string s = "rows moved or new without a reason: ";
    for (std::size_t i = 0; i < unexplained.size(); ++i) s += (i ? ", " : "") + unexplained[i];
    throw std::invalid_argument(s + " (give --why ID=TEXT for each)");
  }
  return out;
}

std::string baseline_text(const json& baseline) {
  std::string s = "{\n \"about\": " + baseline["about"].dump() + ",\n \"rows\": [";
  const json& rows = baseline["rows"];
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    s += std::string(i ? "," : "") + "\n  {";
    const char* keys[] = {"id", "set", "family", "signed_error_pct", "abs_error_pct", "why"};
    for (std::size_t k = 0; k < std::size(keys); ++k)
      s += std::string(k ? ", " : "") + "\"" + keys[k] + "\": " + r.value(keys[k], json()).dump();
    s += "}";
  }
  return s + "\n ]\n}\n";
}

}  // namespace csim::accuracy
