// tune's memory bound counts the saved activations a pipeline stage holds at once in its backward
// phase (sweep/in_flight.hpp; docs/sweep.md, "Tune", "Bounds"): the closed forms against the
// lowering's own schedules; the activations and logits, derived by hand for small 1F1B,
// interleaved, DualPipeV and GPipe layouts, against the simulated memory; and the report's count
// of the layouts that cannot fit on their model states alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "core/json_diagnostics.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "lowered_run.hpp"
#include "run/scenario_loader.hpp"
#include "sweep/evaluate.hpp"
#include "sweep/in_flight.hpp"
#include "sweep/tune.hpp"
#include "test_support.hpp"

using namespace csim;

namespace {

// Walks core::pipeline_schedule of stage `s` as the lowering emits it (a forward allocates its
// pass's saved activations, a backward frees them when it closes) and returns, at each backward
// before its free, the passes held per chunk.
std::vector<std::vector<int>> held_at_backwards(core::PipelineSchedule sched, int p, int v, int m,
                                                int s) {
  std::vector<int> held(static_cast<std::size_t>(v), 0);
  std::vector<std::vector<int>> out;
  for (const core::PipeStep& st : core::pipeline_schedule(sched, p, v, m, s)) {
    if (st.forward) {
      ++held[static_cast<std::size_t>(st.chunk)];
      continue;
    }
    out.push_back(held);
    --held[static_cast<std::size_t>(st.chunk)];
  }
  return out;
}

int sum(const std::vector<int>& v) {
  return std::accumulate(v.begin(), v.end(), 0);
}

}  // namespace

TEST_CASE("the in-flight counts are the lowering's schedules' at the backward they name",
          "[sweep][tune][in_flight]") {
  using core::PipelineSchedule;
  for (int p = 1; p <= 6; ++p)
    for (int s = 0; s < p; ++s) {
      for (int m = 1; m <= 3 * p + 1; ++m)
        for (const PipelineSchedule sched : {PipelineSchedule::kGpipe, PipelineSchedule::k1f1b}) {
          INFO(core::to_string(sched) << " p " << p << " s " << s << " m " << m);
          const std::vector<std::vector<int>> at = held_at_backwards(sched, p, 1, m, s);
          CHECK(sweep::held_chunk_passes(sched, p, 1, m, s) == at.front());
        }
      // Interleaved: m a multiple of p (the parser's rule), v 2 and 3.
      for (int v = 2; v <= 3; ++v)
        for (int m = p; m <= 4 * p; m += p) {
          INFO("interleaved p " << p << " v " << v << " s " << s << " m " << m);
          const std::vector<std::vector<int>> at =
              held_at_backwards(PipelineSchedule::kInterleaved, p, v, m, s);
          CHECK(sweep::held_chunk_passes(PipelineSchedule::kInterleaved, p, v, m, s) == at.front());
        }
      // DualPipeV (p >= 2, m >= 2p): the counts are held at one of its backwards (phase 4's
      // first), and that is the most any backward holds: 2p + 1 passes.
      if (p < 2) continue;
      for (int m = 2 * p; m <= 4 * p; ++m) {
        INFO("dualpipev p " << p << " s " << s << " m " << m);
        const std::vector<int> n =
            sweep::held_chunk_passes(PipelineSchedule::kDualPipeV, p, 2, m, s);
        const std::vector<std::vector<int>> at =
            held_at_backwards(PipelineSchedule::kDualPipeV, p, 2, m, s);
        CHECK(std::find(at.begin(), at.end(), n) != at.end());
        int most = 0;
        for (const std::vector<int>& h : at) most = std::max(most, sum(h));
        CHECK(sum(n) == most);
        CHECK(sum(n) == 2 * p + 1);
      }
    }
}

// gpt_tiny_2xa100 (tests/data/sweep): 4 blocks, h 1024, a 16, s 1024, global batch 16, on two
// A100s as dp 1 x tp 1 x pp 2, micro-batch 2, so m = 16 / 2 = 8; no recompute, 2 steps.
// A block keeps sh(34 + 5as/h) = 1024 x 1024 x (34 + 5 x 16 x 1024 / 1024) = 119,537,664 B per
// sample (Korthikanti et al. 2022, table 2), 239,075,328 B per micro-batch of 2.
//   1F1B: stage 0 runs p - 0 - 1 = 1 warm-up forward and one steady forward before its first
//         backward: 2 passes of segment 0 (embedding + block 0 + block 1); stage 1: 1 pass of
//         segment 1 (blocks 2, 3 + final norm + LM head).
//   interleaved (v 2, one block per segment; chunk c of stage s is segment c p + s):
//         stage 0: w = 2 (2 - 0 - 1) + (2 - 1) 2 = 4, n = 5 forwards, chunks (k mod 4) / 2 =
//         0, 0, 1, 1, 0: 3 passes of segment 0, 2 of segment 2;
//         stage 1: w = 0 + 2 = 2, n = 3: chunks 0, 0, 1: 2 passes of segment 1, 1 of segment 3.
//   DualPipeV (v 2; stage s holds segments s and 3 - s): n_0 = 2p - s, n_1 = s + 1:
//         stage 0: 4 passes of segment 0, 1 of segment 3; stage 1: 3 of segment 1, 2 of segment 2.
//   GPipe: all m = 8 forwards first: 8 passes of segment 0 on stage 0, 8 of segment 1 on stage 1.
// The stage holding the last segment also holds each of those passes' logits, b s V e =
// 2 x 1024 x 32,000 x 2 B = 131,072,000 B (bf16): 1 pass under 1F1B, interleaved and DualPipeV
// (on stage 0 there), 8 under GPipe.
// Each stage's simulated activation peak is at least what it holds then, and the bound (with
// these activations) is at most the simulated peak.
TEST_CASE("the memory bound's in-flight activations are derived by hand and below the simulation",
          "[sweep][tune][in_flight]") {
  const std::string path = test::repo_path("tests/data/sweep/gpt_tiny_2xa100.json");
  const nlohmann::json doc = core::parse_json_strict(test::read_file(path), path);
  struct Case {
    const char* strategy;
    std::vector<std::vector<std::pair<int, int>>> held;  // per stage: (segment, passes)
    int logits_stage, logits_passes;                     // the last segment's
  };
  const std::vector<Case> cases{
      {R"({"kind":"3d","pp":2,"micro_batch_size":2,"schedule":"1f1b"})",
       {{{0, 2}}, {{1, 1}}},
       1,
       1},
      {R"({"kind":"3d","pp":2,"micro_batch_size":2,"schedule":"interleaved","virtual_stages":2})",
       {{{0, 3}, {2, 2}}, {{1, 2}, {3, 1}}},
       1,
       1},
      {R"({"kind":"3d","pp":2,"micro_batch_size":2,"schedule":"dualpipev"})",
       {{{0, 4}, {3, 1}}, {{1, 3}, {2, 2}}},
       0,
       1},
      {R"({"kind":"3d","pp":2,"micro_batch_size":2,"schedule":"gpipe"})",
       {{{0, 8}}, {{1, 8}}},
       1,
       8},
  };
  const double logits_pass = 2.0 * 1024 * 32000 * 2;
  const double block_pass = 1024.0 * 1024 * (34 + 5.0 * 16 * 1024 / 1024) * 2;
  CHECK(block_pass == 239075328.0);
  for (const Case& k : cases) {
    INFO(k.strategy);
    const std::vector<std::string> sets{"cluster.gpus_per_node=2", "training.steps=2",
                                        std::string("strategy=") + k.strategy};
    const core::Scenario s = run::load_scenario_document(doc, path, sets);
    const core::ParallelSpec& ps = s.strategy.parallel;
    REQUIRE(ps.micro_batches == 8);
    const std::vector<core::Segment> seg =
        core::partition_layers(s.model, ps.pp * ps.virtual_stages, ps.segment_blocks);
    auto pass = [&](int g) {
      return static_cast<double>(std::llround(core::rank_stored_activation_bytes_per_sample(
                                                  s.model, seg[static_cast<std::size_t>(g)], ps) *
                                              2));
    };
    // The middle segments hold blocks only: one block's pass each (two with v 1).
    if (ps.virtual_stages == 2) {
      CHECK(pass(1) == block_pass);
      CHECK(pass(2) == block_pass);
    }
    std::vector<double> acts, logits;
    for (int st = 0; st < 2; ++st) {
      logits.push_back(st == k.logits_stage ? k.logits_passes * logits_pass : 0.0);
      double a = 0;
      for (const auto& [g, n] : k.held[static_cast<std::size_t>(st)]) {
        CHECK(core::pipeline_stage_of_segment(ps, g) == st);
        CHECK(sweep::held_chunk_passes(
                  ps.schedule, 2, ps.virtual_stages, 8,
                  st)[static_cast<std::size_t>(core::pipeline_chunk_of_segment(ps, g))] == n);
        a += n * pass(g);
      }
      acts.push_back(a);
    }
    const sweep::MemoryBound b = sweep::memory_bound(s, 2);
    CHECK(b.activations == acts[static_cast<std::size_t>(b.stage)]);
    CHECK(b.logits == logits[static_cast<std::size_t>(b.stage)]);
    // Against the op-level simulation: each stage GPU's activation peak (rank = stage here)
    // holds its in-flight passes at least, and the bound is below the simulated peak.
    const test::Run run = test::simulate(s);
    for (int st = 0; st < 2; ++st) {
      INFO("stage " << st);
      CHECK(static_cast<double>(test::peak_in(run, st, {core::MemCategory::kActivations})) >=
            acts[static_cast<std::size_t>(st)] + logits[static_cast<std::size_t>(st)]);
    }
    const sweep::VariantResult v = sweep::evaluate_variant(doc, path, sets);
    REQUIRE(v.status == sweep::VariantStatus::kOk);
    CHECK(b.bytes / kGiB <= v.peak_gib);
    // The old term, one pass of the stage's first segment, would be below it by the passes
    // beyond the first: the bound is tighter by at least one block's pass.
    CHECK(b.activations >= pass(core::pipeline_segment(ps, 0, b.stage)) + block_pass);
  }
}

// The report says which bound removed each candidate. On gpt_tiny_2xa100 with a GPU whose usable
// memory is 1.1 x the model states of the 1F1B layout above (pp 2, micro-batch 2), below its
// bound (the states plus 2 passes of 2 blocks in flight, 2 x 478 MB), that layout cannot fit only
// with its activations, while the pp 1 ZeRO 0 layouts hold the states of all 84M parameters,
// about twice a stage's: both kinds are counted, and each candidate by what its own bounds say.
TEST_CASE("tune counts the layouts that cannot fit on their model states alone",
          "[sweep][tune][in_flight]") {
  const std::string path = test::repo_path("tests/data/sweep/gpt_tiny_2xa100.json");
  const nlohmann::json doc = core::parse_json_strict(test::read_file(path), path);
  const core::Scenario s = run::load_scenario_document(
      doc, path,
      {"cluster.gpus_per_node=2",
       R"(strategy={"kind":"3d","pp":2,"micro_batch_size":2,"schedule":"1f1b"})"});
  const sweep::MemoryBound b = sweep::memory_bound(s, 2);
  const double usable = 1.1 * b.without_activations;
  REQUIRE(usable < b.bytes);
  char gpu[200];
  std::snprintf(gpu, sizeof gpu, "cluster.gpu={\"base\":\"A100-SXM4-80GB\",\"memory_gib\":%.9f}",
                usable / kGiB);
  sweep::TuneOptions o;
  o.threads = 2;
  const sweep::TuneResult r =
      sweep::tune(doc, path,
                  {gpu,
                   "cluster.reserve={\"cuda_context_mb\":0.001,\"nccl_buffers_mb\":0.001,"
                   "\"workspace_mb\":0.001}"},
                  o);
  std::size_t alone = 0, with_acts = 0;
  bool layout_seen = false;
  for (const sweep::TuneCandidate& c : r.candidates) {
    if (c.verdict != sweep::TuneVerdict::kCannotFit) continue;
    INFO(c.label);
    CHECK(c.states_alone_gib <= c.model_states_gib);
    (c.states_alone_gib > c.usable_gib ? alone : with_acts) += 1;
    if (c.label.find("pp 2 mbs 2 1f1b zero 0 rc none") != std::string::npos) {
      layout_seen = true;
      CHECK(c.states_alone_gib <= c.usable_gib);
    }
  }
  CHECK(layout_seen);
  CHECK(alone > 0);
  CHECK(with_acts > 0);
  const nlohmann::json j = sweep::tune_report_json(r, 1);
  CHECK(j["cannot_fit_states_alone"] == alone);
  CHECK(j["cannot_fit"] == alone + with_acts);
  std::ostringstream out;
  sweep::print_tune_report(r, 1, 0, out);
  CHECK(out.str().find(std::to_string(alone + with_acts) +
                       " cannot fit (memory bound: " + std::to_string(alone) +
                       " on the model states alone, " + std::to_string(with_acts) +
                       " with the saved activations)") != std::string::npos);
}
