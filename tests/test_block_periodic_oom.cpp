// Out-of-memory layouts on the periodic path (docs/block-eval.md, "Out of memory"): the sweep's
// evaluation (block::evaluate_scenario) gives the whole Program's block-path figures — the OOM
// verdict's GPU, allocation name and steady-state flag, every GPU's peak to the byte — from two
// short pipelines, and falls back to the whole Program, with its reason, where the argument does
// not hold.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "backends/block/block_eval.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "test_support.hpp"

namespace {

using namespace csim;

double rel(double a, double b) {
  return b == 0 ? std::fabs(a) : std::fabs(a - b) / std::fabs(b);
}

std::string gpu_of(const char* base, int gib) {
  return std::string("cluster.gpu={\"base\": \"") + base +
         "\", \"memory_gib\": " + std::to_string(gib) + "}";
}

struct Outcome {
  bool periodic = false, oom = false;
};

// The sweep's evaluation against the block path on the whole Program: the same verdict and peaks
// exactly; the step time and exposed communication extended as for layouts that fit (within 1 %
// of the whole Program's, the bar tests/test_block_eval.cpp holds the periodic path to).
Outcome compare_with_whole(const std::string& file, const std::vector<std::string>& sets) {
  const core::Scenario sc = core::parse_scenario_file(test::scenario_path(file), sets);
  const block::EvalResult r = block::evaluate_scenario(sc);
  const block::EvalResult whole = block::evaluate(sc, core::lower(sc));
  INFO(file << " periodic " << r.periodic() << " (" << r.periodic_reason << ")");
  REQUIRE(whole.path == block::EvalPath::kBlock);
  REQUIRE(r.oom.has_value() == whole.oom.has_value());
  if (whole.oom) {
    INFO("whole: GPU " << whole.oom->gpu << " '" << whole.oom->op_name << "'");
    CHECK(r.oom->gpu == whole.oom->gpu);
    CHECK(r.oom->op_name == whole.oom->op_name);
    CHECK(r.oom->steady_state == whole.oom->steady_state);
  }
  REQUIRE(r.peaks.size() == whole.peaks.size());
  for (std::size_t k = 0; k < whole.peaks.size(); ++k) {
    INFO("GPU " << whole.peaks[k].gpu);
    CHECK(r.peaks[k].gpu == whole.peaks[k].gpu);
    CHECK(r.peaks[k].capacity_bytes == whole.peaks[k].capacity_bytes);
    CHECK(r.peaks[k].peak_bytes == whole.peaks[k].peak_bytes);
  }
  CHECK(rel(static_cast<double>(r.step_time_ns), static_cast<double>(whole.step_time_ns)) < 0.01);
  CHECK(rel(static_cast<double>(r.exposed_comm_ns), static_cast<double>(whole.exposed_comm_ns)) <
        0.01);
  // Where the periodic path declines an OOM layout it says why, under "out of memory: ".
  if (!r.periodic() && whole.oom && block::periodic_unsupported(sc).empty())
    CHECK(r.periodic_reason.rfind("out of memory: ", 0) == 0);
  return {r.periodic(), whole.oom.has_value()};
}

}  // namespace

TEST_CASE("periodic OOM: GPT-3 175B layouts tune visits, as the whole Program",
          "[block][periodic]") {
  // Batch 1,536: 96 micro-batches over 8 stages (short pipelines of 16 and 24), 48 with
  // micro-batch 2, or over 16 stages (32 and 48). Each layout is one tune simulates and rejects:
  // without full recompute the first stage of an interleaved pipeline holds the activations of
  // its in-flight micro-batches, more than an 80 GB A100 has beside the model states (the whole
  // Program's verdict, computed here, says which allocation); with ZeRO off the optimizer state
  // is not sharded and only the one-step projection of the steady state runs out (the
  // steady-state flag); on a 20 GiB GPU the second micro-batch's activations no longer fit. One
  // step, and two (the verdict over simulated steps).
  const std::string g3 = "gpt3_175b_1024xa100_3d.json", b = "training.global_batch=1536";
  for (const std::vector<std::string>& sets : std::vector<std::vector<std::string>>{
           {b, "strategy.recompute=none"},
           {b, "strategy.recompute=none", "training.steps=2"},
           {b, "strategy.micro_batch_size=2", "strategy.recompute=selective"},
           {b, "strategy.tp=4", "strategy.dp=32", "strategy.recompute=selective"},
           {b, "strategy.tp=4", "strategy.pp=16", "strategy.recompute=none"},
           {b, "strategy.zero_stage=0", "strategy.recompute=selective"},
           {b, gpu_of("A100-SXM4-80GB", 20)},
       }) {
    const Outcome o = compare_with_whole(g3, sets);
    CHECK(o.oom);
    CHECK(o.periodic);
  }
}

TEST_CASE("periodic OOM: the verdict at every capacity from fitting to the model states",
          "[block][periodic]") {
  // gpt_20b_64xa100_3d (pp 2, 32 micro-batches: short pipelines of 4 and 6) with its GPU's memory
  // lowered 1 GiB at a time from where it fits: the first allocation over capacity moves from the
  // first stage's activations (it holds 2 micro-batches in flight) to the second stage's, then to
  // the model states allocated at setup (fp32 main parameters, the grad buffer). At each the
  // sweep's evaluation is the whole Program's; where the two short pipelines' verdicts differ it
  // lowers the whole Program and says so (compare_with_whole).
  int periodic = 0, oom = 0;
  for (int gib = 20; gib >= 6; --gib) {
    INFO(gib << " GiB");
    const Outcome o =
        compare_with_whole("gpt_20b_64xa100_3d.json", {gpu_of("A100-SXM4-80GB", gib)});
    periodic += o.periodic && o.oom;
    oom += o.oom;
  }
  // It fits at 19 GiB and not at 17 (the whole Program's verdict): 17 down to 6 are at least 12
  // OOM layouts. These capacities' verdicts come from the short pipelines: activations of the
  // first stage (14), of the second (11), the model states (9, 8).
  CHECK(oom >= 12);
  for (int gib : {14, 11, 9, 8}) {
    INFO(gib << " GiB");
    const Outcome o =
        compare_with_whole("gpt_20b_64xa100_3d.json", {gpu_of("A100-SXM4-80GB", gib)});
    CHECK(o.oom);
    CHECK(o.periodic);
  }
  CHECK(periodic > 0);
}

TEST_CASE(
    "periodic OOM: GPipe runs out before the first stage's last forward, as the whole Program",
    "[block][periodic]") {
  // docs/block-eval.md, "Out of memory before the last forward". GPipe runs every micro-batch's
  // forward before any backward and holds each one's activations until then, so the first stage
  // adds one micro-batch's activations per forward: GPT-3 175B at batch 1,536 over dp 16 (96
  // micro-batches) with tp 8 and pp 8 (m = 12p, short pipelines of 16 and 24) and no recompute
  // runs out on GPU 0 at its 10th forward, 'mb9 activations' (the whole Program's verdict,
  // computed here); with tp 4 and pp 16 (m = 6p, short pipelines of 32 and 48) and ZeRO off at
  // 'mb10 activations'. Both come before the first stage starts the short pipeline's last
  // forward (mb 23, mb 47), so the verdict comes from the short pipelines; two steps too (the
  // argument looks at the first step).
  const std::string g3 = "gpt3_175b_1024xa100_3d.json", b = "training.global_batch=1536";
  const std::string gpipe = "strategy.schedule=gpipe", none = "strategy.recompute=none";
  const std::string one = "strategy.virtual_stages=1";
  for (const std::vector<std::string>& sets : std::vector<std::vector<std::string>>{
           {b, gpipe, one, none},
           {b, gpipe, one, none, "training.steps=2"},
           {b, gpipe, one, none, "strategy.tp=4", "strategy.pp=16", "strategy.zero_stage=0"},
       }) {
    const Outcome o = compare_with_whole(g3, sets);
    CHECK(o.oom);
    CHECK(o.periodic);
  }
  // With full recompute the stages hold one block input per micro-batch and the last stage runs
  // out first, at 'mb79 activations' (GPU 896, the whole Program's verdict): after the 24 forwards
  // of the longer short pipeline, which fits. The whole Program is lowered, and says why.
  {
    const std::vector<std::string> sets = {b, gpipe, one};
    const Outcome o = compare_with_whole(g3, sets);
    CHECK(o.oom);
    CHECK_FALSE(o.periodic);
    const core::Scenario sc = core::parse_scenario_file(test::scenario_path(g3), sets);
    CHECK(block::evaluate_scenario(sc).periodic_reason ==
          "out of memory: the shorter pipeline fits");
  }
}

TEST_CASE("periodic OOM: a GPipe pipeline at every capacity from fitting to the model states",
          "[block][periodic]") {
  // gpt_20b_64xa100_3d with the GPipe schedule: pp 2, 32 micro-batches (m = 16p; short pipelines
  // of 4 and 6), its GPU's memory lowered from 40 GiB to 8. The first allocation over capacity
  // moves from the first stage's 10th micro-batch's activations (40 GiB) down to its 2nd (14),
  // to the second stage's first (12, 10) and to the model states (8: the grad buffer, at setup).
  // At every capacity the sweep's evaluation is the whole Program's (compare_with_whole); where
  // the verdict names a micro-batch at or past the first stage's last forward in the longer short
  // pipeline (mb 5 of 0..5: 40 down to 28 GiB, 7 capacities) the whole Program is lowered, with
  // its reason: "the shorter pipeline fits" (mb 6 and later) or "… is not before the last
  // forward" (mb 5, and b's own verdict at 30 GiB).
  int periodic = 0, oom = 0;
  for (int gib = 40; gib >= 8; gib -= 2) {
    INFO(gib << " GiB");
    const Outcome o = compare_with_whole(
        "gpt_20b_64xa100_3d.json", {"strategy.schedule=gpipe", gpu_of("A100-SXM4-80GB", gib)});
    periodic += o.periodic && o.oom;
    oom += o.oom;
  }
  CHECK(oom == 17);
  // From 26 GiB down (mb 4 and earlier, the second stage, the model states): 10 capacities.
  CHECK(periodic == 10);
}

namespace {

// What tune asks (block::evaluate_scenario_verdict) against the block path on the whole Program:
// the same verdict (GPU, allocation, steady-state flag); where it says verdict_only, it came from
// one pipeline of 2p micro-batches, else every figure is evaluate_scenario's.
bool verdict_as_whole(const std::vector<std::string>& sets) {
  const core::Scenario sc =
      core::parse_scenario_file(test::scenario_path("gpt3_175b_1024xa100_3d.json"), sets);
  const block::EvalResult r = block::evaluate_scenario_verdict(sc);
  const block::EvalResult whole = block::evaluate(sc, core::lower(sc));
  INFO("verdict_only " << r.verdict_only << " (" << r.periodic_reason << ")");
  REQUIRE(r.oom.has_value() == whole.oom.has_value());
  if (whole.oom) {
    INFO("whole: GPU " << whole.oom->gpu << " '" << whole.oom->op_name << "'");
    CHECK(r.oom->gpu == whole.oom->gpu);
    CHECK(r.oom->op_name == whole.oom->op_name);
    CHECK(r.oom->steady_state == whole.oom->steady_state);
  }
  if (r.verdict_only) {
    CHECK(r.periodic_micro_batches[0] == 2 * sc.strategy.parallel.pp);
  } else {
    const block::EvalResult full = block::evaluate_scenario(sc);
    CHECK(r.step_time_ns == full.step_time_ns);
    CHECK(r.exposed_comm_ns == full.exposed_comm_ns);
    CHECK(r.max_peak_bytes() == full.max_peak_bytes());
  }
  return r.verdict_only;
}

}  // namespace

TEST_CASE("tune's verdict alone: m = 3p layouts from one pipeline of 2p", "[block][periodic]") {
  // docs/block-eval.md, "A verdict alone". GPT-3 175B at batch 1,536 with dp x micro-batch = 32
  // is 48 micro-batches, 3p over 16 stages, and 96 over 32 stages: too few for the two short
  // pipelines (2p + 3p micro-batches cost more than 3p), so the whole Program is lowered unless
  // the one pipeline of 2p micro-batches runs out before its last forward. Layouts tune visits and
  // rejects, with the whole Program's verdict on the first stage (computed here): 1F1B over 32
  // stages without recompute in its warm-up ('mb11 activations'; it holds up to 32), with
  // selective recompute at the first backward's recompute ('mb0 recomputed attention', still
  // before the 64th forward); interleaved over 16 stages with micro-batch 2 ('mb10 activations');
  // GPipe over 32 stages ('mb11 activations', and with selective recompute and ZeRO 1 'mb39
  // activations', before the 64th forward).
  const std::string b = "training.global_batch=1536", one = "strategy.virtual_stages=1";
  const std::string p32 = "strategy.pp=32", dp16 = "strategy.dp=16", tp2 = "strategy.tp=2";
  for (const std::vector<std::string>& sets : std::vector<std::vector<std::string>>{
           {b, one, "strategy.schedule=1f1b", p32, dp16, tp2, "strategy.recompute=none",
            "strategy.zero_stage=0"},
           {b, one, "strategy.schedule=1f1b", p32, dp16, tp2, "strategy.recompute=selective",
            "strategy.zero_stage=0"},
           {b, "strategy.pp=16", dp16, "strategy.tp=4", "strategy.micro_batch_size=2",
            "strategy.recompute=none", "strategy.zero_stage=0"},
           {b, one, "strategy.schedule=gpipe", p32, dp16, tp2, "strategy.recompute=none",
            "strategy.zero_stage=0"},
           {b, one, "strategy.schedule=gpipe", p32, dp16, tp2, "strategy.recompute=selective",
            "strategy.zero_stage=1"},
       }) {
    INFO(sets.back() << " " << sets[2]);
    CHECK(verdict_as_whole(sets));
  }
  // A layout that fits (tune's 26th: 1F1B over 32 stages, selective recompute, ZeRO 1): no
  // verdict from the 2p pipeline, the whole Program evaluated as evaluate_scenario does.
  CHECK_FALSE(verdict_as_whole({b, one, "strategy.schedule=1f1b", p32, dp16, tp2,
                                "strategy.recompute=selective", "strategy.zero_stage=1"}));
  // With as many micro-batches as 4p or more the periodic path answers, as in evaluate_scenario
  // (GPT-3's 96 over 8 stages, out of memory without recompute: "Out of memory").
  CHECK_FALSE(verdict_as_whole({b, "strategy.recompute=none"}));
}
