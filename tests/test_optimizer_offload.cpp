// Optimizer-state offload, strategy.optimizer_offload (core/lowering/optimizer_offload.hpp;
// docs/program.md, "Optimizer offload"): the GPU memory it saves, the host-link traffic and host
// Adam it adds, and offload 0 as no key at all. Every expected value is derived in a comment.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>

#include "backends/sim/sim_executor.hpp"
#include "core/hardware/topology.hpp"
#include "core/lowering/framework_states.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/optimizer_offload.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "sweep/tune.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// The GPT of test_framework_states.cpp: 4 blocks, h = 1024, 16 heads, s = 512, V = 32000 (tied),
// Psi = 83,679,232 parameters (test_fsdp2.cpp derives the count); dp 4: the distributed
// optimizer's shard S = ceil(Psi / 4) = 20,919,808.
constexpr std::int64_t kModel = 83679232, kShard = 20919808;

// `gpus` A100s on one node (intra-node PCIe at the catalog's generation for the A100, gen4 x16:
// 24 GB/s per GPU per direction, and a host bridge of one such link shared by the node's GPUs,
// docs/cost-model.md, "Topology"), bf16 + Adam, C++ loop.
std::string gpt(int gpus, const std::string& strategy, int steps = 2, int cores = 16) {
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":" + std::to_string(gpus) +
         ",\"gpu\":\"A100-SXM4-80GB\"},\"host\":{\"python\":false,\"cpu_cores\":" +
         std::to_string(cores) +
         "},\"model\":{\"gpt\":{\"layers\":4,\"hidden\":1024,"
         "\"heads\":16,\"seq_len\":512,\"vocab\":32000,\"tied_embeddings\":true}},"
         "\"training\":{\"global_batch\":8,\"precision\":\"bf16\",\"optimizer\":\"adam\","
         "\"steps\":" +
         std::to_string(steps) + "},\"strategy\":{\"kind\":\"3d\"" + strategy + "}}";
}

const std::string kDistopt = ",\"dp\":4,\"micro_batch_size\":1,\"distributed_optimizer\":true";

Scenario parse(const std::string& json) {
  return parse_scenario_string(json, "test.json", {});
}

ModelStateBytes states_of(const Scenario& s) {
  return rank_model_states(s, sharding_plan(s.strategy.parallel, s.strategy.kind), kModel);
}

struct Run {
  Program p;
  ExecutionResult r;
  MemoryReport mem;
};
Run simulate(const Scenario& s) {
  Run out{lower(s), {}, {}};
  REQUIRE(validate_program(out.p).empty());
  sim::SimExecutor ex(s);
  out.r = ex.run(out.p, RunControl{});
  REQUIRE(out.r.complete);
  out.mem = memory_timeline(out.p, out.r.timings, s.cluster);
  return out;
}

// When the last op ends: the run's length (one step here).
TimeNs end_of(const Run& run) {
  TimeNs end = 0;
  for (const OpTiming& t : run.r.timings) end = std::max(end, t.end_ns);
  return end;
}

}  // namespace

TEST_CASE("optimizer offload: the model states lose 12 bytes per offloaded parameter",
          "[offload][memory]") {
  // Distributed optimizer over dp 4, bf16: the rank's optimizer state 12 S (fp32 master 4 S +
  // Adam 8 S, framework_states.hpp), the master built at setup. Offload F = 0.5: n_off =
  // ceil(0.5 S) = 10,459,904 parameters leave: optimizer 12 (S - n_off), master at setup
  // 4 (S - n_off); params and grads (the grad buffer stays on the GPU) unchanged. The host pins
  // n_off x (12 + 4: the fp32 gradient copy).
  const ModelStateBytes none = states_of(parse(gpt(4, kDistopt)));
  const ModelStateBytes half = states_of(parse(gpt(4, kDistopt + ",\"optimizer_offload\":0.5")));
  constexpr std::int64_t kOff = 10459904;
  CHECK(none.optimizer == 12 * kShard);
  CHECK(half.optimizer == 12 * (kShard - kOff));
  CHECK(half.optimizer_at_setup == 4 * (kShard - kOff));
  CHECK(half.params == none.params);
  CHECK(half.grads == none.grads);
  CHECK(half.offloaded_params == kOff);
  CHECK(half.host_bytes == 16 * kOff);
  // F = 1, no distributed optimizer (zero_stage 0): the whole model's 12 Psi leaves.
  const ModelStateBytes all =
      states_of(parse(gpt(4, ",\"dp\":4,\"micro_batch_size\":1,\"optimizer_offload\":1")));
  CHECK(all.optimizer == 0);
  CHECK(all.optimizer_at_setup == 0);
  CHECK(all.offloaded_params == kModel);
}

TEST_CASE("optimizer offload: the simulated peak drops by exactly the offloaded bytes",
          "[offload][memory][sim]") {
  // Two steps: from step 2 every model state sits beside the activations, so the peak of GPU 0
  // holds the whole optimizer state; offloading F of it moves nothing else on the GPU (the
  // gradients go D2H from the grad buffer, the parameters come back H2D into the weights): the
  // peak drops by 12 x n_off bytes, n_off = ceil(F S).
  const Run none = simulate(parse(gpt(4, kDistopt)));
  for (const double f : {0.25, 1.0}) {
    const Run off =
        simulate(parse(gpt(4, kDistopt + ",\"optimizer_offload\":" + std::to_string(f))));
    const auto n_off = static_cast<std::int64_t>(std::ceil(f * static_cast<double>(kShard)));
    INFO("F = " << f);
    CHECK(none.mem.gpus.at(0).peak_bytes - off.mem.gpus.at(0).peak_bytes == 12 * n_off);
  }
}

TEST_CASE("optimizer offload 0 is the Program without the key", "[offload]") {
  const Program a = lower(parse(gpt(4, kDistopt)));
  const Program b = lower(parse(gpt(4, kDistopt + ",\"optimizer_offload\":0")));
  REQUIRE(a.ops.size() == b.ops.size());
  REQUIRE(a.streams.size() == b.streams.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    INFO("op " << i);
    CHECK(a.name_of(a.ops[i]) == b.name_of(b.ops[i]));
    CHECK(a.ops[i].bytes == b.ops[i].bytes);
    CHECK(a.ops[i].kind == b.ops[i].kind);
  }
  const Run ra = simulate(parse(gpt(4, kDistopt)));
  const Run rb = simulate(parse(gpt(4, kDistopt + ",\"optimizer_offload\":0")));
  CHECK(end_of(ra) == end_of(rb));
}

TEST_CASE("optimizer offload: the traffic and the host Adam over the host link", "[offload][sim]") {
  // One A100 (kind 3d, dp 1): the rank updates all Psi parameters; F = 1 offloads them all.
  //   D2H  4 Psi bytes (fp32 gradients), H2D 2 Psi (bf16 parameters), in kMaxOffloadChunks = 8
  //        pieces (the model has more than 8 tensors)
  //   host Adam Psi / (kHostAdamParamsPerCoreS x 16 cores) = 83,679,232 / (81.06e6 x 16) = 64.5 ms
  // Alone on the node, each copy runs at the GPU's PCIe rate, 24 GB/s (gen4 x16, the bridge as
  // fast): D2H 4 Psi / 24e9 = 13.95 ms, H2D 2 Psi / 24e9 = 6.97 ms, plus the route's latency
  // per piece (microseconds).
  const Scenario s = parse(gpt(1, ",\"optimizer_offload\":1", 1));
  const Run run = simulate(s);
  Bytes d2h = 0, h2d = 0;
  TimeNs d2h_ns = 0, h2d_ns = 0, adam_ns = 0;
  int pieces = 0, gpu_steps = 0;
  for (const Op& op : run.p.ops) {
    if (op.step != 1) continue;
    const std::string name = run.p.name_of(op);
    const OpTiming& t = run.r.timings[static_cast<std::size_t>(op.id)];
    if (name == "offload grads D2H") {
      d2h += op.bytes;
      d2h_ns += t.end_ns - t.start_ns;
      ++pieces;
    }
    if (name == "offload params H2D") {
      h2d += op.bytes;
      h2d_ns += t.end_ns - t.start_ns;
    }
    if (name == "cpu adam step") adam_ns += t.end_ns - t.start_ns;
    if (op.kind == OpKind::kCompute && op.phase == Phase::kOptimizer) ++gpu_steps;
  }
  CHECK(pieces == kMaxOffloadChunks);
  CHECK(d2h == 4 * kModel);
  CHECK(h2d == 2 * kModel);
  CHECK(gpu_steps == 0);  // F = 1: Megatron builds no GPU optimizer
  const double expect_adam = static_cast<double>(kModel) / (kHostAdamParamsPerCoreS * 16) * 1e9;
  CHECK(std::fabs(static_cast<double>(adam_ns) - expect_adam) < 1e3);
  CHECK(static_cast<double>(d2h_ns) == Approx(4.0 * kModel / 24e9 * 1e9).epsilon(0.01));
  CHECK(static_cast<double>(h2d_ns) == Approx(2.0 * kModel / 24e9 * 1e9).epsilon(0.01));
  // Not hidden: the step (no offload: its GPU Adam, milliseconds) gets at least the pipeline's
  // longest stage, the host Adam, plus the first D2H piece and the last H2D piece.
  const Run none = simulate(parse(gpt(1, "", 1)));
  const double added = static_cast<double>(end_of(run) - end_of(none));
  CHECK(added > expect_adam);
}

TEST_CASE("optimizer offload: GPUs of one node share the host bridge", "[offload][sim]") {
  // Four ranks (dp 4, distributed optimizer, F = 1) copy their shards at once: each GPU's PCIe
  // link is 24 GB/s, but the node's host bridge (one gen4 x16 link: 24 GB/s per direction)
  // carries all four (GPU 0's three mirror images under rank symmetry): 6 GB/s each, D2H
  // 4 S / 6e9 = 13.95 ms per rank, not the 3.49 ms of an unshared link (the single GPU's
  // 4 Psi / 24e9, as S = Psi / 4).
  const Run run = simulate(parse(gpt(4, kDistopt + ",\"optimizer_offload\":1", 1)));
  TimeNs d2h_ns = 0;
  for (const Op& op : run.p.ops) {
    if (op.step != 1 || op.gpu != 0 || run.p.name_of(op) != "offload grads D2H") continue;
    const OpTiming& t = run.r.timings[static_cast<std::size_t>(op.id)];
    d2h_ns += t.end_ns - t.start_ns;
  }
  CHECK(static_cast<double>(d2h_ns) == Approx(4.0 * kShard / 6e9 * 1e9).epsilon(0.02));
}

TEST_CASE("optimizer offload: tune's memory bound subtracts the offloaded bytes",
          "[offload][tune]") {
  // sweep::memory_bound reads rank_model_states, as the lowering does: with pp 1 the one stage
  // holds all Psi; distributed optimizer over dp 4, two steps (the optimizer state beside the
  // activations), F = 1: both terms of need lose the whole 12 S of the optimizer state.
  const sweep::MemoryBound none = sweep::memory_bound(parse(gpt(4, kDistopt)), 4);
  const sweep::MemoryBound all =
      sweep::memory_bound(parse(gpt(4, kDistopt + ",\"optimizer_offload\":1")), 4);
  CHECK(none.states - all.states == Approx(12.0 * kShard).epsilon(1e-12));
  CHECK(none.bytes - all.bytes == Approx(12.0 * kShard).epsilon(1e-12));
}
