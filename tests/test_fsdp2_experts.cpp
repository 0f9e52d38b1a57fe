// Expert parallelism under FSDP2 and DeepSpeed ZeRO-2 (core/lowering/expert_sharding.hpp,
// fsdp2.cpp, zero_fsdp.cpp; docs/program.md, "FSDP2 and ZeRO-2 with expert parallelism"): an MoE
// block's routed experts gathered and reduce-scattered over the expert-data-parallel group, the
// rest of the block over the FSDP shard group; the model states sharded the same way; rank symmetry
// and the block path; the layouts that stay refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/input_error_support.hpp"
#include "tests/symmetry_check.hpp"

using namespace csim;
using namespace csim::core;
using csim::test::error_of;

namespace {

// A small MoE transformer on one node of 8 H100s: 4 blocks, h 256, 4 heads, s 64, bf16 + Adam,
// global batch 8 (one sample per rank at dp 8), 2 steps; every block MoE with 8 SwiGLU experts
// of 128, top 2. One expert: fc 256 x (2 x 128) + proj 128 x 256 = 98,304 parameters; a block's
// 8 experts 786,432, the model's 3,145,728.
constexpr std::int64_t kExpert = 98'304;
constexpr std::int64_t kBlockExperts = 8 * kExpert;

std::string tiny(const std::string& strategy) {
  return R"({"cluster": {"gpus_per_node": 8, "gpu": "H100-SXM5-80GB"}, "model": {"transformer":
         {"layers": 4, "hidden": 256, "heads": 4, "ffn_hidden": 512, "seq_len": 64, "vocab": 1000,
         "mlp": "swiglu", "norm": "rmsnorm", "position": "rope", "moe": {"experts": 8, "top_k": 2,
         "expert_ffn_hidden": 128}}}, "training": {"global_batch": 8, "precision": "bf16",
         "optimizer": "adam", "steps": 2}, "strategy": {)" +
         strategy + "}}";
}
const std::string kFsdp2 = R"("kind": "fsdp", "fsdp_version": 2, "dp": 8)";

Program lower_tiny(const std::string& strategy) {
  const Program p = lower(parse_scenario_string(tiny(strategy), "fsdp2_ep.json"));
  REQUIRE(validate_program(p).empty());
  return p;
}

// The ops named `name` on GPU 0 (the micro-batch prefix, if any, dropped).
std::vector<const Op*> on_gpu0(const Program& p, const std::string& name) {
  std::vector<const Op*> out;
  for (const Op& op : p.ops) {
    if (op.gpu != 0) continue;
    std::string n = p.name_of(op);
    const std::size_t colon = n.rfind(": ");
    if (colon != std::string::npos) n = n.substr(colon + 2);
    if (n == name) out.push_back(&op);
  }
  return out;
}
std::vector<int> gpus_of(const Program& p, const Op& op) {
  return p.groups[static_cast<std::size_t>(op.group)].gpus;
}
int count_bytes(const std::vector<const Op*>& ops, Bytes b) {
  return static_cast<int>(
      std::count_if(ops.begin(), ops.end(), [&](const Op* o) { return o->bytes == b; }));
}
// The allocs named `name` on GPU 0.
std::vector<const Op*> allocs(const Program& p, const std::string& name) {
  std::vector<const Op*> out;
  for (const Op* op : on_gpu0(p, name))
    if (op->kind == OpKind::kAlloc) out.push_back(op);
  return out;
}

}  // namespace

TEST_CASE("FSDP2 with ep 4: each MoE block's experts gathered and reduced over edp",
          "[fsdp2][ep]") {
  // 8 ranks, dp 8, ep 4: the expert grid (default order tp-cp-ep-dp-pp) puts ep fastest, EP
  // groups {0..3} and {4..7}, and edp = 8 / 4 = 2 at stride 4: GPU 0's edp group is {0, 4}
  // (torchtitan's sparse mesh (pp, dp_replicate, efsdp, ep), ep innermost). Each rank holds
  // 8 / 4 = 2 experts of a block: 2 x 98,304 = 196,608 parameters, gathered in bf16 (W = 2):
  // 393,216 bytes; their gradients reduce-scattered in fp32 (reduce_dtype default, R = 4):
  // 786,432 bytes.
  const Program ep = lower_tiny(kFsdp2 + R"(, "ep": 4)");
  const Program flat = lower_tiny(kFsdp2);
  const auto ag = on_gpu0(ep, "fsdp edp all_gather params");
  const auto rs = on_gpu0(ep, "fsdp edp reduce_scatter grads");
  REQUIRE(!ag.empty());
  REQUIRE(!rs.empty());
  for (const Op* op : ag) {
    CHECK(op->bytes == 2 * 2 * kExpert);
    CHECK(gpus_of(ep, *op) == std::vector<int>{0, 4});
  }
  for (const Op* op : rs) {
    CHECK(op->bytes == 4 * 2 * kExpert);
    CHECK(gpus_of(ep, *op) == std::vector<int>{0, 4});
  }
  // One reduce-scatter per block and step (4 x 2), one gather per block forward and per resharded
  // block backward: as many as the ep-1 run gathers blocks.
  CHECK(rs.size() == 8);
  // The dense part of a block keeps the dp 8 group: the ep-1 block gather's W Psi_u less all 8
  // experts' W 786,432 = 1,572,864 bytes.
  const auto flat_ag = on_gpu0(flat, "fsdp all_gather params");
  const auto dense_ag = on_gpu0(ep, "fsdp all_gather params");
  REQUIRE(!flat_ag.empty());
  Bytes flat_block = 0;  // the ep-1 block gather: the most frequent size (the root's differs)
  for (const Op* op : flat_ag)
    if (count_bytes(flat_ag, op->bytes) > count_bytes(flat_ag, flat_block)) flat_block = op->bytes;
  const Bytes dense_block = flat_block - 2 * kBlockExperts;
  CHECK(count_bytes(dense_ag, dense_block) == static_cast<int>(ag.size()));
  CHECK(count_bytes(flat_ag, flat_block) == static_cast<int>(ag.size()));
  for (const Op* op : dense_ag) CHECK(gpus_of(ep, *op).size() == 8);
  // The dense reduce-scatter: R (Psi_u - 786,432) = 2 x dense_block (R / W = 2).
  CHECK(count_bytes(on_gpu0(ep, "fsdp reduce_scatter grads"), 2 * dense_block) == 8);
  // The unsharded buffers hold the rank's whole unit, with its 2 experts, not 8: W x 6 x 98,304
  // and R x 6 x 98,304 less than with ep 1, at every block gather (and every block backward).
  CHECK(count_bytes(allocs(ep, "fsdp2 unsharded params"), flat_block - 2 * 6 * kExpert) ==
        static_cast<int>(ag.size()));
  CHECK(count_bytes(allocs(ep, "fsdp2 unsharded grads"), 2 * flat_block - 4 * 6 * kExpert) ==
        static_cast<int>(rs.size()));
}

TEST_CASE("FSDP2 with ep: expert states sharded over ep x edp, dense ones over dp", "[fsdp2][ep]") {
  // FSDP2 keeps each parameter's fp32 shard (4 bytes) as the master copy: the rank's parameter
  // bytes are 4 (ceil(D / dp) + E / (ep x edp)) for D the dense and E the routed experts'
  // parameters (each rank holds E / ep and shards them over edp); Adam's moments 8 bytes each on
  // the same shards. With ep 1 the whole model is sharded over dp 8: 4 ceil((D + E) / 8).
  const Scenario s = parse_scenario_string(tiny(kFsdp2 + R"(, "ep": 4)"), "m.json");
  std::int64_t experts = 0, dense = 0;
  for (const LayerSpec& l : s.model.layers)
    (l.expert_role != ExpertRole::kNone ? experts : dense) += l.params;
  REQUIRE(experts == 4 * kBlockExperts);
  auto state = [](const Program& p, const char* name) {
    Bytes total = 0;
    for (const Op* op : on_gpu0(p, name))
      if (op->kind == OpKind::kAlloc) total += op->bytes;
    return total;
  };
  const Program ep = lower(s);
  const Program flat = lower_tiny(kFsdp2);
  // E / (ep x edp) = 3,145,728 / (4 x 2) = 393,216 expert parameters on each rank.
  const std::int64_t mine = (dense + 7) / 8 + experts / (4 * 2);
  CHECK(state(ep, "model parameters") == 4 * mine);
  CHECK(state(flat, "model parameters") == 4 * ((dense + experts + 7) / 8));
  CHECK(state(ep, "optimizer state") == 8 * mine);
}

TEST_CASE("FSDP2 with ep: rank symmetry runs as every rank does, and the block path agrees",
          "[fsdp2][ep][sim]") {
  // Balanced routing: the mirrors shift the edp index (2) and the ep index (4), GPU 0 stands for
  // all 8; every figure equals the run of all 8 ranks, and the block path agrees within 1 %.
  csim::test::check_symmetry_matches_every_rank(tiny(kFsdp2 + R"(, "ep": 4)"), 8u);
}

TEST_CASE("ZeRO-2 with ep 4: the experts' gradients reduce-scattered over edp", "[zero][ep]") {
  // DeepSpeed ZeRO-2 reduces in the model dtype (W = 2): a block's 2 local experts' 196,608
  // gradients = 393,216 bytes over edp {0, 4}, once per block and micro-batch (1 per step here,
  // 4 blocks x 2 steps); after the optimizer the updated expert shards gathered over edp too:
  // all 4 blocks' 786,432 local expert parameters, W = 2: 1,572,864 bytes, once per step.
  const Program ep = lower_tiny(R"("kind": "zero", "zero_stage": 2, "dp": 8, "ep": 4)");
  const auto rs = on_gpu0(ep, "zero edp reduce_scatter grads");
  REQUIRE(rs.size() == 8);
  for (const Op* op : rs) {
    CHECK(op->bytes == 2 * 2 * kExpert);
    CHECK(gpus_of(ep, *op) == std::vector<int>{0, 4});
  }
  const auto ag = on_gpu0(ep, "zero edp all_gather params");
  REQUIRE(ag.size() == 2);
  CHECK(ag[0]->bytes == 2 * 4 * 2 * kExpert);
  // The dense reduce-scatters stay on dp 8.
  for (const Op* op : on_gpu0(ep, "zero reduce_scatter grads")) CHECK(gpus_of(ep, *op).size() == 8);
}

TEST_CASE("Expert sharding that stays refused names the keys", "[fsdp2][ep]") {
  auto err = [](const std::string& strategy) {
    return error_of([&] { parse_scenario_string(tiny(strategy), "b.json"); });
  };
  // DeepSpeed asserts against MoE at stage 3 (engine.py, _configure_zero_optimizer).
  InputError e = err(R"("kind": "zero", "zero_stage": 3, "dp": 8, "ep": 4)");
  CHECK(e.json_path().find("strategy.ep (file), strategy.zero_stage (file)") != std::string::npos);
  CHECK(e.message().find("MoE not supported with Stage 3") != std::string::npos);
  e = err(
      R"("kind": "3d", "dp": 8, "ep": 4, "distributed_optimizer": true, "megatron_fsdp": true)");
  CHECK(e.json_path().find("strategy.ep (file), strategy.megatron_fsdp (file)") !=
        std::string::npos);
  e = err(kFsdp2 + R"(, "replicate": 2, "ep": 4)");
  CHECK(e.json_path().find("strategy.ep (file), strategy.replicate (file)") != std::string::npos);
  CHECK(e.message().find("HSDP") != std::string::npos);
  // Megatron-Core's combined 1F1B all-to-all overlap is Megatron's alone.
  e = err(kFsdp2 + R"(, "ep": 4, "moe_a2a_overlap": "1f1b")");
  CHECK(e.json_path().find("strategy.moe_a2a_overlap (file), strategy.kind (file)") !=
        std::string::npos);
  e = err(R"("kind": "fsdp", "dp": 8, "ep": 4)");  // FSDP1
  CHECK(e.json_path().find("strategy.ep (file), strategy.kind (file)") != std::string::npos);
}
