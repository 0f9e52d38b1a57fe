// The accuracy gate's rules (docs/accuracy.md, "The gate"; bench/accuracy/gate.cpp) on hand-made
// rows: the real rows are checked by the CTest accuracy:gate, these cases say that the checker
// fails what it must and passes what it must.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "bench/accuracy/accuracy.hpp"

using namespace csim::accuracy;
using nlohmann::json;

namespace {

Row row(const std::string& id, double signed_error) {
  Row r;
  r.id = id;
  r.set = "development";
  r.family = family_of(id);
  r.signed_error = signed_error;
  r.abs_error = std::abs(signed_error);
  return r;
}

json baseline(const std::vector<json>& rows) {
  json b = {{"about", "test"}};
  b["rows"] = rows;
  return b;
}

}  // namespace

TEST_CASE("accuracy gate: a row 1 point worse passes, more than 1 point worse fails") {
  // Baseline |error| 10.00 %: 10.99 % is within the one point of slack, 11.01 % is not.
  const json b = baseline({json{{"id", "torchtitan_x"}, {"abs_error_pct", 10.0}}});
  CHECK(check_against_baseline({row("torchtitan_x", 0.1099)}, b).failures.empty());
  CHECK(check_against_baseline({row("torchtitan_x", -0.1099)}, b).failures.empty());
  const GateResult g = check_against_baseline({row("torchtitan_x", -0.1101)}, b);
  REQUIRE(g.failures.size() == 1);
  CHECK(g.failures[0].find("10.00 % -> 11.01 %") != std::string::npos);
  // Better is always fine: 2 % against a baseline of 10 %.
  CHECK(check_against_baseline({row("torchtitan_x", 0.02)}, b).failures.empty());
}

TEST_CASE("accuracy gate: a new row, a vanished row and a lost prediction fail") {
  const json b = baseline({json{{"id", "nccl_a"}, {"abs_error_pct", 1.0}},
                           json{{"id", "nccl_b"}, {"abs_error_pct", 2.0}}});
  Row lost = row("nccl_b", 0);
  lost.signed_error = lost.abs_error = kNaN;  // not predicted any more
  const GateResult g = check_against_baseline({lost, row("nccl_new", 0.0)}, b);
  // nccl_b lost its prediction, nccl_new is not in the baseline, nccl_a is gone.
  REQUIRE(g.failures.size() == 3);
  CHECK(g.failures[0].rfind("nccl_b: predicted before", 0) == 0);
  CHECK(g.failures[1].rfind("nccl_new: missing from the baseline", 0) == 0);
  CHECK(g.failures[2].rfind("nccl_a: in the baseline but no longer a row", 0) == 0);
  CHECK(g.rows_checked == 1);
}

TEST_CASE("accuracy baseline: a moved row needs a reason, an unmoved one keeps its own") {
  const json old = baseline({json{{"id", "mlperf_a"}, {"signed_error_pct", 17.3}, {"why", "gap"}},
                             json{{"id", "mlperf_b"}, {"signed_error_pct", 5.0}, {"why", "ok"}}});
  // mlperf_a moves by 0.04 points (not moved: at most 0.05), mlperf_b by 1 point.
  const std::vector<Row> rows = {row("mlperf_a", 0.1734), row("mlperf_b", 0.06)};
  CHECK_THROWS_AS(make_baseline(rows, old, {}), std::invalid_argument);
  const json b = make_baseline(rows, old, {{"mlperf_b", "a faster kernel"}});
  CHECK(b["rows"][0]["why"] == "gap");
  CHECK(b["rows"][0]["signed_error_pct"] == 17.34);
  CHECK(b["rows"][1]["why"] == "a faster kernel");
  CHECK(b["rows"][1]["abs_error_pct"] == 6.0);
  // A reason given by id replaces a row's old one even when it did not move (a constant refitted
  // on it); the wildcard does not touch rows that did not move.
  const json c = make_baseline(rows, old, {{"mlperf_a", "refitted"}, {"*", "faster"}});
  CHECK(c["rows"][0]["why"] == "refitted");
  CHECK(c["rows"][1]["why"] == "faster");
  CHECK(make_baseline(rows, old, {{"*", "faster"}})["rows"][0]["why"] == "gap");
  // The committed text has one row per line.
  const std::string text = baseline_text(b);
  CHECK(text.find("\n  {\"id\": \"mlperf_a\", \"set\": \"development\"") != std::string::npos);
}

TEST_CASE("accuracy families come from the row's id") {
  CHECK(family_of("megatron21_t2_zero3_174B_384gpu") == "ZeRO-3");
  CHECK(family_of("megatron21_t1_1.7B") == "Megatron");
  CHECK(family_of("korthikanti_fig1_mem_gpt3-175B") == "Korthikanti");
  CHECK(family_of("hf_dp_ddp_DistributedDataParallel_pcie") == "DDP");
  CHECK(family_of("nemo2412_LLAMA3-8B_8") == "NeMo");
}
