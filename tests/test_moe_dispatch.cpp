// The MoE token dispatchers (strategy.moe_dispatcher; docs/program.md, "MoE token dispatchers"):
// DeepEP's traffic matrix and the chance a token reaches a set of experts, the weighted
// all-to-all plan, the allgather dispatcher's all-gather / reduce-scatter, DeepEP's SMs, and the
// bad inputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "backends/block/block_eval.hpp"
#include "core/cost/collective_cost.hpp"
#include "core/error.hpp"
#include "core/lowering/deepep_pattern.hpp"
#include "core/lowering/lowering.hpp"
#include "core/model/moe_routing.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/input_error_support.hpp"

using namespace csim;
using namespace csim::core;
using csim::test::error_of;

namespace {

MoeConfig moe(int experts, int top_k, int groups = 1, int group_top_k = 1) {
  MoeConfig m;
  m.experts = experts;
  m.top_k = top_k;
  m.router.groups = groups;
  m.router.group_top_k = group_top_k;
  return m;
}

std::vector<int> range(int first, int count) {
  std::vector<int> v(static_cast<std::size_t>(count));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// A small MoE transformer on `nodes` x `per_node` H100s (InfiniBand NICs unless `nic` says
// otherwise): 4 blocks, h 256, s 64, 8 experts of 128, top 2; 3d with dp = the GPUs.
std::string tiny(const std::string& strategy, int nodes = 1, int per_node = 4,
                 const std::string& nic = "") {
  return R"({"cluster": {"nodes": )" + std::to_string(nodes) + R"(, "gpus_per_node": )" +
         std::to_string(per_node) + R"(, "nics_per_node": )" + std::to_string(per_node) +
         R"(, "nic_gbps": 400)" + nic +
         R"(, "gpu": "H100-SXM5-80GB"}, "model": {"transformer": {"layers": 4, "hidden": 256,
         "heads": 4, "ffn_hidden": 512, "seq_len": 64, "vocab": 1000, "mlp": "swiglu",
         "norm": "rmsnorm", "position": "rope", "moe": {"experts": 8, "top_k": 2,
         "expert_ffn_hidden": 128}}}, "training": {"global_batch": 16, "precision": "bf16",
         "optimizer": "adam", "steps": 2}, "strategy": {"kind": "3d", "micro_batch_size": 1, )" +
         strategy + "}}";
}

// The first collective on GPU 0 whose name ends in `suffix`.
const Op* first_named(const Program& p, const std::string& suffix) {
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kCollective || op.gpu != 0) continue;
    const std::string n = p.name_of(op);
    if (n.size() >= suffix.size() &&
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      return &op;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("The chance a token reaches a set of experts, with and without group limits",
          "[ep][deepep]") {
  // Without groups: k of E uniformly; a set of x experts is missed with C(E - x, k) / C(E, k).
  // E 8, k 2, one expert: 1 - C(7, 2) / C(8, 2) = 1 - 21 / 28 = 0.25 (= k / E).
  CHECK(chance_token_reaches(moe(8, 2), {3}) == Approx(0.25));
  // Four groups of 2, two picked (t 2 of g 4), then k 2 among their 4 experts. Group 0 is picked
  // with C(3, 1) / C(4, 2) = 1/2, then missed with C(2, 2) / C(4, 2) = 1/6: 1/2 x 5/6 = 5/12.
  CHECK(chance_token_reaches(moe(8, 2, 4, 2), {0, 1}) == Approx(5.0 / 12.0));
  // DeepSeek-V3 (E 256, k 8, 8 groups of 32, 4 picked) on 8 nodes of 8 GPUs, ep 64: a node holds
  // one group, reached with 1/2 x (1 - C(96, 8) / C(128, 8)) = 0.453626; a GPU's 4 experts with
  // 1/2 x (1 - C(124, 8) / C(128, 8)) = 0.114990. A token reaches 8 x 0.4536 = 3.63 nodes on
  // average, at most 4 (node-limited routing, DeepSeek-V3 report section 2.1.2).
  const MoeConfig ds = moe(256, 8, 8, 4);
  CHECK(chance_token_reaches(ds, range(0, 32)) == Approx(0.4536263656));
  CHECK(chance_token_reaches(ds, range(32, 4)) == Approx(0.1149901575));
  // The whole set is always reached; nothing is never reached.
  CHECK(chance_token_reaches(ds, range(0, 256)) == Approx(1.0));
  CHECK(chance_token_reaches(ds, {}) == 0.0);
}

TEST_CASE("DeepEP's traffic matrix: NVLink inside a node, one RDMA copy per node", "[ep][deepep]") {
  // 2 nodes x 2 GPUs, E 4 (one expert per GPU), k 1: P(GPU) = 1/4, P(node) = 1/2.
  const std::vector<double> w = deepep_a2a_shares({0, 1, 2, 3}, 2, moe(4, 1));
  REQUIRE(w.size() == 16u);
  // GPU 0 to GPU 1 (same node): its own tokens for GPU 1 (1/4) and those GPU 2 (node 1, local
  // index 0) sent it over RDMA and it forwards (1/4): (1 + 1) x 1/4 / k = 0.5 of S.
  CHECK(w[0 * 4 + 1] == Approx(0.5));
  // GPU 0 to node 1 over RDMA, once per token reaching node 1, to its local index 0 (GPU 2):
  // P(node) / k = 0.5; nothing to GPU 3 directly, nothing to itself.
  CHECK(w[0 * 4 + 2] == Approx(0.5));
  CHECK(w[0 * 4 + 3] == 0.0);
  CHECK(w[0 * 4 + 0] == 0.0);
  CHECK(w[3 * 4 + 1] == Approx(0.5));  // GPU 3 (node 1, index 1) to GPU 1 (node 0, index 1)
  // DeepSeek-V3's layout (64 GPUs on 8 nodes): per token of a GPU, 7 x 0.4536 = 3.18 copies
  // cross the network where NCCL's all-to-all of the k 8 copies sends 8 x 56 / 64 = 7: the
  // shares to other nodes sum to 3.18 / 8 = 0.3969 of S against 0.875.
  const std::vector<double> ds = deepep_a2a_shares(range(0, 64), 8, moe(256, 8, 8, 4));
  double across = 0, inside = 0;
  for (int c = 0; c < 64; ++c) (c < 8 ? inside : across) += ds[static_cast<std::size_t>(c)];
  CHECK(across == Approx(7 * 0.4536263656 / 8));
  // Inside the node: 7 GPUs x (1 + 7 forwarded sources) x 0.11499 / 8 = 0.8049 of S.
  CHECK(inside == Approx(7 * 8 * 0.1149901575 / 8));
}

TEST_CASE("A weighted all-to-all plan sends what the matrix says, uncapped", "[ep][deepep]") {
  ClusterSpec c;
  c.gpus_per_node = 4;
  c.intra.kind = IntraNodeKind::kNvswitch;
  c.intra.nvswitch_bytes_per_s = 300e9;
  const Topology t(c);
  const CommParams params;
  std::vector<double> w(16, 0.0);
  w[0 * 4 + 1] = 0.5;  // GPU 0 sends half of S to GPU 1, GPU 2 a quarter of S to GPU 3
  w[2 * 4 + 3] = 0.25;
  const TransferPlan plan = plan_collective(t, params, CollectiveKind::kAllToAll,
                                            CollectiveAlgo::kAuto, {0, 1, 2, 3}, -1, 8e6, &w);
  REQUIRE(plan.flows.size() == 2u);
  CHECK(plan.flows[0].bytes == Approx(4e6));
  CHECK(plan.flows[1].bytes == Approx(2e6));
  CHECK(plan.flows[0].rate_cap_bytes_per_s == 0.0);
  // Uniform (no matrix): p (p - 1) = 12 flows of S / p, capped at NCCL's point-to-point rate.
  const TransferPlan uniform = plan_collective(t, params, CollectiveKind::kAllToAll,
                                               CollectiveAlgo::kAuto, {0, 1, 2, 3}, -1, 8e6);
  CHECK(uniform.flows.size() == 12u);
  CHECK(uniform.flows[0].rate_cap_bytes_per_s > 0.0);
}

TEST_CASE("Dispatchers: allgather gathers the group's tokens, deepep weights its exchange",
          "[ep][deepep]") {
  // 4 GPUs, dp 4, ep 4. Per sample a rank's routed copies are s k h e = 64 x 2 x 256 x 2 =
  // 65,536 bytes (the all-to-all's size); its tokens s h e = 32,768, the group's 4 x 32,768 =
  // 131,072 (the all-gather's output, the reduce-scatter's input).
  const Program a2a = lower(parse_scenario_string(tiny(R"("dp": 4, "ep": 4)"), "d.json"));
  const Program ag = lower(
      parse_scenario_string(tiny(R"("dp": 4, "ep": 4, "moe_dispatcher": "allgather")"), "d.json"));
  const Program dp = lower(parse_scenario_string(
      tiny(R"("dp": 4, "ep": 4, "moe_dispatcher": "deepep", "deepep_sms": 16)"), "d.json"));
  for (const Program* p : {&a2a, &ag, &dp}) REQUIRE(validate_program(*p).empty());
  const Op* d = first_named(a2a, "ep all_to_all dispatch");
  REQUIRE(d != nullptr);
  CHECK(d->bytes == 65'536);
  CHECK(a2a.groups[static_cast<std::size_t>(d->group)].a2a_shares.empty());
  const Op* g = first_named(ag, "ep all_gather dispatch");
  const Op* rs = first_named(ag, "ep reduce_scatter combine");
  REQUIRE((g != nullptr && rs != nullptr));
  CHECK(g->collective == CollectiveKind::kAllGather);
  CHECK(g->bytes == 131'072);
  CHECK(rs->collective == CollectiveKind::kReduceScatter);
  CHECK(rs->bytes == 131'072);
  CHECK(first_named(ag, "ep all_gather combine grad") != nullptr);
  CHECK(first_named(ag, "ep reduce_scatter dispatch grad") != nullptr);
  // DeepEP: the same bytes on a group carrying its matrix and SMs. One node of 4 GPUs, 2 experts
  // each, k 2 of 8: a GPU is reached with 1 - C(6, 2) / C(8, 2) = 13/28, each peer gets 13/28 / 2
  // = 13/56 of S (no forwarding inside one node).
  const Op* x = first_named(dp, "ep deepep dispatch");
  REQUIRE(x != nullptr);
  CHECK(x->bytes == 65'536);
  const CommGroup& grp = dp.groups[static_cast<std::size_t>(x->group)];
  CHECK(grp.comm_sms == 16);
  REQUIRE(grp.a2a_shares.size() == 16u);
  CHECK(grp.a2a_shares[1] == Approx(13.0 / 56.0));
  CHECK(comm_kernel_sms(parse_scenario_string(tiny(R"("dp": 4)"), "d.json").cluster.gpu, &grp,
                        *x) == 16);
}

TEST_CASE("DeepEP over 2 nodes: less on the network than NCCL's all-to-all, the block path agrees",
          "[ep][deepep][sim]") {
  // 2 nodes x 4 GPUs, ep 8. NCCL's all-to-all sends 4 of each rank's 8 shares across the network
  // (half of S); DeepEP sends each token once per other node it reaches: P(node) = 1 - C(4, 2) /
  // C(8, 2) = 22/28 of the tokens, 22/28 / k = 0.393 of S. The step gets shorter.
  const Scenario sa = parse_scenario_string(tiny(R"("dp": 8, "ep": 8)", 2, 4), "d.json");
  const Scenario sd = parse_scenario_string(
      tiny(R"("dp": 8, "ep": 8, "moe_dispatcher": "deepep")", 2, 4), "d.json");
  const Program pa = lower(sa), pd = lower(sd);
  REQUIRE(validate_program(pd).empty());
  const block::EvalResult ra = block::evaluate_op_level(sa, pa);
  const block::EvalResult rd = block::evaluate_op_level(sd, pd);
  CHECK(rd.step_time_ns < ra.step_time_ns);
  CHECK(rd.exposed_comm_ns < ra.exposed_comm_ns);
  const block::EvalResult fast = block::evaluate(sd, pd);
  CHECK(fast.fallback_reason.empty());
  CHECK(static_cast<double>(fast.step_time_ns) ==
        Approx(static_cast<double>(rd.step_time_ns)).epsilon(0.01));
}

TEST_CASE("Dispatcher bad inputs name the keys", "[ep][deepep]") {
  auto err = [](const std::string& strategy, int nodes, int per_node, const std::string& nic) {
    return error_of([&] { parse_scenario_string(tiny(strategy, nodes, per_node, nic), "b.json"); });
  };
  // ep 8 over 2 nodes of 4: DeepEP's RDMA needs InfiniBand or RoCE.
  InputError e =
      err(R"("dp": 8, "ep": 8, "moe_dispatcher": "deepep")", 2, 4, R"(, "nic": {"stack": "efa"})");
  CHECK(e.json_path().find("strategy.moe_dispatcher") != std::string::npos);
  CHECK(e.json_path().find("cluster.nic.stack") != std::string::npos);
  CHECK(e.message().find("needs RDMA NICs") != std::string::npos);
  // Inside one node it needs no NIC: ep 4 in each node of 4 parses.
  CHECK_NOTHROW(parse_scenario_string(
      tiny(R"("dp": 8, "ep": 4, "moe_dispatcher": "deepep")", 2, 4, R"(, "nic": {"stack": "efa"})"),
      "ok.json"));
  e = err(R"("dp": 4, "ep": 4, "moe_dispatcher": "deepep", "deepep_sms": 132)", 1, 4, "");
  CHECK(e.json_path() == "strategy.deepep_sms");
  e = err(R"("dp": 4, "ep": 4, "moe_dispatcher": "nccl")", 1, 4, "");
  CHECK(e.json_path() == "strategy.moe_dispatcher");
}

TEST_CASE("Dispatch buffers follow the load: a busier EP rank holds more", "[ep][routing]") {
  // 4 GPUs, dp 4, ep 4 (2 of the 8 experts each), zipf routing: rank j's expert layers save L_j
  // times the balanced activations, L_j = ep x its experts' shares (core/model/moe_routing.hpp).
  // The segment's activations hold the balanced share; a rank with L_j > 1 allocates the rest,
  // (L_j - 1) x the layer's saved bytes, from the layer's forward to its backward. experts.fc
  // saves its input, the rank's copies e s k h = 2 x 64 x 2 x 256 = 65,536 bytes per sample
  // (micro-batches of 1): block 0 (h.0), micro-batch 0 allocates 65,536 (L_j - 1).
  std::string text = tiny(R"("dp": 4, "ep": 4)");
  const std::string moe_key = R"("expert_ffn_hidden": 128})";
  text.replace(text.find(moe_key), moe_key.size(),
               R"("expert_ffn_hidden": 128, "routing": {"kind": "zipf", "skew": 1.0, "seed": 2}})");
  Scenario skewed = parse_scenario_string(text, "z.json");
  skewed.simulation.symmetry = false;
  const Program pz = lower(skewed);
  REQUIRE(validate_program(pz).empty());
  const auto load_alloc = [&](int gpu) -> Bytes {
    for (const Op& op : pz.ops)
      if (op.kind == OpKind::kAlloc && op.gpu == gpu &&
          pz.name_of(op) == "mb0 h.0.mlp.experts.fc.load")
        return op.bytes;
    return 0;
  };
  const MoeConfig& m = skewed.model.transformer_config.moe;
  const std::vector<double> loads = ep_rank_loads(kept_shares(m, expert_shares(m, 0, 0)), 4);
  int busier = 0;
  for (int g = 0; g < 4; ++g) {
    const double l = loads[static_cast<std::size_t>(g)];
    INFO("GPU " << g << " load " << l);
    CHECK(load_alloc(g) == (l > 1 ? std::llround(65'536 * (l - 1)) : 0));
    busier += l > 1;
  }
  CHECK(busier > 0);  // the sample is skewed: some rank holds more than its balanced share
  // The busiest rank's peak is above the lightest one's.
  const block::EvalResult r = block::evaluate_op_level(skewed, pz);
  Bytes lo = r.peaks.front().peak_bytes, hi = lo;
  for (const auto& p : r.peaks) {
    lo = std::min(lo, p.peak_bytes);
    hi = std::max(hi, p.peak_bytes);
  }
  CHECK(hi > lo);
}
