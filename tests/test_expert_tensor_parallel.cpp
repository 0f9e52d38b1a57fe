// Expert tensor parallelism (strategy.etp > 1; core/lowering/expert_tensor_parallel.cpp;
// docs/program.md, "Expert tensor parallel"): the expert grid's etp groups, the all-gather after
// the dispatch and the reduce-scatter before the combine (and their mirror in backward), the
// experts' GEMMs on 1/etp of their width, their states divided by etp, the gradients over edp,
// rank symmetry and the block path, and the bad inputs.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/input_error_support.hpp"
#include "tests/symmetry_check.hpp"

using namespace csim;
using namespace csim::core;
using csim::test::error_of;

namespace {

// A small MoE transformer on `gpus` GPUs of one node: 4 blocks, h 256, 4 heads, s 64, bf16, global
// batch 8; every block MoE with 4 SwiGLU experts of f_e 128 (`fe`), top 2.
std::string tiny(const std::string& strategy, int gpus, int fe = 128) {
  return R"({"cluster": {"gpus_per_node": )" + std::to_string(gpus) +
         R"(, "gpu": "H100-SXM5-80GB"}, "model": {"transformer": {"layers": 4, "hidden": 256,
         "heads": 4, "ffn_hidden": 512, "seq_len": 64, "vocab": 1000, "mlp": "swiglu",
         "norm": "rmsnorm", "position": "rope", "moe": {"experts": 4, "top_k": 2,
         "expert_ffn_hidden": )" +
         std::to_string(fe) + R"(}}}, "training": {"global_batch": 8, "precision": "bf16",
         "optimizer": "adam", "steps": 2}, "strategy": {)" +
         strategy + "}}";
}

Program lower_tiny(const std::string& strategy, int gpus) {
  const Program p = lower(parse_scenario_string(tiny(strategy, gpus), "etp.json"));
  REQUIRE(validate_program(p).empty());
  return p;
}

// Collectives on GPU 0 by name (the micro-batch prefix dropped): how many, the first's bytes and
// group.
struct Seen {
  int count = 0;
  Bytes bytes = 0;
  std::string group;
  std::vector<int> gpus;
};
std::map<std::string, Seen> collectives_on_gpu0(const Program& p) {
  std::map<std::string, Seen> out;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kCollective || op.gpu != 0) continue;
    std::string name = p.name_of(op);
    const std::size_t colon = name.rfind(": ");
    if (colon != std::string::npos) name = name.substr(colon + 2);
    Seen& s = out[name];
    if (s.count++ == 0) {
      const CommGroup& g = p.groups[static_cast<std::size_t>(op.group)];
      s.bytes = op.bytes;
      s.group = g.name;
      s.gpus = g.gpus;
    }
  }
  return out;
}

// GPU 0's first forward kernel whose name holds `layer`.
Op kernel(const Program& p, const char* layer) {
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kCompute && op.gpu == 0 &&
        p.name_of(op).find(layer) != std::string::npos)
      return op;
  FAIL("no kernel " << layer);
  return Op{};
}

Bytes allocated_on_gpu0(const Program& p, const char* name) {
  Bytes total = 0;
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kAlloc && op.gpu == 0 && p.name_of(op) == name) total += op.bytes;
  return total;
}

const char* const kBase = R"("kind": "3d", "dp": 4, "micro_batch_size": 1, "ep": 2)";

}  // namespace

TEST_CASE("The expert grid's etp, ep and edp groups (MoE Parallel Folding)", "[etp]") {
  // dp 8, ep 2, etp 2 (tp = cp = pp = 1), default order tp-cp-ep-dp-pp: the expert grid is
  // etp-ep-edp-pp, etp fastest (stride 1), ep next (stride etp = 2), edp = 8 / (2 x 2) = 2 at
  // stride etp x ep = 4 (Megatron's expert RankGenerator, order "tp-ep-dp-pp" with tp = etp).
  ParallelSpec ps;
  ps.dp = 8;
  ps.ep = 2;
  ps.etp = 2;
  const RankGrid g = RankGrid::expert(ps);
  CHECK(ps.size(ParallelDim::kEdp) == 2);
  CHECK(g.group(0, {ParallelDim::kEtp}) == std::vector<int>{0, 1});
  CHECK(g.group(3, {ParallelDim::kEtp}) == std::vector<int>{2, 3});
  CHECK(g.group(0, {ParallelDim::kEp}) == std::vector<int>{0, 2});
  CHECK(g.group(3, {ParallelDim::kEp}) == std::vector<int>{1, 3});
  CHECK(g.group(0, {ParallelDim::kEdp}) == std::vector<int>{0, 4});
  CHECK(g.group(7, {ParallelDim::kEdp}) == std::vector<int>{3, 7});
}

TEST_CASE("etp 2: all-gather after the dispatch, reduce-scatter before the combine", "[etp]") {
  // 4 GPUs, dp 4, ep 2, etp 2 (edp 1), 2 micro-batches of 1 sample per rank, 2 steps.
  const Program p = lower_tiny(std::string(kBase) + R"(, "etp": 2)", 4);
  const auto seen = collectives_on_gpu0(p);
  // The all-to-alls move the rank's own routed copies as with etp 1: s k h e = 64 x 2 x 256 x 2 =
  // 65,536 bytes. The etp collectives the group's etp x 65,536 = 131,072 (the all-gather's output,
  // the reduce-scatter's input). Per MoE block and micro-batch one of each: 4 x 2 x 2 = 16.
  for (const char* name : {"ep all_to_all dispatch", "ep all_to_all combine",
                           "ep all_to_all combine grad", "ep all_to_all dispatch grad"}) {
    INFO(name);
    REQUIRE(seen.count(name) == 1);
    CHECK(seen.at(name).count == 16);
    CHECK(seen.at(name).bytes == 65'536);
  }
  for (const char* name : {"etp all_gather dispatch", "etp reduce_scatter combine",
                           "etp all_gather combine grad", "etp reduce_scatter dispatch grad"}) {
    INFO(name);
    REQUIRE(seen.count(name) == 1);
    CHECK(seen.at(name).count == 16);
    CHECK(seen.at(name).bytes == 131'072);
    CHECK(seen.at(name).group.rfind("etp (", 0) == 0);
    CHECK(seen.at(name).gpus == std::vector<int>{0, 1});
  }
  // edp 1: nothing reduces the experts' gradients.
  CHECK(seen.count("edp all_reduce grads") == 0);
  // Order on the compute stream: dispatch all-to-all, then the all-gather, then experts.fc; the
  // reduce-scatter after experts.proj, then the combine.
  std::vector<std::string> order;
  for (const Op& op : p.ops) {
    if (op.gpu != 0) continue;
    const std::string n = p.name_of(op);
    if (n.rfind("s0 m0 ", 0) == 0 || n.find("h.0.mlp.experts") != std::string::npos ||
        n.find("all_to_all") != std::string::npos || n.find("etp ") != std::string::npos) {
      order.push_back(n);
      if (order.size() == 7) break;
    }
  }
  REQUIRE(order.size() == 7);
  CHECK(order[0].find("ep all_to_all dispatch") != std::string::npos);
  CHECK(order[1].find("etp all_gather dispatch") != std::string::npos);
  CHECK(order[2].find("mlp.experts.fc") != std::string::npos);
  CHECK(order[4].find("mlp.experts.proj") != std::string::npos);
  CHECK(order[5].find("etp reduce_scatter combine") != std::string::npos);
  CHECK(order[6].find("ep all_to_all combine") != std::string::npos);
}

TEST_CASE("etp 2: the experts' GEMMs on etp times the tokens and 1/etp of the width", "[etp]") {
  const Program one = lower_tiny(kBase, 4);
  const Program two = lower_tiny(std::string(kBase) + R"(, "etp": 2)", 4);
  // etp 1: 2 local experts, each on the EP group's 2 x 32 = 64 copies, fc 256 -> 2 f_e = 256,
  // proj f_e = 128 -> 256. etp 2: the all-gather doubles the tokens (m 128), fc's output columns
  // and proj's input rows halved (n 128, k 64).
  const Op fc1 = kernel(one, "mlp.experts.fc.fwd"), fc2 = kernel(two, "mlp.experts.fc.fwd");
  CHECK(fc1.gemm.batch == 2);
  CHECK(fc1.gemm.m == 64);
  CHECK(fc1.gemm.n == 256);
  CHECK(fc1.gemm.k == 256);
  CHECK(fc2.gemm.batch == 2);
  CHECK(fc2.gemm.m == 128);
  CHECK(fc2.gemm.n == 128);
  CHECK(fc2.gemm.k == 256);
  const Op pr1 = kernel(one, "mlp.experts.proj.fwd"), pr2 = kernel(two, "mlp.experts.proj.fwd");
  CHECK(pr1.gemm.m == 64);
  CHECK(pr1.gemm.k == 128);
  CHECK(pr2.gemm.m == 128);
  CHECK(pr2.gemm.n == 256);
  CHECK(pr2.gemm.k == 64);
  // FLOPs per token copy are 1/etp (half the width), and the rank runs etp times the copies: its
  // expert FLOPs are etp 1's, 2 x 128 x 128 x 256 x 2 = 16,777,216 for fc (one sample).
  CHECK(fc2.flops / static_cast<double>(fc2.gemm.m) ==
        Approx(fc1.flops / static_cast<double>(fc1.gemm.m) / 2));
  CHECK(fc2.flops == Approx(fc1.flops));
  CHECK(fc2.flops == Approx(16'777'216.0));
  CHECK(pr2.flops == Approx(pr1.flops));
}

TEST_CASE("etp 2: the experts' parameters and optimizer state divided by etp", "[etp]") {
  // Per expert fc h x 2 f_e = 65,536 and proj f_e x h = 32,768 parameters: 98,304. With ep 2 a rank
  // holds 2 per block, 4 blocks: 786,432; etp 2 halves that, 393,216 fewer parameters. Adam's two
  // fp32 moments (8 bytes a parameter, "optimizer state") and bf16 weights (2 bytes, "params").
  const Program one = lower_tiny(kBase, 4);
  const Program two = lower_tiny(std::string(kBase) + R"(, "etp": 2)", 4);
  CHECK(allocated_on_gpu0(one, "optimizer state") - allocated_on_gpu0(two, "optimizer state") ==
        393'216 * 8);
  // Per layer through shard_experts (what the lowering and tune's bound read).
  const Scenario s = parse_scenario_string(tiny(std::string(kBase) + R"(, "etp": 2)", 4), "e.json");
  for (int i = 0; i < static_cast<int>(s.model.layers.size()); ++i) {
    const LayerSpec& l = s.model.layers[static_cast<std::size_t>(i)];
    if (l.expert_role == ExpertRole::kNone) continue;
    ShardedLayer sl = shard_layer(s.model, i, 1, false);
    shard_experts(sl, l, s.strategy.parallel);
    INFO(l.name);
    // E / (ep etp) = 1/4 of the layer's parameters (no biases here).
    CHECK(sl.params == l.params / 4);
  }
}

TEST_CASE("etp 2: the experts' gradients reduce over edp = dp / (etp ep)", "[etp]") {
  // dp 8, ep 2, etp 2: edp 2, the group {0, 4} (the grid test above). The rank's experts' fp32
  // gradients per block: 98,304 x 2 / 2 = 98,304 parameters x 4 bytes = 393,216 bytes, once per
  // step (4 blocks x 2 steps).
  const Program p = lower_tiny(R"("kind": "3d", "dp": 8, "micro_batch_size": 1, "ep": 2,
                                  "etp": 2)",
                               8);
  const auto seen = collectives_on_gpu0(p);
  REQUIRE(seen.count("edp all_reduce grads") == 1);
  CHECK(seen.at("edp all_reduce grads").bytes == 393'216);
  CHECK(seen.at("edp all_reduce grads").count == 8);
  CHECK(seen.at("edp all_reduce grads").gpus == std::vector<int>{0, 4});
}

TEST_CASE("tp 2 with ep 1 and etp = tp: the experts split like the dense MLP", "[etp]") {
  // tp 2 with sequence parallelism x dp 2 on 4 GPUs (Megatron's default etp = tp): the etp group
  // is the tp group {0, 1}; no all-to-all. Each tp rank routes its own s / tp = 32 tokens: copies
  // 32 x 2 x 256 x 2 = 32,768 bytes, the all-gather 2 x 32,768 = 65,536. 4 micro-batches of 1
  // (global batch 8 over dp 2), 4 blocks, 2 steps: 32 of each.
  const Program p = lower_tiny(
      R"("kind": "3d", "tp": 2, "sequence_parallel": true, "dp": 2, "micro_batch_size": 1,
         "etp": 2)",
      4);
  const auto seen = collectives_on_gpu0(p);
  CHECK(seen.count("ep all_to_all dispatch") == 0);
  for (const char* name : {"etp all_gather dispatch", "etp reduce_scatter combine",
                           "etp all_gather combine grad", "etp reduce_scatter dispatch grad"}) {
    INFO(name);
    REQUIRE(seen.count(name) == 1);
    CHECK(seen.at(name).count == 32);
    CHECK(seen.at(name).bytes == 65'536);
    CHECK(seen.at(name).gpus == std::vector<int>{0, 1});
  }
}

TEST_CASE("etp under rank symmetry runs as every rank does, and the block path agrees",
          "[etp][sim]") {
  // dp 8, ep 2, etp 2 on 8 GPUs, balanced routing: the mirrors shift the edp index (2) and the ep
  // index (2, in steps of tp x cp = 1): GPUs 0 and 1 (one etp group) stand for 4 images each.
  csim::test::check_symmetry_matches_every_rank(
      tiny(R"("kind": "3d", "dp": 8, "micro_batch_size": 1, "ep": 2, "etp": 2)", 8), 4u);
}

TEST_CASE("etp bad inputs name the keys", "[etp]") {
  auto err = [](const std::string& strategy, int gpus, int fe = 128) {
    return error_of([&] { parse_scenario_string(tiny(strategy, gpus, fe), "b.json"); });
  };
  // etp x ep = 8 does not divide tp x cp x dp = 4.
  InputError e = err(R"("kind": "3d", "dp": 4, "ep": 2, "etp": 4)", 4);
  CHECK(e.json_path().find("strategy.ep (file), strategy.dp (file)") != std::string::npos);
  CHECK(e.message().find("etp x ep = 8 does not divide tp x cp x dp = 4") != std::string::npos);
  // ep 1 with etp other than tp.
  e = err(R"("kind": "3d", "dp": 4, "etp": 2)", 4);
  CHECK(e.json_path().find("strategy.etp (file), strategy.tp (default)") != std::string::npos);
  // tp 2 with ep 1 and etp 1: whole experts replicated over the tp ranks.
  e = err(R"("kind": "3d", "tp": 2, "sequence_parallel": true, "dp": 2)", 4);
  CHECK(e.message().find("needs ep > 1 or etp = tp") != std::string::npos);
  // etp 2 does not divide f_e 129.
  e = err(R"("kind": "3d", "dp": 4, "ep": 2, "etp": 2)", 4, 129);
  CHECK(e.json_path().find("strategy.etp (file), model.transformer.moe.expert_ffn_hidden") !=
        std::string::npos);
  // The allgather dispatcher with etp > 1.
  e = err(R"("kind": "3d", "dp": 4, "ep": 2, "etp": 2, "moe_dispatcher": "allgather")", 4);
  CHECK(e.json_path().find("strategy.etp (file), strategy.moe_dispatcher (file)") !=
        std::string::npos);
  // Outside the kinds that shard the experts over edp.
  e = err(R"("kind": "zero", "zero_stage": 3, "dp": 4, "ep": 2, "etp": 2)", 4);
  CHECK_FALSE(e.json_path().empty());
}
