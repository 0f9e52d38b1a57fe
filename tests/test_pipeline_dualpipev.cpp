// strategy.schedule dualpipev (core/lowering/pipeline_dualpipev.cpp; docs/program.md, "DualPipeV"):
// the step order against DeepSeek's dualpipe/dualpipev.py, the V placement, the simulated step
// (no deadlock, its bubble against 1F1B, its activation memory) and the parser's refusals. Every
// expected value is derived beside it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/moe_a2a_overlap.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "lowered_run.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// "F0.3" is the forward of chunk 0, micro-batch 3; "B1.0" the backward of chunk 1, micro-batch 0.
std::string order(const std::vector<PipeStep>& steps) {
  std::string out;
  for (const PipeStep& s : steps) {
    if (!out.empty()) out += ' ';
    out += (s.forward ? "F" : "B") + std::to_string(s.chunk) + "." + std::to_string(s.micro);
  }
  return out;
}

// A pair (dualpipev.py's _forward_backward_chunk) written "F0.3&B1.1".
std::string pairs(const std::vector<DualPipeStep>& steps) {
  std::string out;
  for (const DualPipeStep& d : steps) {
    if (!out.empty()) out += ' ';
    out += order({d.a});
    if (d.paired) out += "&" + order({d.b});
  }
  return out;
}

// An explicit model of `n` identical layers (`flops` forward FLOPs, `act` saved bytes, 1-byte
// outputs, no parameters) on `gpus` A100s, pipeline of `pp` stages with `m` micro-batches of one
// sample; communication-computation interference off (nccl_sms 0) so that uniform stages stay
// uniform (as tests/test_strategies.cpp's bubble test).
Scenario uniform(int gpus, int n, double flops, double act, int pp, int m,
                 const std::string& schedule) {
  std::string layers;
  for (int i = 0; i < n; ++i) {
    layers +=
        std::string(i ? "," : "") + "{\"name\":\"l" + std::to_string(i) +
        "\",\"kind\":\"gemm\",\"params\":0,\"fwd_flops_per_sample\":" + std::to_string(flops) +
        ",\"activation_bytes_per_sample\":" + std::to_string(act) +
        ",\"output_bytes_per_sample\":1}";
  }
  const std::string json =
      "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":" + std::to_string(gpus) +
      ",\"gpu\":{\"base\":\"A100-SXM4-80GB\",\"nccl_sms\":0}},\"host\":{\"python\":false},"
      "\"model\":{\"explicit\":[" +
      layers +
      "],\"input_bytes_per_sample\":0},\"training\":{\"global_batch\":" + std::to_string(m) +
      ",\"precision\":\"bf16\",\"optimizer\":\"sgd\",\"steps\":1},\"strategy\":{\"kind\":"
      "\"pipeline\",\"pp\":" +
      std::to_string(pp) + ",\"micro_batch_size\":1,\"schedule\":\"" + schedule + "\"}}";
  return parse_scenario_string(json, "dualpipev.json", {});
}

using csim::test::max_in_flight;
using csim::test::peak_in;
using csim::test::Run;
using csim::test::simulate;

// First forward start to last backward end over all GPUs.
TimeNs flush_ns(const Run& run) {
  TimeNs first = -1, last = 0;
  for (const Op& op : run.p.ops) {
    if (op.kind != OpKind::kCompute ||
        (op.phase != Phase::kForward && op.phase != Phase::kBackward))
      continue;
    const OpTiming& t = run.r.timings[static_cast<std::size_t>(op.id)];
    if (first < 0 || t.start_ns < first) first = t.start_ns;
    last = std::max(last, t.end_ns);
  }
  return last - first;
}

// Forward/backward kernel time of GPU `gpu`.
TimeNs busy_ns(const Run& run, int gpu) {
  TimeNs busy = 0;
  for (const Op& op : run.p.ops) {
    if (op.kind != OpKind::kCompute || op.gpu != gpu ||
        (op.phase != Phase::kForward && op.phase != Phase::kBackward))
      continue;
    const OpTiming& t = run.r.timings[static_cast<std::size_t>(op.id)];
    busy += t.end_ns - t.start_ns;
  }
  return busy;
}

std::string error_of(const std::string& json) {
  try {
    parse_scenario_string(json, "dualpipev.json", {});
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("dualpipev: step order of dualpipev.py's step() for p = 2, m = 4 and p = 4, m = 8",
          "[pipeline][dualpipev]") {
  // dualpipev.py, step(), rank r of p, m micro-batches, each chunk's forwards and backwards in
  // micro-batch order (F0 = chunk 0 forward, ...; "&" one _forward_backward_chunk call):
  //   1: 2(p-r-1) x F0   2: (r+1) x F0 F1   3: (p-r-1) x B1 F1
  //   4: (m-2p+r+1) x F0&B1 F1&B0 (on the last rank the first F0, B1 unpaired)
  //   5: (p-r-1) x B1 F1&B0   6: (r+1) x B1 B0   7: (p-r-1) x B0
  // p = 2, m = 4, rank 0: 1: F0.0 F0.1 | 2: F0.2 F1.0 | 3: B1.0 F1.1 | 4 (1 round):
  // F0.3&B1.1 F1.2&B0.0 | 5: B1.2 F1.3&B0.1 | 6: B1.3 B0.2 | 7: B0.3.
  CHECK(pairs(dualpipev_schedule(2, 4, 0)) ==
        "F0.0 F0.1 F0.2 F1.0 B1.0 F1.1 F0.3&B1.1 F1.2&B0.0 B1.2 F1.3&B0.1 B1.3 B0.2 B0.3");
  // Rank 1 (the last): 1: none | 2 (2 rounds): F0.0 F1.0 F0.1 F1.1 | 3: none | 4 (2 rounds):
  // F0.2 B1.0 (unpaired) F1.2&B0.0, F0.3&B1.1 F1.3&B0.1 | 5: none | 6: B1.2 B0.2 B1.3 B0.3.
  CHECK(pairs(dualpipev_schedule(2, 4, 1)) ==
        "F0.0 F1.0 F0.1 F1.1 F0.2 B1.0 F1.2&B0.0 F0.3&B1.1 F1.3&B0.1 B1.2 B0.2 B1.3 B0.3");
  // pipeline_schedule flattens a pair into its forward, then its backward.
  CHECK(order(pipeline_schedule(PipelineSchedule::kDualPipeV, 2, 2, 4, 0)) ==
        "F0.0 F0.1 F0.2 F1.0 B1.0 F1.1 F0.3 B1.1 F1.2 B0.0 B1.2 F1.3 B0.1 B1.3 B0.2 B0.3");
  // p = 4, m = 8, rank 1: 1: 2(4-1-1) = 4 x F0 | 2: 2 x F0 F1 | 3: 2 x B1 F1 |
  // 4: 8-8+2 = 2 rounds | 5: 2 x B1 F1&B0 | 6: 2 x B1 B0 | 7: 2 x B0.
  CHECK(pairs(dualpipev_schedule(4, 8, 1)) ==
        "F0.0 F0.1 F0.2 F0.3 F0.4 F1.0 F0.5 F1.1 B1.0 F1.2 B1.1 F1.3 F0.6&B1.2 F1.4&B0.0 "
        "F0.7&B1.3 F1.5&B0.1 B1.4 F1.6&B0.2 B1.5 F1.7&B0.3 B1.6 B0.4 B1.7 B0.5 B0.6 B0.7");
  // Every (chunk, micro-batch) once forward and once backward, forward first, on every rank,
  // and at most 2p + 1 chunk passes in flight: after steps 1-2, 2(p-r-1) + (r+1) F0 and (r+1)
  // F1 = 2p; step 3 keeps 2p (B1 then F1); step 4's F0 before its B1 reaches 2p + 1 (the
  // README's "PP + 1" activations per device, PP = 2p chunks).
  for (int p : {2, 4, 8}) {
    for (int m : {2 * p, 2 * p + 1, 4 * p}) {
      for (int r = 0; r < p; ++r) {
        const auto steps = pipeline_schedule(PipelineSchedule::kDualPipeV, p, 2, m, r);
        std::map<std::pair<int, int>, int> seen;
        for (const PipeStep& st : steps) {
          auto& n = seen[{st.chunk, st.micro}];
          if (!st.forward) CHECK(n == 1);  // its forward came first
          n += st.forward ? 1 : 10;
        }
        CHECK(seen.size() == static_cast<std::size_t>(2 * m));
        for (const auto& [k, n] : seen) CHECK(n == 11);
        CHECK(max_in_flight(steps) == 2 * p + 1);
      }
    }
  }
}

TEST_CASE("dualpipev: V placement, embedding and LM head on rank 0", "[pipeline][dualpipev]") {
  // pp 4, 8 segments: rank r holds segments r and 7 - r.
  ParallelSpec ps;
  ps.pp = 4;
  ps.virtual_stages = 2;
  ps.schedule = PipelineSchedule::kDualPipeV;
  const int want_stage[8] = {0, 1, 2, 3, 3, 2, 1, 0};
  for (int g = 0; g < 8; ++g) {
    CHECK(pipeline_stage_of_segment(ps, g) == want_stage[g]);
    CHECK(pipeline_chunk_of_segment(ps, g) == (g < 4 ? 0 : 1));
    CHECK(pipeline_segment(ps, pipeline_chunk_of_segment(ps, g), want_stage[g]) == g);
  }
  // The other schedules keep the chunk-major placement: segment g on stage g mod pp.
  ps.schedule = PipelineSchedule::kInterleaved;
  for (int g = 0; g < 8; ++g) CHECK(pipeline_stage_of_segment(ps, g) == g % 4);

  // A GPT of 8 blocks on pp 4: one block per segment; rank 0 runs the embedding (segment 0) and
  // ln_f + lm_head (segment 7), rank 3 the blocks 3 and 4.
  const std::string json =
      "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":4,\"gpu\":\"A100-SXM4-80GB\"},"
      "\"host\":{\"python\":false},\"model\":{\"gpt\":{\"layers\":8,\"hidden\":64,\"heads\":4,"
      "\"seq_len\":32,\"vocab\":512}},\"training\":{\"global_batch\":8,\"precision\":\"bf16\","
      "\"steps\":1},\"strategy\":{\"kind\":\"pipeline\",\"pp\":4,\"micro_batch_size\":1,"
      "\"schedule\":\"dualpipev\"}}";
  const Scenario s = parse_scenario_string(json, "v.json", {});
  CHECK(s.strategy.parallel.virtual_stages == 2);  // implied
  const std::vector<Segment> segs = partition_layers(s.model, 8);
  // Which GPU runs each layer's forward kernels in the lowered Program.
  const Program prog = lower(s);
  std::map<std::string, std::set<int>> gpus_of;
  for (const Op& op : prog.ops) {
    if (op.kind != OpKind::kCompute || op.phase != Phase::kForward) continue;
    gpus_of[prog.name_of(op)].insert(op.gpu);
  }
  auto gpus_running = [&](const std::string& needle) {
    std::set<int> out;
    for (const auto& [name, g] : gpus_of)
      if (name.find(needle) != std::string::npos) out.insert(g.begin(), g.end());
    return out;
  };
  CHECK(gpus_running("embed") == std::set<int>{0});
  CHECK(gpus_running("lm_head") == std::set<int>{0});
  CHECK(gpus_running("h.0.") == std::set<int>{0});
  CHECK(gpus_running("h.3.") == std::set<int>{3});
  CHECK(gpus_running("h.4.") == std::set<int>{3});
  CHECK(gpus_running("h.7.") == std::set<int>{0});
  // The parameters follow: max_stage_params is rank 0's (embedding + block 0 + block 7 + ln_f +
  // lm_head), the most of any rank.
  std::int64_t rank0 = 0;
  for (int g : {0, 7})
    for (int i = segs[static_cast<std::size_t>(g)].first; i < segs[static_cast<std::size_t>(g)].end;
         ++i)
      rank0 += s.model.layers[static_cast<std::size_t>(i)].params;
  CHECK(max_stage_params(s.model, s.strategy.parallel) == rank0);
}

TEST_CASE("dualpipev: simulates without deadlock for pp 4 and 8, m = 2pp and 4pp",
          "[pipeline][dualpipev][sim]") {
  for (int pp : {4, 8}) {
    for (int m : {2 * pp, 4 * pp}) {
      const Run run = simulate(uniform(pp, 2 * pp, 1e11, 0, pp, m, "dualpipev"));
      // Every GPU computes its two chunks' m forwards and m backwards: equal busy time.
      for (int g = 1; g < pp; ++g) CHECK(busy_ns(run, g) == busy_ns(run, 0));
    }
  }
}

TEST_CASE("dualpipev: bubble against 1F1B on a uniform model", "[pipeline][dualpipev][sim]") {
  // 8 identical layers, p = 4 ranks, m = 8: 1F1B runs 2 layers per stage, DualPipeV 1 per chunk.
  // With F the forward of one layer and B = 2F its backward (one pass: no B/W split), each rank
  // computes m * 2 (F + B) = 48 F either way. 1F1B's flush: (m + p - 1) * 2 (F + B) = 66 F, a
  // bubble of (p - 1) * 2 (F + B) = 18 F. DualPipeV's (README, "Pipeline Bubbles"): (PP/2 - 1)
  // (F&B + B - 3W) with PP = 2p chunks; unpaired passes (F&B = F + B) and no W split (W = 0)
  // make it (p - 1)(F + 2B) = 15 F, a flush of 63 F. The simulation keeps the order of the
  // schedule's passes but lets a pass start as soon as its input has arrived, so the bubble is
  // at most that: 48 F < flush <= 63 F (plus the transfers: 1-byte sends, a few us).
  const Run v1 = simulate(uniform(4, 8, 2e12, 0, 4, 8, "1f1b"));
  const Run dv = simulate(uniform(4, 8, 2e12, 0, 4, 8, "dualpipev"));
  const double F = static_cast<double>(busy_ns(dv, 0)) / 48.0;
  CHECK(static_cast<double>(flush_ns(v1)) == Approx(66 * F).epsilon(0.01));
  CHECK(static_cast<double>(flush_ns(dv)) <= 63 * F * 1.01);
  CHECK(static_cast<double>(flush_ns(dv)) > 48 * F);
  CHECK(flush_ns(dv) < flush_ns(v1));
}

TEST_CASE("dualpipev: activations in flight, 2p + 1 chunks on every rank",
          "[pipeline][dualpipev][sim]") {
  // 8 layers saving A = 1 MiB per sample each, p = 4, m = 8 micro-batches of 1 sample.
  // 1F1B: stage 0 holds p = 4 micro-batches x 2 layers = 8 A (tests/test_strategies.cpp).
  // DualPipeV: every rank holds at most 2p + 1 = 9 chunk passes (the schedule test above) of one
  // layer each = 9 A = 8 A x (1 + 1/(2p)): the README's "PP + 1" chunk activations per device
  // for PP = 2p chunks, against 1F1B's PP = p stages' worth on its first stage. Rank 0 also holds
  // the 1-byte logits of the micro-batches between their loss and their backward (at most m
  // bytes).
  const double A = 1 << 20;
  const Run v1 = simulate(uniform(4, 8, 1e10, A, 4, 8, "1f1b"));
  const Run dv = simulate(uniform(4, 8, 1e10, A, 4, 8, "dualpipev"));
  CHECK(peak_in(v1, 0, {MemCategory::kActivations}) == static_cast<Bytes>(8 * A));
  for (int g = 0; g < 4; ++g) {
    CHECK(peak_in(dv, g, {MemCategory::kActivations}) >= static_cast<Bytes>(9 * A));
    CHECK(peak_in(dv, g, {MemCategory::kActivations}) <= static_cast<Bytes>(9 * A) + 8);
  }
}

TEST_CASE("dualpipev: bad inputs name the keys", "[pipeline][dualpipev][bad_input]") {
  const std::string base =
      "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":4,\"gpu\":\"A100-SXM4-80GB\"},"
      "\"host\":{\"python\":false},\"model\":{\"gpt\":{\"layers\":8,\"hidden\":64,\"heads\":4,"
      "\"seq_len\":32,\"vocab\":512}},\"training\":{\"global_batch\":@GB@,\"precision\":\"bf16\","
      "\"steps\":1},\"strategy\":{\"kind\":\"pipeline\",\"pp\":@PP@,\"micro_batch_size\":1,"
      "\"schedule\":\"dualpipev\"@EXTRA@}}";
  auto scenario = [&](int gb, int pp, const std::string& extra) {
    std::string s = base;
    s.replace(s.find("@GB@"), 4, std::to_string(gb));
    s.replace(s.find("@PP@"), 4, std::to_string(pp));
    s.replace(s.find("@EXTRA@"), 7, extra);
    return s;
  };
  CHECK(error_of(scenario(8, 4, "")) == "no error");  // m = 8 = 2 * pp
  CHECK(error_of(scenario(8, 4, ",\"virtual_stages\":2")) == "no error");
  // m = 7 < 2 * pp = 8 (DualPipeV.step: assert num_chunks >= num_ranks * 2).
  CHECK_THAT(error_of(scenario(7, 4, "")),
             Catch::Contains("strategy.schedule") && Catch::Contains("strategy.pp") &&
                 Catch::Contains("dualpipev needs at least 2 * strategy.pp = 8"));
  CHECK_THAT(error_of(scenario(8, 4, ",\"virtual_stages\":3")),
             Catch::Contains("strategy.virtual_stages") &&
                 Catch::Contains("dualpipev runs exactly 2 model chunks per stage"));
  CHECK_THAT(error_of(scenario(8, 1, ",\"dp\":4")),
             Catch::Contains("dualpipev needs a pipeline of strategy.pp >= 2"));
}

TEST_CASE("dualpipev: moe_a2a_overlap 1f1b merges DualPipeV's own F&B pairs",
          "[pipeline][dualpipev][ep][a2a_overlap][sim]") {
  // pp 2, dp 2, ep 2 on 4 one-GPU nodes (the all-to-alls cross the NICs), 4 MoE blocks: one per
  // segment; m = 16 / (dp 2 x 1) = 8 >= 2 pp. overlap_schedule under dualpipev is
  // dualpipev_schedule's own pairing: on rank 0 (p 2, m 8), steps 4 and 5 hold
  // 2 (m - 2p + 1) + 1 = 11 pairs.
  const auto steps = hybrid::overlap_schedule(PipelineSchedule::kDualPipeV, 2, 2, 8, 0);
  CHECK(std::count_if(steps.begin(), steps.end(),
                      [](const hybrid::OverlapStep& s) { return s.paired; }) == 11);
  auto scenario = [](const std::string& overlap) {
    return parse_scenario_string(
        R"({"cluster": {"nodes": 4, "gpus_per_node": 1, "nics_per_node": 1, "nic_gbps": 400,
        "gpu": "H100-SXM5-80GB"}, "model": {"transformer": {"layers": 4, "hidden": 1024,
        "heads": 8, "ffn_hidden": 2048, "seq_len": 512, "vocab": 1000, "mlp": "swiglu",
        "norm": "rmsnorm", "position": "rope", "moe": {"experts": 8, "top_k": 2,
        "expert_ffn_hidden": 1024}}}, "training": {"global_batch": 16, "precision": "bf16",
        "optimizer": "adam", "steps": 1}, "strategy": {"kind": "3d", "pp": 2, "dp": 2, "ep": 2,
        "micro_batch_size": 1, "schedule": "dualpipev", "moe_a2a_overlap": ")" +
            overlap + "\"}}",
        "dualpipev_ep.json", {});
  };
  const Run none = simulate(scenario("none"));
  const Run merged = simulate(scenario("1f1b"));
  // Merged pairs run their all-to-alls on the "ep a2a" stream beside the other pass's kernels:
  // the flush gets shorter by what they hide (moe_a2a_overlap.cpp), never below the compute.
  std::size_t on_a2a_stream = 0;
  for (const Op& op : merged.p.ops)
    if (op.kind == OpKind::kCollective && op.collective == CollectiveKind::kAllToAll &&
        merged.p.streams[static_cast<std::size_t>(op.stream)].name == "ep a2a")
      ++on_a2a_stream;
  CHECK(on_a2a_stream > 0);
  CHECK(flush_ns(merged) < flush_ns(none));
  CHECK(flush_ns(merged) > busy_ns(merged, 0));
}
