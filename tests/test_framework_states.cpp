// Model states as each framework holds them, and when (core/lowering/framework_states.hpp;
// docs/memory.md, "Model-state bytes by framework"). Every expected value is derived in a comment
// first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "backends/sim/sim_executor.hpp"
#include "core/lowering/framework_states.hpp"
#include "core/lowering/lowering.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// A GPT of 4 blocks on one node of 4 A100s: h = 1024, 16 heads, s = 512, V = 32000 (tied LM
// head), Adam (test_fsdp2.cpp derives the count):
//   block 12h^2 + 13h = 12,596,224; embedding + ln_f = 33,294,336; model Psi = 83,679,232
// dp 4: shard S = ceil(Psi / 4) = 20,919,808.
constexpr std::int64_t kModel = 83679232, kShard = 20919808;

std::string gpt(const std::string& strategy, const std::string& precision, int steps = 1) {
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":4,\"gpu\":\"A100-SXM4-80GB\"},"
         "\"host\":{\"python\":false},\"model\":{\"gpt\":{\"layers\":4,\"hidden\":1024,"
         "\"heads\":16,\"seq_len\":512,\"vocab\":32000,\"tied_embeddings\":true}},"
         "\"training\":{\"global_batch\":8,\"precision\":\"" +
         precision + "\",\"optimizer\":\"adam\",\"steps\":" + std::to_string(steps) +
         "},\"strategy\":{" + strategy + "}}";
}

Scenario parse(const std::string& json) {
  return parse_scenario_string(json, "test.json", {});
}

ModelStateBytes states_of(const std::string& json) {
  const Scenario s = parse(json);
  return rank_model_states(s, sharding_plan(s.strategy.parallel, s.strategy.kind), kModel);
}

const std::string k3d = "\"kind\":\"3d\",\"dp\":4,\"micro_batch_size\":1";

}  // namespace

TEST_CASE(
    "Megatron's model states: grad buffer and main params at setup, fp16's main grads in "
    "step()",
    "[memory][framework]") {
  // bf16 (G = 4: accumulate_allreduce_grads_in_fp32), no distributed optimizer: params 2 Psi,
  // grads 4 Psi, optimizer 4 Psi master + 8 Psi Adam = 12 Psi; 18 Psi at rest, the
  // dist_optimizer.md table's 18. The master and the grad buffer exist from construction.
  const ModelStateBytes bf16 = states_of(gpt(k3d, "bf16"));
  CHECK(bf16.params == 2 * kModel);
  CHECK(bf16.grads == 4 * kModel);
  CHECK(bf16.optimizer == 12 * kModel);
  CHECK(bf16.optimizer_at_setup == 4 * kModel);
  CHECK(bf16.grads_at_setup);
  CHECK(bf16.step_main_grads == 0);  // main_grad.float() of an fp32 tensor is the tensor itself
  // fp16 (G = 2): 2 + 2 + 12 = 16 Psi at rest; step() adds the fp32 copy of the gradients,
  // 4 Psi, which the next zero_grad drops: 20 Psi only inside step() (the table's 20).
  const ModelStateBytes fp16 = states_of(gpt(k3d, "fp16"));
  CHECK(fp16.params + fp16.grads + fp16.optimizer == 16 * kModel);
  CHECK(fp16.step_main_grads == 4 * kModel);
  // Distributed optimizer over dp 4: the fp32 state and the main-grad copy are shard-sized:
  // fp16 at rest 4 Psi + 12 S, in step() + 4 S (the table's 4 + 16/d).
  const ModelStateBytes dist = states_of(gpt(k3d + ",\"distributed_optimizer\":true", "fp16"));
  CHECK(dist.params + dist.grads == 4 * kModel);
  CHECK(dist.optimizer == 12 * kShard);
  CHECK(dist.optimizer_at_setup == 4 * kShard);
  CHECK(dist.step_main_grads == 4 * kShard);
}

TEST_CASE("DeepSpeed ZeRO keeps gradients in the model dtype, FSDP2 its fp32 shard as the master",
          "[memory][framework]") {
  // ZeRO-1, bf16: grads W = 2 per parameter (stage_1_and_2.py, dtype=self.dtype), whole;
  // params 2 Psi; the fp32 partition (4 S) built with the optimizer, Adam's 8 S at step 1:
  // 4 Psi + 12 S, the ZeRO paper's stage-1 count.
  const ModelStateBytes z1 = states_of(gpt("\"kind\":\"zero\",\"zero_stage\":1", "bf16"));
  CHECK(z1.params == 2 * kModel);
  CHECK(z1.grads == 2 * kModel);
  CHECK(z1.optimizer == 12 * kShard);
  CHECK(z1.optimizer_at_setup == 4 * kShard);
  CHECK_FALSE(z1.grads_at_setup);
  // ZeRO-2: the gradient shard, 2 S.
  CHECK(states_of(gpt("\"kind\":\"zero\",\"zero_stage\":2", "bf16")).grads == 2 * kShard);
  // FSDP2 (torchtitan, bf16 MixedPrecisionPolicy): fp32 sharded params 4 S + fp32 grads 4 S +
  // Adam 8 S = 16 S, nothing built at construction beside the shard.
  const ModelStateBytes f2 = states_of(gpt("\"kind\":\"fsdp\",\"fsdp_version\":2", "bf16"));
  CHECK(f2.params + f2.grads + f2.optimizer == 16 * kShard);
  CHECK(f2.optimizer_at_setup == 0);
}

TEST_CASE(
    "Megatron fp16 through the simulator: 16 bytes per parameter beside the activations, 20 "
    "in step()",
    "[memory][framework][sim]") {
  // 3d dp 4 (tp 1, pp 1), fp16, two steps. Setup (step 0): "model parameters" 2 Psi, "grad
  // buffer" 2 Psi, "fp32 main params" 4 Psi; step 1: "optimizer state" 8 Psi (Adam); each step an
  // "fp32 main grads" of 4 Psi allocated and freed around the optimizer. Model-state bytes
  // (params + grads + optimizer) on GPU 0: 16 Psi at step 2's activation peak (the last sample
  // holding the most activations; step 1's equal peak lacks Adam's state), 20 Psi at most.
  const Scenario s = parse(gpt(k3d, "fp16", 2));
  const Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  Bytes setup_params = 0, setup_grads = 0, setup_master = 0, adam = 0;
  int main_grad_allocs = 0, main_grad_frees = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != 0) continue;
    const std::string name = p.name_of(op);
    if (op.kind == OpKind::kAlloc && op.step == 0) {
      if (name == "model parameters") setup_params = op.bytes;
      if (name == "grad buffer") setup_grads = op.bytes;
      if (name == "fp32 main params") setup_master = op.bytes;
    }
    if (op.kind == OpKind::kAlloc && name == "optimizer state") adam += op.bytes;
    if (name == "fp32 main grads") {
      CHECK(op.bytes == 4 * kModel);
      (op.kind == OpKind::kAlloc ? main_grad_allocs : main_grad_frees) += 1;
    }
    CHECK(name != ".grad");  // no per-step gradient allocation
  }
  CHECK(setup_params == 2 * kModel);
  CHECK(setup_grads == 2 * kModel);
  CHECK(setup_master == 4 * kModel);
  CHECK(adam == 8 * kModel);
  CHECK(main_grad_allocs == 2);
  CHECK(main_grad_frees == 2);

  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, RunControl{});
  REQUIRE(r.complete);
  const MemoryReport rep = memory_timeline(p, r.timings, s.cluster);
  const auto idx = [](MemCategory c) { return static_cast<std::size_t>(c); };
  Bytes beside_acts = 0, most = 0, acts = 0;
  for (const MemorySample& smp : rep.gpus.at(0).samples) {
    const Bytes states = smp.by_category[idx(MemCategory::kParams)] +
                         smp.by_category[idx(MemCategory::kGrads)] +
                         smp.by_category[idx(MemCategory::kOptimizer)];
    most = std::max(most, states);
    if (smp.by_category[idx(MemCategory::kActivations)] >= acts) {
      acts = smp.by_category[idx(MemCategory::kActivations)];
      beside_acts = states;
    }
  }
  CHECK(beside_acts == 16 * kModel);
  CHECK(most == 20 * kModel);
}

TEST_CASE("Korthikanti et al. 2022 Figure 1, GPT-3 175B: the first stage's model states",
          "[memory][framework]") {
  // calibration/scenarios/korthikanti_fig1_mem_gpt3-175B.json: 96 blocks, h = 12288, V = 51200,
  // s = 2048, tp 8, pp 8 interleaved v 3, fp16 + Adam, Megatron. GPU 0 (the first stage) holds
  // chunks 0, 8 and 16 (4 blocks each: 12 blocks) and the embedding. Per block, every parameter
  // of the column / row layers split over t = 8, the two LayerNorms (4h) replicated:
  //   (12h^2 + 9h) / 8 + 4h = 226,492,416 + 13,824 + 49,152 = 226,555,392
  //   embedding (V + s) h / 8 = 81,788,928 (position table split too: see docs/memory.md)
  //   P = 12 x 226,555,392 + 81,788,928 = 2,800,453,632
  // At rest 16 P = 44,807,258,112 B = 41.73 GiB (2 params + 2 fp16 grad buffer + 4 master + 8
  // Adam); step() adds 4 P of fp32 main grads. The published figure (45.5625 GiB, read off the
  // paper's Figure 1) is for checking only: docs/memory.md reports the comparison.
  constexpr std::int64_t kP = 2800453632;
  const Scenario s = parse_scenario_file(
      std::string(CSIM_SOURCE_DIR) + "/calibration/scenarios/korthikanti_fig1_mem_gpt3-175B.json",
      {});
  const Program p = lower(s);
  Bytes at_rest = 0, in_step = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || op.kind != OpKind::kAlloc || op.step > 1) continue;
    const std::string name = p.name_of(op);
    if (name == "model parameters" || name == "grad buffer" || name == "fp32 main params" ||
        name == "optimizer state")
      at_rest += op.bytes;
    if (name == "fp32 main grads") in_step = op.bytes;
  }
  CHECK(at_rest == 16 * kP);
  CHECK(in_step == 4 * kP);
}
