// Context parallelism (core/lowering/context_parallel.cpp; docs/program.md, "Context parallel"):
// the K/V exchange of each cp_comm around the attention core, the work and memory per rank, the
// gradient group over dp x cp, rank symmetry, the FLOPs convention, the block path and tune.
// Every expected value is derived in a comment first.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "backends/block/block_eval.hpp"
#include "core/json_diagnostics.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/flops.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "sweep/tune.hpp"
#include "test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// A 2-block decoder on one node of 8 A100s: h = 256, a = 8 query heads sharing g = 4 key/value
// heads of d = 32, SwiGLU 512, s = 256, FlashAttention-2, bf16 (e = 2), micro-batch 1, one step.
// Per sample on one rank of cp ranks (tp 1):
//   |KV| = 2 (s / cp) g d e = 2 x 64 x 4 x 32 x 2 = 32,768 bytes at cp 4
//   |Q|  = (s / cp) a d e   =     64 x 8 x 32 x 2 = 32,768 bytes at cp 4
std::string tiny(const std::string& strategy, int global_batch = 2) {
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":8,\"gpu\":\"A100-SXM4-80GB\"},"
         "\"host\":{\"python\":false},\"model\":{\"transformer\":{\"layers\":2,\"hidden\":256,"
         "\"heads\":8,\"kv_heads\":4,\"ffn_hidden\":512,\"seq_len\":256,\"vocab\":1000,"
         "\"mlp\":\"swiglu\",\"norm\":\"rmsnorm\",\"position\":\"rope\","
         "\"attention\":{\"kernel\":\"flash2\"}}},\"training\":{\"global_batch\":" +
         std::to_string(global_batch) +
         ",\"precision\":\"bf16\",\"optimizer\":\"adam\",\"steps\":1},"
         "\"simulation\":{\"symmetry\":\"off\"},\"strategy\":{\"kind\":\"3d\","
         "\"micro_batch_size\":1," +
         strategy + "}}";
}

Scenario parse(const std::string& json) {
  return parse_scenario_string(json, "cp.json", {});
}

Program lowered(const Scenario& s) {
  Program p = lower(s);
  const std::string problem = validate_program(p);
  INFO(problem);
  REQUIRE(problem.empty());
  return p;
}

struct Seen {
  int count = 0;
  Bytes bytes = 0;
};
// GPU 0's ops by name (without the micro-batch prefix) and phase: count and summed bytes.
std::map<std::string, Seen> ops_of_gpu0(const Program& p, Phase phase) {
  std::map<std::string, Seen> out;
  std::string name;
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || op.phase != phase) continue;
    name.clear();
    p.append_name(op, name);
    const std::size_t colon = name.rfind(": ");
    if (colon != std::string::npos) name = name.substr(colon + 2);
    Seen& s = out[name];
    ++s.count;
    s.bytes += op.bytes;
  }
  return out;
}

double flops_of(const Program& p, const std::string& suffix, Phase phase) {
  double f = 0;
  std::string name;
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || op.phase != phase || op.kind != OpKind::kCompute) continue;
    name.clear();
    p.append_name(op, name);
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      f += op.flops;
  }
  return f;
}

}  // namespace

TEST_CASE("CP p2p: the core as cp ring-step kernels, cp - 1 K/V hops forward, 2 (cp - 1) |KV| back",
          "[cp]") {
  const Scenario s = parse(tiny("\"cp\":4,\"dp\":2"));
  const Program p = lowered(s);
  // Per block (2 blocks) forward: 4 kernels of h.i.attn.core and 3 hops of |KV| = 32,768 bytes.
  const auto fwd = ops_of_gpu0(p, Phase::kForward);
  CHECK(fwd.at("h.0.attn.core.fwd").count == 4);
  CHECK(fwd.at("cp ring kv").count == 2 * 3);
  CHECK(fwd.at("cp ring kv").bytes == 2 * 3 * 32768);
  // Backward per block: 4 kernels; hops K/V (|KV|), then K/V + dK/dV twice (2 |KV| each), then
  // dK/dV home (|KV|): 6 |KV| = 2 (cp - 1) |KV| = 196,608 bytes (TE's AttnFuncWithCPAndKVP2P).
  const auto bwd = ops_of_gpu0(p, Phase::kBackward);
  CHECK(bwd.at("h.0.attn.core.bwd").count == 4);
  CHECK(bwd.at("cp ring kv bwd").bytes == 2 * 32768);
  CHECK(bwd.at("cp ring kv dkv").bytes == 2 * 2 * 2 * 32768);
  CHECK(bwd.at("cp ring dkv").bytes == 2 * 32768);
  // The hops run on the "cp" stream, the kernels on the compute stream.
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || op.kind != OpKind::kCollective || op.collective != CollectiveKind::kSendRecv)
      continue;
    CHECK(p.streams[static_cast<std::size_t>(op.stream)].name == "cp");
    CHECK(p.groups[static_cast<std::size_t>(op.group)].gpus.size() == 4);
  }
}

TEST_CASE("CP: every layer on s / cp tokens, the core's work 1/cp of the whole in cp parts",
          "[cp]") {
  // The same model at cp 1 (dp 8) and cp 4 (dp 2): one sample per rank and micro-batch either
  // way, so each rank's forward FLOPs of a layer at cp 4 are its cp 1 FLOPs / 4; the core's four
  // ring-step kernels together too (the balanced split: each step 2 (s / 8)^2 pairs).
  const Program p1 = lowered(parse(tiny("\"cp\":1,\"dp\":8", 8)));
  const Program p4 = lowered(parse(tiny("\"cp\":4,\"dp\":2")));
  for (const char* layer : {"h.0.attn.core", "h.0.attn.qkv", "h.1.mlp.fc", "lm_head"}) {
    INFO(layer);
    const double f1 = flops_of(p1, std::string(layer) + ".fwd", Phase::kForward);
    REQUIRE(f1 > 0);
    CHECK(flops_of(p4, std::string(layer) + ".fwd", Phase::kForward) ==
          Approx(f1 / 4).epsilon(1e-12));
  }
  // A GEMM's shape: m = s / cp = 64 tokens of the micro-batch's one sample.
  std::string name;
  for (const Op& op : p4.ops) {
    name.clear();
    p4.append_name(op, name);
    if (op.gpu == 0 && name.find("h.0.attn.qkv.fwd") != std::string::npos &&
        op.phase == Phase::kForward)
      CHECK(op.gemm.m == 64);
  }
  // MFU counts the whole sequence, as Megatron and torchtitan do (docs/program.md, "FLOPs
  // utilisation"): the model FLOPs per step depend on the samples, not on how they are split.
  CHECK(model_flops_per_step(parse(tiny("\"cp\":4,\"dp\":2", 8))) ==
        Approx(model_flops_per_step(parse(tiny("\"cp\":1,\"dp\":8", 8)))).epsilon(1e-15));
}

TEST_CASE("CP all_gather, a2a and a2a+p2p exchange what TE's variants move", "[cp]") {
  SECTION("all_gather: K/V gathered (cp |KV|) forward and backward, dK/dV reduce-scattered") {
    const auto fwd =
        ops_of_gpu0(lowered(parse(tiny("\"cp\":4,\"cp_comm\":\"all_gather\""))), Phase::kForward);
    // 4 x 32,768 = 131,072 bytes per block, one attention core per block, 2 blocks.
    CHECK(fwd.at("cp all-gather kv").count == 2);
    CHECK(fwd.at("cp all-gather kv").bytes == 2 * 131072);
    CHECK(fwd.at("h.0.attn.core.fwd").count == 1);
    const auto bwd =
        ops_of_gpu0(lowered(parse(tiny("\"cp\":4,\"cp_comm\":\"all_gather\""))), Phase::kBackward);
    CHECK(bwd.at("cp all-gather kv").bytes == 2 * 131072);
    CHECK(bwd.at("cp reduce-scatter dkv").bytes == 2 * 131072);
  }
  SECTION("a2a (Ulysses): Q, K, V and O forward; dO and dQ, dK, dV backward") {
    const Program p = lowered(parse(tiny("\"cp\":4,\"cp_comm\":\"a2a\"")));
    const auto fwd = ops_of_gpu0(p, Phase::kForward);
    // |Q| + |KV| = 65,536 before the core, |O| = |Q| = 32,768 after it, per block.
    CHECK(fwd.at("cp a2a qkv").bytes == 2 * 65536);
    CHECK(fwd.at("cp a2a out").bytes == 2 * 32768);
    const auto bwd = ops_of_gpu0(p, Phase::kBackward);
    CHECK(bwd.at("cp a2a dout").bytes == 2 * 32768);
    CHECK(bwd.at("cp a2a dqkv").bytes == 2 * 65536);
    CHECK(bwd.count("cp ring kv bwd") == 0);
  }
  SECTION("a2a+p2p: a2a over pairs of CP ranks, a ring of cp / 2 = 2 steps") {
    const Program p = lowered(parse(tiny("\"cp\":4,\"cp_comm\":\"a2a+p2p\",\"cp_a2a\":2")));
    const auto fwd = ops_of_gpu0(p, Phase::kForward);
    CHECK(fwd.at("h.0.attn.core.fwd").count == 2);
    CHECK(fwd.at("cp ring kv").count == 2 * 1);
    CHECK(fwd.at("cp a2a qkv").bytes == 2 * 65536);
    // The groups: the a2a pairs are consecutive CP ranks (cp stride 1 with tp 1: GPUs 0, 1), the
    // rings the ranks cp_a2a apart (GPUs 0, 2).
    for (const Op& op : p.ops) {
      if (op.gpu != 0 || op.kind != OpKind::kCollective) continue;
      const std::vector<int>& g = p.groups[static_cast<std::size_t>(op.group)].gpus;
      if (op.collective == CollectiveKind::kAllToAll) CHECK(g == std::vector<int>{0, 1});
      if (op.collective == CollectiveKind::kSendRecv) CHECK(g == std::vector<int>{0, 2});
    }
  }
}

TEST_CASE("CP: gradients reduced over dp x cp, saved activations 1/cp per rank", "[cp]") {
  // dp 2 x cp 4 in tp-cp-ep-dp-pp order: CP peers 1 apart, DP peers 4 apart; the gradient
  // all-reduce spans all 8 (Megatron's data_parallel_group with context parallelism).
  const Scenario s = parse(tiny("\"cp\":4,\"dp\":2"));
  const Program p = lowered(s);
  bool seen = false;
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || op.kind != OpKind::kCollective ||
        op.collective != CollectiveKind::kAllReduce)
      continue;
    seen = true;
    CHECK(p.groups[static_cast<std::size_t>(op.group)].gpus.size() == 8);
    CHECK(p.groups[static_cast<std::size_t>(op.group)].name == "dp (tp 0, pp 0)");
  }
  CHECK(seen);
  // Every saved tensor is per token (fused attention saves no s^2 term): 1/cp of cp 1's.
  const ParallelSpec& ps = s.strategy.parallel;
  ParallelSpec one = ps;
  one.cp = 1;
  const Segment all{0, static_cast<int>(s.model.layers.size())};
  CHECK(rank_stored_activation_bytes_per_sample(s.model, all, ps) ==
        Approx(rank_stored_activation_bytes_per_sample(s.model, all, one) / 4).epsilon(1e-15));
}

TEST_CASE("CP under rank symmetry runs as every rank does, for every cp_comm", "[cp][sim]") {
  for (const char* comm : {"\"p2p\"", "\"all_gather\"", "\"a2a\""}) {
    INFO(comm);
    const std::string st = std::string("\"cp\":4,\"dp\":2,\"cp_comm\":") + comm;
    Scenario off = parse(tiny(st));
    Scenario on = off;
    on.simulation.symmetry = true;
    const Program po = lowered(off), pn = lowered(on);
    // One representative (cp 0, dp 0) instead of 8 GPUs' ops.
    CHECK(pn.symmetry.images.size() == 8);
    const block::EvalResult ro = block::evaluate_op_level(off, po);
    const block::EvalResult rn = block::evaluate_op_level(on, pn);
    CHECK(rn.step_time_ns == ro.step_time_ns);
    CHECK(rn.exposed_comm_ns == ro.exposed_comm_ns);
    // The representative's peak is every rank's.
    REQUIRE(rn.peaks.size() == 1);
    for (const block::GpuPeak& g : ro.peaks) CHECK(g.peak_bytes == rn.peaks[0].peak_bytes);
  }
}

TEST_CASE("CP: the block path matches the op level for every cp_comm, without falling back",
          "[cp][block]") {
  for (const char* st : {"\"cp\":4,\"dp\":2", "\"cp\":4,\"dp\":2,\"cp_comm\":\"all_gather\"",
                         "\"cp\":4,\"dp\":2,\"cp_comm\":\"a2a\"",
                         "\"cp\":4,\"dp\":2,\"cp_comm\":\"a2a+p2p\",\"cp_a2a\":2",
                         "\"cp\":2,\"tp\":2,\"pp\":2,\"sequence_parallel\":true"}) {
    INFO(st);
    Scenario s = parse(tiny(st, 8));
    s.simulation.symmetry = true;
    const Program p = lowered(s);
    const block::EvalResult fast = block::evaluate(s, p);
    const block::EvalResult ref = block::evaluate_op_level(s, p);
    CHECK(fast.fallback_reason.empty());
    CHECK(static_cast<double>(fast.step_time_ns) ==
          Approx(static_cast<double>(ref.step_time_ns)).epsilon(0.01));
  }
}

TEST_CASE("tune searches cp and cp_comm, and every CP layout it makes parses", "[cp][sweep]") {
  const std::string path = test::scenario_path("transformer_tiny_1xh200.json");
  const nlohmann::json doc = parse_json_strict(test::read_file(path), path);
  sweep::TuneOptions o;
  o.threads = 1;
  o.space.cp = {1, 2, 4};
  o.space.cp_comm = {"p2p", "a2a"};
  o.space.recompute = {"none"};
  o.micro_batch_sizes = {1};
  // 8 query and 2 key/value heads: a2a needs cp x tp to divide 2, so only cp 2 at tp 1 runs it
  // and the others are invalid (the parser's verdict); every p2p layout is evaluated.
  const std::vector<std::string> sets{"cluster.gpus_per_node=4", "training.steps=1"};
  const sweep::TuneResult r = sweep::tune(doc, path, sets, o);
  int cp2 = 0, cp4_p2p = 0;
  for (const sweep::TuneCandidate& c : r.candidates) {
    INFO(c.label << ": " << c.reason);
    const bool tp1 = c.label.find(" tp 1 ") != std::string::npos;
    if (c.label.find(" cp 2 ") != std::string::npos) {
      ++cp2;
      CHECK(c.knobs.at("strategy").at("cp") == 2);
    }
    if (c.label.find(" cp 2 p2p") != std::string::npos ||
        c.label.find(" cp 4 p2p") != std::string::npos)
      CHECK(c.verdict != sweep::TuneVerdict::kInvalid);
    if (c.label.find(" cp 4 p2p") != std::string::npos) ++cp4_p2p;
    if (c.label.find(" cp 2 a2a") != std::string::npos)
      CHECK((c.verdict == sweep::TuneVerdict::kInvalid) == !tp1);
    if (c.label.find(" cp 4 a2a") != std::string::npos)
      CHECK(c.verdict == sweep::TuneVerdict::kInvalid);
  }
  CHECK(cp2 > 0);
  CHECK(cp4_p2p > 0);
}
