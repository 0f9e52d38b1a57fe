// Expert parallelism (core/lowering/expert_parallel.cpp; docs/program.md, "Expert parallel"):
// the expert layers' grid of MoE Parallel Folding, the token dispatch and combine all-to-alls
// around each MoE block's experts, the experts split over the EP ranks, their gradients reduced
// over the expert-data-parallel ranks, their optimizer state sharded there, and the bad inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "backends/block/block_eval.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/moe_routing.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"
#include "tests/input_error_support.hpp"
#include "tests/symmetry_check.hpp"

using namespace csim;
using namespace csim::core;
using csim::test::check_symmetry_matches_every_rank;
using csim::test::error_of;

namespace {

// A small MoE transformer on `gpus` GPUs of one node: 4 blocks, h 256, 4 heads, SwiGLU experts of
// 128, s 64, bf16, global batch 8; every block MoE with 4 experts, top 2.
std::string tiny(const std::string& strategy, int gpus = 4, const std::string& moe = "") {
  return R"({"cluster": {"gpus_per_node": )" + std::to_string(gpus) +
         R"(, "gpu": "H100-SXM5-80GB"}, "model": {"transformer": {"layers": 4, "hidden": 256,
         "heads": 4, "ffn_hidden": 512, "seq_len": 64, "vocab": 1000, "mlp": "swiglu",
         "norm": "rmsnorm", "position": "rope", "moe": )" +
         (moe.empty() ? R"({"experts": 4, "top_k": 2, "expert_ffn_hidden": 128})" : moe) +
         R"(}}, "training": {"global_batch": 8, "precision": "bf16", "optimizer": "adam",
         "steps": 2}, "strategy": {)" +
         strategy + "}}";
}

Program lower_tiny(const std::string& strategy, int gpus = 4) {
  const Program p = lower(parse_scenario_string(tiny(strategy, gpus), "ep.json"));
  REQUIRE(validate_program(p).empty());
  return p;
}

// Collectives on GPU 0 by name: how many, and the bytes of the first.
struct Seen {
  int count = 0;
  Bytes bytes = 0;  // the first's
  Bytes total = 0;
  std::string group;
};
std::map<std::string, Seen> collectives_on_gpu0(const Program& p) {
  std::map<std::string, Seen> out;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kCollective || op.gpu != 0) continue;
    std::string name = p.name_of(op);
    const std::size_t colon = name.rfind(": ");  // drop the micro-batch prefix
    if (colon != std::string::npos) name = name.substr(colon + 2);
    Seen& s = out[name];
    s.total += op.bytes;
    if (s.count++ == 0) {
      s.bytes = op.bytes;
      s.group = p.groups[static_cast<std::size_t>(op.group)].name;
    }
  }
  return out;
}

// Per GPU, the FLOPs of an experts.fc forward kernel, and the bytes of an ep dispatch.
struct ExpertWork {
  std::map<int, double> fc_flops;
  Bytes dispatch = 0;
};
ExpertWork expert_work(const Program& p) {
  ExpertWork w;
  for (const Op& op : p.ops) {
    const std::string name = p.name_of(op);
    if (op.kind == OpKind::kCompute && name.find("mlp.experts.fc.fwd") != std::string::npos)
      w.fc_flops[op.gpu] = op.flops;
    if (op.kind == OpKind::kCollective && name.find("ep all_to_all dispatch") != std::string::npos)
      w.dispatch = op.bytes;
  }
  return w;
}

}  // namespace

TEST_CASE("The expert layers' grid folds ep into dp (MoE Parallel Folding)", "[ep]") {
  // 16 ranks, dp 16, ep 8 (tp = cp = pp = 1): the dense grid has one DP group of all 16; the
  // expert grid etp-ep-edp-pp from the default order tp-cp-ep-dp-pp puts ep fastest (stride 1:
  // eight consecutive ranks, one node of 8) and edp = 16 / 8 = 2 next (stride 8).
  ParallelSpec ps;
  ps.dp = 16;
  ps.ep = 8;
  const RankGrid g = RankGrid::expert(ps);
  CHECK(g.size() == 16);
  CHECK(g.group(0, {ParallelDim::kEp}) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(g.group(9, {ParallelDim::kEp}) == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(g.group(3, {ParallelDim::kEdp}) == std::vector<int>{3, 11});
  CHECK(ps.size(ParallelDim::kEdp) == 2);
}

TEST_CASE("ep 2: dispatch and combine around the experts, reductions over dp and edp", "[ep]") {
  // 4 GPUs, dp 4, ep 2 (edp 2), global batch 8: 2 micro-batches of 1 sample per rank (3d with
  // micro_batch_size 1), 2 steps.
  const Program ep = lower_tiny(R"("kind": "3d", "dp": 4, "micro_batch_size": 1, "ep": 2)");
  const Program flat = lower_tiny(R"("kind": "3d", "dp": 4, "micro_batch_size": 1)");
  const auto seen = collectives_on_gpu0(ep);
  // Per MoE block and micro-batch: dispatch and combine forward, their gradients backward: 4
  // blocks x 2 micro-batches x 2 steps = 16 of each. Each moves the rank's routed copies, s k h e
  // = 64 x 2 x 256 x 2 = 65,536 bytes per sample.
  for (const char* name : {"ep all_to_all dispatch", "ep all_to_all combine",
                           "ep all_to_all combine grad", "ep all_to_all dispatch grad"}) {
    INFO(name);
    REQUIRE(seen.count(name) == 1);
    CHECK(seen.at(name).count == 16);
    CHECK(seen.at(name).bytes == 65'536);
    CHECK(seen.at(name).group.rfind("ep (", 0) == 0);
  }
  // The experts' gradients, 2 of the 4 experts per rank: fc 2 x 256 x 256 + proj 2 x 128 x 256
  // = 196,608 parameters per block, fp32 gradients (bf16 with fp32 main grads, Megatron): 786,432
  // bytes per block over edp, once per step (last micro-batch), 4 blocks x 2 steps.
  REQUIRE(seen.count("edp all_reduce grads") == 1);
  CHECK(seen.at("edp all_reduce grads").count == 8);
  CHECK(seen.at("edp all_reduce grads").bytes == 786'432);
  CHECK(seen.at("edp all_reduce grads").group.rfind("edp (", 0) == 0);
  // Without ep each block's whole gradient goes over dp, all 4 experts' 393,216 parameters x 4
  // bytes = 1,572,864 bytes more per block than the dense part ep 2 sends there: 4 blocks x 2
  // steps x 1,572,864.
  const auto flat_seen = collectives_on_gpu0(flat);
  CHECK(flat_seen.count("ep all_to_all dispatch") == 0);
  CHECK(flat_seen.count("edp all_reduce grads") == 0);
  CHECK(flat_seen.at("dp all_reduce grads").total - seen.at("dp all_reduce grads").total ==
        8 * 1'572'864);
}

TEST_CASE("ep: the experts' grouped GEMMs run E / ep experts on ep times the tokens", "[ep]") {
  const Program ep = lower_tiny(R"("kind": "3d", "dp": 4, "micro_batch_size": 1, "ep": 2)");
  const Program flat = lower_tiny(R"("kind": "3d", "dp": 4, "micro_batch_size": 1)");
  // Balanced routing: 64 x 2 = 128 copies of a sample over 4 experts, 32 each; with ep 2 a rank
  // holds 2 experts and gets the group's 2 x 32 = 64 copies for each. FLOPs unchanged.
  auto fc = [](const Program& p) {
    for (const Op& op : p.ops)
      if (op.kind == OpKind::kCompute && op.gpu == 0 &&
          p.name_of(op).find("mlp.experts.fc.fwd") != std::string::npos)
        return op;
    FAIL("no experts.fc kernel");
    return Op{};
  };
  const Op a = fc(ep), b = fc(flat);
  CHECK(a.gemm.batch == 2);
  CHECK(a.gemm.m == 64);
  CHECK(b.gemm.batch == 4);
  CHECK(b.gemm.m == 32);
  CHECK(a.flops == b.flops);
}

TEST_CASE("ep: each rank keeps its experts' states, ZeRO-1 shards them over edp", "[ep]") {
  // Adam's two fp32 moments (8 bytes a parameter), allocated at the first step() as "optimizer
  // state", on GPU 0.
  auto optimizer_bytes = [](const std::string& strategy) {
    const Program p = lower_tiny(strategy);
    Bytes total = 0;
    for (const Op& op : p.ops)
      if (op.kind == OpKind::kAlloc && op.gpu == 0 && p.name_of(op) == "optimizer state")
        total += op.bytes;
    return total;
  };
  const std::string base = R"("kind": "3d", "dp": 4, "micro_batch_size": 1)";
  // Without ZeRO every rank updates what it holds: with ep 2 half of the routed experts, 2 of 4
  // per block, 4 blocks x 2 x 98,304 = 786,432 parameters fewer than with ep 1.
  CHECK(optimizer_bytes(base) - optimizer_bytes(base + R"(, "ep": 2)") == 786'432 * 8);
  // ZeRO-1 (distributed optimizer) shards the dense parameters over dp 4 and the rank's experts
  // over edp = 4 / ep: E / ep experts over 4 / ep ranks is E / 4 either way, so ep changes nothing
  // here beyond the shards' rounding (ceil per group).
  const std::string zero1 = base + R"(, "distributed_optimizer": true)";
  const Bytes flat = optimizer_bytes(zero1);
  for (const char* ep : {R"(, "ep": 2)", R"(, "ep": 4)"}) {
    INFO(ep);
    CHECK(std::llabs(optimizer_bytes(zero1 + ep) - flat) <= 8 * 8);
  }
}

TEST_CASE("ep bad inputs name the keys", "[ep]") {
  auto err = [](const std::string& strategy, int gpus = 4, const std::string& moe = "") {
    return error_of([&] { parse_scenario_string(tiny(strategy, gpus, moe), "b.json"); });
  };
  InputError e = err(R"("kind": "3d", "dp": 4, "ep": 3)", 4,
                     R"({"experts": 4, "top_k": 2, "expert_ffn_hidden": 128})");
  CHECK(e.json_path().find("strategy.ep (file), model.transformer.moe.experts") !=
        std::string::npos);
  CHECK(e.message().find("does not divide the 4 experts") != std::string::npos);
  e = err(R"("kind": "3d", "dp": 2, "ep": 4)", 2, R"({"experts": 4, "top_k": 2})");
  CHECK(e.json_path().find("strategy.ep (file), strategy.dp (file)") != std::string::npos);
  e = err(R"("kind": "3d", "dp": 4, "ep": 2, "etp": 4)");  // etp x ep = 8 over 4 ranks
  CHECK(e.json_path().find("strategy.ep (file), strategy.dp (file)") != std::string::npos);
  e = err(R"("kind": "fsdp", "ep": 2)");  // FSDP1 (FSDP2: test_fsdp2_experts.cpp)
  CHECK(e.json_path().find("strategy.ep (file), strategy.kind (file)") != std::string::npos);
  e = err(R"("kind": "zero", "zero_stage": 3, "ep": 2)");
  CHECK(e.json_path().find("strategy.ep (file), strategy.zero_stage (file)") != std::string::npos);
  // No mixture of experts to split.
  e = error_of([] {
    parse_scenario_string(
        R"({"cluster": {"gpus_per_node": 2, "gpu": "H100-SXM5-80GB"}, "model": {"gpt": {"layers": 2,
        "hidden": 64, "heads": 2, "seq_len": 32, "vocab": 100}}, "training": {"global_batch": 2},
        "strategy": {"kind": "3d", "dp": 2, "ep": 2}})",
        "b.json");
  });
  CHECK(e.json_path() == "strategy.ep");
  CHECK(e.message().find("needs a mixture of experts") != std::string::npos);
}

TEST_CASE("Routing samples: balanced, zipf, dirichlet, histogram", "[ep][routing]") {
  MoeConfig m;
  m.experts = 8;
  m.top_k = 2;
  CHECK(expert_shares(m, 0, 0) == std::vector<double>(8, 0.125));
  // Zipf with skew 1 over 8 experts: the shares sorted are (1 / r) / H_8, H_8 = 761 / 280.
  m.routing.kind = RoutingKind::kZipf;
  m.routing.seed = 7;
  std::vector<double> z = expert_shares(m, 3, 1);
  std::sort(z.begin(), z.end(), std::greater<>());
  for (int r = 1; r <= 8; ++r) CHECK(z[static_cast<std::size_t>(r - 1)] == Approx(280.0 / 761 / r));
  // The same key gives the same sample; another micro-batch or block another order.
  CHECK(expert_shares(m, 3, 1) == expert_shares(m, 3, 1));
  bool differs = false;
  for (int micro = 0; micro < 8 && !differs; ++micro)
    differs = expert_shares(m, 3, micro) != expert_shares(m, 3, 1) && micro != 1;
  CHECK(differs);
  // Dirichlet: positive shares summing to 1; a small concentration concentrates them (with
  // alpha 0.05 one expert takes most of the tokens in most samples; with alpha 1000 each share is
  // within a few percent of 1/8).
  m.routing.kind = RoutingKind::kDirichlet;
  m.routing.concentration = 1000;
  for (double x : expert_shares(m, 0, 0)) CHECK(x == Approx(0.125).epsilon(0.15));
  m.routing.concentration = 0.05;
  double top_mean = 0;
  for (int micro = 0; micro < 32; ++micro) {
    const std::vector<double> d = expert_shares(m, 0, micro);
    CHECK(std::accumulate(d.begin(), d.end(), 0.0) == Approx(1.0));
    top_mean += *std::max_element(d.begin(), d.end()) / 32;
  }
  CHECK(top_mean > 0.6);
  // A histogram is normalised; rank j of ep 2 holds experts 0-3 and 4-7: loads 2 x their sums.
  m.routing.kind = RoutingKind::kHistogram;
  m.routing.tokens = {5, 1, 1, 1, 0, 0, 0, 0};
  CHECK(expert_shares(m, 0, 0)[0] == Approx(0.625));
  CHECK(ep_rank_loads(expert_shares(m, 0, 0), 2) == std::vector<double>{2.0, 0.0});
  CHECK(ep_rank_loads(std::vector<double>(8, 0.125), 4) == std::vector<double>(4, 1.0));
}

TEST_CASE("Routing imbalance: the busiest EP rank's experts and the exchange it bounds",
          "[ep][routing]") {
  // 4 experts, ep 2: rank 0 holds experts 0 and 1, rank 1 experts 2 and 3. Shares 5:1:1:1 give
  // rank 0 load 2 x 6/8 = 1.5 and rank 1 2 x 2/8 = 0.5. Balanced, each expert.fc kernel of a
  // micro-batch (1 sample) runs 2 t h 2 f_e = 2 x 128 x 256 x 256 = 16,777,216 FLOPs; so GPU 0's
  // run 1.5 x that and GPU 1's 0.5 x; every all-to-all of the group moves 1.5 x 65,536 bytes.
  const std::string moe =
      R"({"experts": 4, "top_k": 2, "expert_ffn_hidden": 128, "routing": {"kind": "histogram", "tokens": [5, 1, 1, 1]}})";
  const Program p = lower(parse_scenario_string(
      tiny(R"("kind": "3d", "dp": 4, "micro_batch_size": 1, "ep": 2)", 4, moe), "r.json"));
  REQUIRE(validate_program(p).empty());
  const ExpertWork w = expert_work(p);
  CHECK(w.fc_flops.at(0) == Approx(1.5 * 16'777'216.0));
  CHECK(w.fc_flops.at(1) == Approx(0.5 * 16'777'216.0));
  CHECK(w.dispatch == 98'304);
}

static std::string moe_with_routing(const char* routing) {
  return std::string(R"({"experts": 4, "top_k": 2, "expert_ffn_hidden": 128)") + routing + "}";
}

constexpr const char* kZipfRouting = R"(, "routing": {"kind": "zipf", "skew": 1.2, "seed": 3})";

TEST_CASE("EP under rank symmetry runs as every rank does, and the block path agrees",
          "[ep][sim]") {
  // dp 8, ep 2 on 8 GPUs: the mirrors shift the expert-data-parallel index (edp 4), so under zipf
  // routing GPUs 0 and 1 (one EP group) are simulated and stand for the other three groups; under
  // balanced routing the ranks of an EP group are alike too and the mirrors also shift the ep
  // index: GPU 0 alone stands for all 8 (4 x 2 images).
  for (const char* routing : {"", kZipfRouting}) {
    INFO(routing);
    check_symmetry_matches_every_rank(
        tiny(R"("kind": "3d", "dp": 8, "micro_batch_size": 1, "ep": 2)", 8,
             moe_with_routing(routing)),
        std::string(routing).empty() ? 8u : 4u);
  }
}

TEST_CASE("EP with context parallelism keeps rank symmetry", "[ep][cp][sim]") {
  // cp 2, dp 4, ep 4 on 8 GPUs (tp 1). Dense grid tp-cp-dp: cp stride 1, dp stride 2; expert grid
  // etp-ep-edp: ep stride 1 (its groups {0..3}, {4..7}), edp 2 at stride 4. Each mirror maps every
  // cp, dp, ep and edp group onto a group: the edp shift by 4 ranks; under balanced routing also
  // the cp swap (rank r <-> r xor 1, inside an EP group whose members then do the same work) and
  // the ep shift in steps of tp x cp = 2 (size 4 / 2 = 2, stride 2). So 2 x 2 x 2 = 8 images:
  // GPU 0 stands for all 8; under zipf routing only the edp shift is alike: 2 images, one EP
  // group (4 GPUs) simulated. Either way every figure equals the run of every rank.
  for (const char* routing : {"", kZipfRouting}) {
    INFO(routing);
    std::string text = tiny(R"("kind": "3d", "dp": 4, "cp": 2, "micro_batch_size": 1, "ep": 4)", 8,
                            moe_with_routing(routing));
    // Context parallelism needs a fused attention core (the parser's rule).
    text.replace(text.find(R"("position": "rope")"), 18,
                 R"("position": "rope", "attention": {"kernel": "flash2"})");
    check_symmetry_matches_every_rank(text, std::string(routing).empty() ? 8u : 2u);
  }
}

TEST_CASE("Routing bad inputs name the key", "[ep][routing]") {
  auto err = [](const std::string& routing) {
    return error_of([&] {
      parse_scenario_string(tiny(R"("kind": "3d", "dp": 4, "ep": 2)", 4,
                                 R"({"experts": 4, "top_k": 2, "routing": )" + routing + "}"),
                            "b.json");
    });
  };
  InputError e = err(R"({"kind": "histogram", "tokens": [1, 2, 3]})");
  CHECK(e.json_path() == "model.transformer.moe.routing.tokens");
  CHECK(e.message().find("3 entries for 4 experts") != std::string::npos);
  e = err(R"({"kind": "histogram"})");
  CHECK(e.json_path() == "model.transformer.moe.routing.kind");
  e = err(R"({"kind": "dirichlet", "concentration": 0})");
  CHECK(e.json_path() == "model.transformer.moe.routing.concentration");
  e = err(R"("lopsided")");
  CHECK(e.json_path() == "model.transformer.moe.routing");
}

TEST_CASE("The summary reports the routing the lowering used", "[ep][routing]") {
  // The zipf sample of each of the 4 MoE blocks in each of 2 micro-batches (global batch 8 over
  // dp 4 at micro-batch 1): the summary's figures are routing_stats' over those 8 samples.
  const std::string moe =
      R"({"experts": 4, "top_k": 2, "expert_ffn_hidden": 128, "routing": {"kind": "zipf", "skew": 1.5, "seed": 9}})";
  const Scenario sc = parse_scenario_string(
      tiny(R"("kind": "3d", "dp": 4, "micro_batch_size": 1, "ep": 2)", 4, moe), "z.json");
  const prof::Summary s = prof::summarize(run::simulate(sc).trace);
  const RoutingStats st = routing_stats(sc.model.transformer_config, 2, 2);
  CHECK(st.samples == 8);
  CHECK(s.moe_routing == "zipf");
  CHECK(s.moe_routing_samples == 8);
  CHECK(s.tokens_per_expert_max_over_mean == Approx(st.expert_max_over_mean));
  CHECK(s.tokens_per_ep_rank_max_over_mean == Approx(st.rank_max_over_mean));
  CHECK(s.worst_tokens_per_ep_rank_max_over_mean == Approx(st.worst_rank_max_over_mean));
  // Zipf 1.5 over 4 experts: the most popular takes 1 / H, H = 1 + 2^-1.5 + 3^-1.5 + 4^-1.5 =
  // 1.6875..., so 4 / H = 2.37 times the mean in every sample.
  CHECK(s.tokens_per_expert_max_over_mean ==
        Approx(4.0 / (1 + std::pow(2, -1.5) + std::pow(3, -1.5) + std::pow(4, -1.5))));
  // Skewed routing is slower than balanced on the same layout: the busiest rank sets the pace.
  const Scenario bal = parse_scenario_string(
      tiny(R"("kind": "3d", "dp": 4, "micro_batch_size": 1, "ep": 2)", 4), "b.json");
  const prof::Summary b = prof::summarize(run::simulate(bal).trace);
  CHECK(b.moe_routing == "balanced");
  CHECK(b.tokens_per_ep_rank_max_over_mean == Approx(1.0));
  CHECK(s.step_time_s > b.step_time_s);
}

TEST_CASE("tp 2 with experts: whole experts on each tp rank's s / tp tokens (etp 1)", "[ep]") {
  // 4 GPUs, tp 2 with sequence parallelism x dp 2, ep 2 folded over tp x dp (edp 2), against tp 1
  // x dp 4 with ep 2 on the same ranks. Global batch 8: 4 micro-batches of 1 with dp 2.
  const Program tp2 = lower_tiny(
      R"("kind": "3d", "tp": 2, "sequence_parallel": true, "dp": 2, "micro_batch_size": 1,
         "ep": 2)");
  const Program tp1 = lower_tiny(R"("kind": "3d", "dp": 4, "micro_batch_size": 1, "ep": 2)");
  const auto seen = collectives_on_gpu0(tp2);
  // Each tp rank dispatches its own s / tp = 32 tokens' copies: 32 x 2 x 256 x 2 = 32,768 bytes,
  // half of tp 1's 65,536; 4 blocks x 4 micro-batches x 2 steps = 32 of each.
  for (const char* name : {"ep all_to_all dispatch", "ep all_to_all combine",
                           "ep all_to_all combine grad", "ep all_to_all dispatch grad"}) {
    INFO(name);
    REQUIRE(seen.count(name) == 1);
    CHECK(seen.at(name).count == 32);
    CHECK(seen.at(name).bytes == 32'768);
  }
  // The experts are whole: their gradients over edp are tp 1's, 2 experts' 196,608 parameters x
  // 4 bytes = 786,432 per block (not halved by tp).
  CHECK(seen.at("edp all_reduce grads").bytes == 786'432);
  // Tensor-parallel collectives only around the dense layers: per micro-batch an all-gather before
  // each block's qkv (forward) and before its proj's backward, one before the LM head and one in
  // the embedding's backward = 2 x 4 + 2 = 10, and as many reduce-scatters; 4 micro-batches x 2
  // steps = 80 each. Split like the dense MLP, the experts would add 2 of each per block: 144.
  CHECK(seen.at("tp all_gather").count == 80);
  CHECK(seen.at("tp reduce_scatter").count == 80);
  // An expert kernel does half of tp 1's work: the same experts on half the tokens.
  auto fc_flops = [](const Program& p) {
    for (const Op& op : p.ops)
      if (op.kind == OpKind::kCompute && op.gpu == 0 &&
          p.name_of(op).find("h.0.mlp.experts.fc.fwd") != std::string::npos)
        return op.flops;
    FAIL("no experts.fc forward kernel on GPU 0");
    return 0.0;
  };
  CHECK(fc_flops(tp2) == Approx(fc_flops(tp1) / 2));
}

TEST_CASE("A capacity factor caps each expert's tokens and the summary counts the dropped",
          "[ep][routing]") {
  // Shares 5:1:1:1 of 4 experts (histogram), ep 2. Capacity factor 1: each expert keeps at most
  // 1 / 4 of the routed copies, so expert 0 keeps 2/8 of its 5/8 and 3/8 are dropped; rank 0
  // (experts 0, 1) computes 2 x (2/8 + 1/8) = 0.75 of the balanced load, rank 1 2 x 2/8 = 0.5
  // (dropless: 1.5 and 0.5, the test above). Padded to capacity every expert computes 1/4: both
  // ranks 1.
  MoeConfig m;
  m.experts = 4;
  m.capacity_factor = 1.0;
  const std::vector<double> shares = {5.0 / 8, 1.0 / 8, 1.0 / 8, 1.0 / 8};
  CHECK(kept_shares(m, shares) == std::vector<double>{0.25, 0.125, 0.125, 0.125});
  CHECK(dropped_share(m, shares) == Approx(3.0 / 8));
  CHECK(ep_rank_loads(kept_shares(m, shares), 2) == std::vector<double>{0.75, 0.5});
  m.pad_to_capacity = true;
  CHECK(ep_rank_loads(kept_shares(m, shares), 2) == std::vector<double>{1.0, 1.0});
  // Capacity 1.25 over balanced shares drops nothing and keeps every load at 1.
  m = MoeConfig{};
  m.experts = 4;
  m.capacity_factor = 1.25;
  CHECK(dropped_share(m, {0.25, 0.25, 0.25, 0.25}) == 0.0);
  CHECK(uniform_expert_load(m));

  // The lowering: GPU 0's expert.fc kernel runs 0.75 x the balanced 16,777,216 FLOPs, and the
  // all-to-alls move the busiest rank's 0.75 x 65,536 bytes; the summary reports 37.5 % dropped.
  const std::string moe =
      R"({"experts": 4, "top_k": 2, "expert_ffn_hidden": 128, "capacity_factor": 1.0,
          "routing": {"kind": "histogram", "tokens": [5, 1, 1, 1]}})";
  const Scenario sc = parse_scenario_string(
      tiny(R"("kind": "3d", "dp": 4, "micro_batch_size": 1, "ep": 2)", 4, moe), "c.json");
  const Program p = lower(sc);
  REQUIRE(validate_program(p).empty());
  const ExpertWork w = expert_work(p);
  CHECK(w.fc_flops.at(0) == Approx(0.75 * 16'777'216.0));
  CHECK(w.fc_flops.at(1) == Approx(0.5 * 16'777'216.0));
  CHECK(w.dispatch == 49'152);
  const prof::Summary s = prof::summarize(run::simulate(sc).trace);
  CHECK(s.moe_capacity_factor == 1.0);
  CHECK(s.dropped_token_share == Approx(3.0 / 8));
  CHECK(s.worst_dropped_token_share == Approx(3.0 / 8));
  CHECK(s.tokens_per_ep_rank_max_over_mean == Approx(0.75));
}

TEST_CASE("Capacity bad inputs name the key", "[ep][routing]") {
  InputError e = error_of([] {
    parse_scenario_string(tiny(R"("kind": "3d", "dp": 4, "ep": 2)", 4,
                               R"({"experts": 4, "top_k": 2, "capacity_factor": 0})"),
                          "c.json");
  });
  CHECK(e.json_path() == "model.transformer.moe.capacity_factor");
  CHECK(e.message().find("keeps no token") != std::string::npos);
  e = error_of([] {
    parse_scenario_string(tiny(R"("kind": "3d", "dp": 4, "ep": 2)", 4,
                               R"({"experts": 4, "top_k": 2, "pad_to_capacity": true})"),
                          "c.json");
  });
  CHECK(e.json_path() == "model.transformer.moe.pad_to_capacity");
}
