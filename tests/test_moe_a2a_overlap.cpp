// strategy.moe_a2a_overlap 1f1b: Megatron-Core's combined 1F1B schedule with the EP dispatch /
// combine of one micro-batch on a comm stream beside the other's compute (docs/program.md, "MoE
// all-to-all overlap"; core/lowering/moe_a2a_overlap.cpp): the paired schedule, where the
// all-to-alls go, what the step gains and what it cannot gain, the memory, the block path's
// fallback and the bad inputs. No test here depends on wall-clock speed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/block/block_eval.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/moe_a2a_overlap.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/trace.hpp"
#include "run/run.hpp"
#include "tests/input_error_support.hpp"

using namespace csim;
using namespace csim::core;
using csim::test::error_of;

namespace {

// A small MoE transformer (4 blocks, every one with 8 routed experts, top 2) on 4 nodes of one
// H100 each, 400 Gb/s NICs: pp 2, dp 2, ep 2 (edp 1), 1F1B, global batch 16 at MBS 1: m = 8
// micro-batches. Stage 0 is GPUs 0 and 1 (one EP group across two nodes: its all-to-alls cross
// the network), stage 1 GPUs 2 and 3; each stage holds 2 MoE blocks.
std::string small(const std::string& extra) {
  return R"({"cluster": {"nodes": 4, "gpus_per_node": 1, "nics_per_node": 1, "nic_gbps": 400,
    "gpu": "H100-SXM5-80GB"}, "model": {"transformer": {"layers": 4, "hidden": 1024, "heads": 8,
    "ffn_hidden": 2048, "seq_len": 512, "vocab": 1000, "mlp": "swiglu", "norm": "rmsnorm",
    "position": "rope", "moe": {"experts": 8, "top_k": 2, "expert_ffn_hidden": 1024}}},
    "training": {"global_batch": 16, "precision": "bf16", "optimizer": "adam", "steps": 2},
    "strategy": {"kind": "3d", "pp": 2, "dp": 2, "ep": 2, "micro_batch_size": 1,
    "schedule": "1f1b")" +
         extra + "}}";
}

bool is_a2a(const Program& p, const Op& op) {
  return op.kind == OpKind::kCollective && op.collective == CollectiveKind::kAllToAll &&
         p.name_of(op).rfind("ep ", 0) == 0;
}

const std::string& stream_name(const Program& p, const Op& op) {
  return p.streams[static_cast<std::size_t>(op.stream)].name;
}

}  // namespace

TEST_CASE("The overlapped schedule: one more warm-up forward, then forward i+w' with backward i",
          "[ep][a2a_overlap]") {
  using hybrid::overlap_schedule;
  // 1F1B, p 2, m 4. Stage 0 warms up with 2 (p - 0 - 1) + 1 = 3 forwards (a merged pair sends
  // only when it ends: with one more forward than base 1F1B's p - s - 1 + 1 = 2 the steady
  // phase would run a pair per 2T; moe_a2a_overlap.cpp), then (F3, B0), then B1 B2 B3.
  auto s0 = overlap_schedule(PipelineSchedule::k1f1b, 2, 1, 4, 0);
  REQUIRE(s0.size() == 7u);
  for (int i = 0; i < 3; ++i) {
    CHECK(!s0[static_cast<std::size_t>(i)].paired);
    CHECK(s0[static_cast<std::size_t>(i)].a.forward);
    CHECK(s0[static_cast<std::size_t>(i)].a.micro == i);
  }
  CHECK((s0[3].paired && s0[3].a.micro == 3 && !s0[3].b.forward && s0[3].b.micro == 0));
  for (int i = 4; i < 7; ++i) {
    CHECK(!s0[static_cast<std::size_t>(i)].paired);
    CHECK(!s0[static_cast<std::size_t>(i)].a.forward);
    CHECK(s0[static_cast<std::size_t>(i)].a.micro == i - 3);
  }
  // The last stage: base F0 B0 F1 B1 ... pairs F(i) with its own B(i), which needs F(i)'s loss;
  // here F0 alone, then (F1, B0), (F2, B1), (F3, B2), then B3: never a micro-batch with itself.
  auto s1 = overlap_schedule(PipelineSchedule::k1f1b, 2, 1, 4, 1);
  REQUIRE(s1.size() == 5u);
  CHECK((!s1[0].paired && s1[0].a.micro == 0));
  for (std::size_t i = 1; i <= 3; ++i) {
    CHECK(s1[i].paired);
    CHECK(s1[i].a.micro == static_cast<int>(i));
    CHECK(s1[i].b.micro == static_cast<int>(i) - 1);
  }
  CHECK((!s1[4].paired && !s1[4].a.forward && s1[4].a.micro == 3));
  // pp 1 (Megatron's combined_1f1b_schedule_for_no_pipelining): F0, (F(i+1), B(i)), B(m-1).
  auto s = overlap_schedule(PipelineSchedule::k1f1b, 1, 1, 3, 0);
  REQUIRE(s.size() == 4u);
  CHECK((s[1].paired && s[1].a.micro == 1 && s[1].b.micro == 0));
  CHECK((s[2].paired && s[2].a.micro == 2 && s[2].b.micro == 1));
  // Interleaved, p 2, v 2, m 4: every forward and backward appears exactly once.
  auto si = overlap_schedule(PipelineSchedule::kInterleaved, 2, 2, 4, 0);
  int fw = 0, bw = 0;
  for (const auto& x : si) {
    (x.a.forward ? fw : bw) += 1;
    if (x.paired) ++bw;  // a is the pair's forward
  }
  CHECK(fw == 8);
  CHECK(bw == 8);
}

TEST_CASE("1f1b: steady-state all-to-alls on the ep a2a stream, warm-up and cool-down in line",
          "[ep][a2a_overlap]") {
  const Scenario s = parse_scenario_string(small(R"(, "moe_a2a_overlap": "1f1b")"), "o.json");
  const Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  // GPU 0 (stage 0) per step: 8 forwards and 8 backwards, each through 2 MoE blocks with 2
  // all-to-alls per block (dispatch, combine; backward their gradients): 4 per pass, 64 per
  // step. Stage 0 warms up with 2 (p - 0 - 1) + 1 = 3 forwards and cools down with 3
  // backwards: 6 passes, 24 all-to-alls in line on the compute stream; the other 5 forwards and
  // 5 backwards form 5 pairs: 40 on the "ep a2a" stream. 2 steps.
  int in_line = 0, side = 0;
  const int compute = p.ops.front().stream;
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || !is_a2a(p, op)) continue;
    if (stream_name(p, op) == "ep a2a") {
      ++side;
    } else {
      CHECK(op.stream == compute);
      ++in_line;
    }
  }
  CHECK(in_line == 2 * 24);
  CHECK(side == 2 * 40);
  // Stage 1 (GPU 2): warm-up p - 1 = 1 forward, cool-down 1 backward: 8 in line, 7 pairs: 56.
  in_line = side = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != 2 || !is_a2a(p, op)) continue;
    (stream_name(p, op) == "ep a2a" ? side : in_line) += 1;
  }
  CHECK(in_line == 2 * 8);
  CHECK(side == 2 * 56);
}

TEST_CASE("1f1b: shorter than none, not shorter than the compute alone, overlap in the trace",
          "[ep][a2a_overlap][sim]") {
  const Scenario none = parse_scenario_string(small(""), "n.json");
  const Scenario ovl = parse_scenario_string(small(R"(, "moe_a2a_overlap": "1f1b")"), "o.json");
  const run::RunResult rn = run::simulate(none);
  const run::RunResult ro = run::simulate(ovl);
  const Program& pn = rn.program;
  const Program& po = ro.program;
  const block::EvalResult en = block::evaluate_op_level(none, pn);
  const block::EvalResult eo = block::evaluate_op_level(ovl, po);
  // Under none every all-to-all stops its GPU's compute stream: per step the stream is busy for
  // C (its kernels) plus A (the in-line all-to-alls) plus the pipeline's waits. Under 1f1b the
  // steady pairs' all-to-alls run while the other micro-batch's chunk computes, so up to A of
  // the step is hidden: T(1f1b) < T(none).
  CHECK(eo.step_time_ns < en.step_time_ns);
  // The compute-only bound: the same kernels run on the compute stream in either case, one at a
  // time, and under 1f1b they are no faster (the all-to-all kernels beside them take SMs), so
  // T(1f1b) >= the busiest GPU's compute-stream time per step under none.
  auto compute_busy_per_step = [](const Program& p, const prof::Trace& t) {
    std::vector<TimeNs> busy(static_cast<std::size_t>(p.world_gpus), 0);
    for (const prof::TraceEvent& e : t.events) {
      if (e.cls != prof::EventClass::kCompute) continue;  // the kernel, not its launch
      if (e.op_id < 0 || e.op_id >= static_cast<std::int64_t>(p.ops.size())) continue;
      const Op& op = p.ops[static_cast<std::size_t>(e.op_id)];
      if (op.kind != OpKind::kCompute) continue;
      if (p.streams[static_cast<std::size_t>(op.stream)].role != StreamRole::kCompute) continue;
      busy[static_cast<std::size_t>(op.gpu)] += e.dur_ns;
    }
    return *std::max_element(busy.begin(), busy.end()) / 2;  // 2 steps
  };
  const TimeNs bound = compute_busy_per_step(pn, rn.trace);
  CHECK(bound > 0);
  CAPTURE(en.step_time_ns, eo.step_time_ns, bound);
  CHECK(eo.step_time_ns >= bound);
  // In the trace: all-to-all events on GPU 0's "ep a2a" stream intersect compute kernels of the
  // same GPU (those of the other micro-batch of the pair: a pass's own next kernel waits for
  // its exchange).
  std::vector<std::pair<TimeNs, TimeNs>> a2a, kernels;
  for (const prof::TraceEvent& e : ro.trace.events) {
    if (e.cls != prof::EventClass::kCompute && e.cls != prof::EventClass::kCommunication) continue;
    if (e.op_id < 0 || e.op_id >= static_cast<std::int64_t>(po.ops.size())) continue;
    const Op& op = po.ops[static_cast<std::size_t>(e.op_id)];
    if (op.gpu != 0) continue;
    if (is_a2a(po, op) && stream_name(po, op) == "ep a2a") a2a.push_back({e.ts_ns, e.dur_ns});
    if (op.kind == OpKind::kCompute &&
        po.streams[static_cast<std::size_t>(op.stream)].role == StreamRole::kCompute)
      kernels.push_back({e.ts_ns, e.dur_ns});
  }
  REQUIRE(!a2a.empty());
  TimeNs overlapped = 0;
  for (const auto& [s, d] : a2a)
    for (const auto& [ks, kd] : kernels)
      overlapped += std::max<TimeNs>(0, std::min(s + d, ks + kd) - std::max(s, ks));
  CHECK(overlapped > 0);
  // More micro-batches in flight on stage 0 (3 instead of p = 2): its peak is higher.
  REQUIRE(!eo.peaks.empty());
  CHECK(eo.peaks.front().peak_bytes > en.peaks.front().peak_bytes);
}

TEST_CASE("none is today's Program, the block path takes 1f1b within 1 % of the op level",
          "[ep][a2a_overlap]") {
  const Program base = lower(parse_scenario_string(small(""), "b.json"));
  const Program none =
      lower(parse_scenario_string(small(R"(, "moe_a2a_overlap": "none")"), "n.json"));
  REQUIRE(base.ops.size() == none.ops.size());
  CHECK(base.streams.size() == none.streams.size());
  for (std::size_t i = 0; i < base.ops.size(); ++i) {
    CHECK(base.ops[i].stream == none.ops[i].stream);
    CHECK(base.ops[i].deps.size() == none.ops[i].deps.size());
  }
  const Scenario ovl = parse_scenario_string(small(R"(, "moe_a2a_overlap": "1f1b")"), "o.json");
  const Program po = lower(ovl);
  // The paired passes' all-to-alls are collectives on the EP comm stream, each waiting for its
  // producer kernel and waited on by its consumer: the block path's units (a collective that
  // waits for a rendezvous is a unit of its own, docs/block-eval.md "Chains") and its shared
  // flow network time them as the op level does, so its step is the op level's to within
  // issue 17's 1 % (0.000 % measured).
  CHECK(block::block_path_unsupported(ovl, po).empty());
  const block::EvalResult r = block::evaluate(ovl, po);
  const block::EvalResult ref = block::evaluate_op_level(ovl, po);
  CHECK(r.path == block::EvalPath::kBlock);
  CHECK(std::fabs(static_cast<double>(r.step_time_ns - ref.step_time_ns)) <
        0.01 * static_cast<double>(ref.step_time_ns));
}

TEST_CASE("moe_a2a_overlap bad inputs name the key", "[ep][a2a_overlap]") {
  auto err = [](const std::string& text) {
    return error_of([&] { parse_scenario_string(text, "b.json"); });
  };
  InputError e = err(small(R"(, "moe_a2a_overlap": "dualpipe")"));
  CHECK(e.json_path() == "strategy.moe_a2a_overlap");
  // Without expert parallelism there is no all-to-all to overlap.
  std::string no_ep = small(R"(, "moe_a2a_overlap": "1f1b")");
  no_ep.replace(no_ep.find(R"("ep": 2)"), 7, R"("ep": 1)");
  e = err(no_ep);
  CHECK(e.json_path() == "strategy.moe_a2a_overlap");
  CHECK(e.message().find("ep > 1") != std::string::npos);
  // GPipe has no steady 1F1B phase.
  std::string gpipe = small(R"(, "moe_a2a_overlap": "1f1b")");
  gpipe.replace(gpipe.find(R"("schedule": "1f1b")"), 18, R"("schedule": "gpipe")");
  e = err(gpipe);
  CHECK(e.json_path().find("strategy.schedule") != std::string::npos);
  e = err(small(R"(, "moe_a2a_overlap": "1f1b", "moe_dispatcher": "allgather")"));
  CHECK(e.json_path().find("strategy.moe_dispatcher") != std::string::npos);
  // pp 1 pairs F(i + 1) with B(i) (no pipeline): accepted.
  std::string pp1 = small(R"(, "moe_a2a_overlap": "1f1b")");
  pp1.replace(pp1.find(R"("pp": 2)"), 7, R"("pp": 1)");
  pp1.replace(pp1.find(R"("nodes": 4)"), 10, R"("nodes": 2)");
  CHECK_NOTHROW(parse_scenario_string(pp1, "ok.json"));
}

TEST_CASE("Full recompute: the re-runs keep their in-line all-to-alls under either value",
          "[ep][a2a_overlap][recompute]") {
  // A re-run is a forward (LayerVisit::forward()): its dispatch and combine are issued again, in
  // line on the compute stream, whether or not its backward is paired. Per step on GPU 0: 8
  // backwards re-run 2 MoE blocks each, 2 all-to-alls per block: 32; 2 steps.
  for (const char* v : {"none", "1f1b"}) {
    CAPTURE(v);
    const Program p = lower(parse_scenario_string(
        small(std::string(R"(, "recompute": "full", "moe_a2a_overlap": ")") + v + "\""), "r.json"));
    int rerun = 0;
    for (const Op& op : p.ops) {
      if (op.gpu != 0 || !is_a2a(p, op) || op.phase != Phase::kRecompute) continue;
      CHECK(op.stream == p.ops.front().stream);
      ++rerun;
    }
    CHECK(rerun == 2 * 32);
  }
}
