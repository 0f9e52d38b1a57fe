// The parallel dimensions of the composable lowering (core/lowering/hybrid_emitter.hpp), each
// checked alone: an Emitter composed of just that piece (or the pieces it needs) emits exactly
// that dimension's ops. Every expected count and size is derived in a comment first
// (docs/program.md, "Pipeline, tensor, 3D, ZeRO/FSDP" and "Adding a parallel dimension").
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/lowering/hybrid_emitter.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

namespace {

using PieceMaker = std::function<std::unique_ptr<hybrid::ParallelPiece>(hybrid::Emitter&)>;

// The Emitter with only `pieces` (outermost first), as lower_hybrid composes all of them.
Program compose(const Scenario& s, const std::vector<PieceMaker>& pieces) {
  ProgramBuilder b(s);
  hybrid::Emitter e(s, b);
  for (const PieceMaker& make : pieces) e.add_piece(make(e));
  e.build("pieces under test");
  Program p = b.take();
  const std::string problem = validate_program(p);
  INFO(problem);
  REQUIRE(problem.empty());
  return p;
}

const PieceMaker kPipeline = hybrid::make_pipeline_piece;
const PieceMaker kData = hybrid::make_data_parallel_piece;
const PieceMaker kSharding = hybrid::make_sharding_piece;
const PieceMaker kRecompute = hybrid::make_recompute_piece;
const PieceMaker kTensor = hybrid::make_tensor_parallel_piece;

Scenario parse(const std::string& json, const std::vector<std::string>& sets = {}) {
  return parse_scenario_string(json, "test.json", sets);
}

// `n` identical explicit layers of `params` parameters, 1 GFLOP, `act` saved and `out` output
// bytes per sample; fp32 + SGD (W = G = 4 bytes per parameter); no Python.
std::string uniform(int gpus, int n, long params, double act, double out,
                    const std::string& strategy, const std::string& training_extra = "") {
  std::string layers;
  for (int i = 0; i < n; ++i) {
    layers +=
        std::string(i ? "," : "") + "{\"name\":\"l" + std::to_string(i) +
        "\",\"kind\":\"gemm\",\"params\":" + std::to_string(params) +
        ",\"fwd_flops_per_sample\":1e9,\"activation_bytes_per_sample\":" + std::to_string(act) +
        ",\"output_bytes_per_sample\":" + std::to_string(out) + "}";
  }
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":" + std::to_string(gpus) +
         ",\"gpu\":\"A100-SXM4-80GB\"},\"host\":{\"python\":false},\"model\":{\"explicit\":[" +
         layers +
         "],\"input_bytes_per_sample\":0},\"training\":{\"global_batch\":8,\"precision\":"
         "\"fp32\",\"optimizer\":\"sgd\",\"steps\":1" +
         training_extra + "},\"strategy\":{" + strategy + "}}";
}

// A GPT of `layers` blocks: embedding, 13 layers per block, ln_f, LM head; b = 8, s = 512,
// h = 1024, bf16.
std::string gpt(int gpus, const std::string& strategy, int layers = 4) {
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":" + std::to_string(gpus) +
         ",\"gpu\":\"A100-SXM4-80GB\"},\"host\":{\"python\":false},\"model\":{\"gpt\":{"
         "\"layers\":" +
         std::to_string(layers) +
         ",\"hidden\":1024,\"heads\":16,\"seq_len\":512,\"vocab\":32000}},\"training\":{"
         "\"global_batch\":8,\"precision\":\"bf16\",\"optimizer\":\"adam\",\"steps\":1},"
         "\"strategy\":{" +
         strategy + "}}";
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Ops of `gpu` matching `pred`.
std::vector<const Op*> ops_of(const Program& p, int gpu,
                              const std::function<bool(const Op&)>& pred) {
  std::vector<const Op*> out;
  for (const Op& op : p.ops)
    if (op.gpu == gpu && pred(op)) out.push_back(&op);
  return out;
}
int count_named(const Program& p, int gpu, const std::string& name) {
  return static_cast<int>(ops_of(p, gpu, [&](const Op& o) { return p.name_of(o) == name; }).size());
}
int collectives(const Program& p, int gpu) {
  return static_cast<int>(
      ops_of(p, gpu, [](const Op& o) { return o.kind == OpKind::kCollective; }).size());
}

}  // namespace

// [SECTION] Tensor parallel -----------------------------------------------------------------------

TEST_CASE("tensor-parallel piece alone: 2l + 1 collectives each way, nothing else",
          "[lowering][pieces][tp]") {
  // Alone, the piece issues only what shard_layer asks for: per block the row-parallel attn.proj
  // and mlp.proj all-reduce their output forward, the column-parallel attn.qkv and mlp.fc their
  // input gradient backward; the vocabulary-parallel embedding adds one forward, the LM head one
  // backward: 2 * 4 + 1 = 9 each way, of b*s*h*e = 8 * 512 * 1024 * 2 bytes, and no other
  // collective (no pipeline, no data-parallel piece). The forward ones run in line on the compute
  // stream; the backward ones, all of column-parallel layers, beside their weight-gradient GEMM
  // on the "tp" stream (tp_comm_overlap, default true; docs/program.md, "TP communication
  // overlap"), or in line with tp_comm_overlap false.
  const Bytes bshe = 8LL * 512 * 1024 * 2;
  for (const bool overlap : {true, false}) {
    CAPTURE(overlap);
    const Scenario s =
        parse(gpt(2, std::string("\"kind\":\"tensor_parallel\",\"tp\":2,\"tp_comm_overlap\":") +
                         (overlap ? "true" : "false")));
    const Program p = compose(s, {kTensor});
    std::map<std::string, int> by_phase;
    for (const Op* op : ops_of(p, 0, [](const Op& o) { return o.kind == OpKind::kCollective; })) {
      CHECK(p.name_of(*op) == "tp all_reduce");
      CHECK(op->bytes == bshe);
      const bool in_line = op->phase == Phase::kForward || !overlap;
      CHECK((op->stream == p.ops.front().stream) == in_line);
      if (!in_line) CHECK(p.streams[static_cast<std::size_t>(op->stream)].name == "tp");
      ++by_phase[to_string(op->phase)];
    }
    CHECK(by_phase["forward"] == 9);
    CHECK(by_phase["backward"] == 9);
    CHECK(by_phase.size() == 2);
  }
  const Program p = compose(parse(gpt(2, "\"kind\":\"tensor_parallel\",\"tp\":2")), {kTensor});
  // The forward all-reduce follows its row-parallel kernel directly: the op after
  // h.0.attn.proj.fwd is the collective.
  const auto it = std::find_if(p.ops.begin(), p.ops.end(),
                               [&](const Op& o) { return p.name_of(o) == "h.0.attn.proj.fwd"; });
  REQUIRE(it != p.ops.end());
  CHECK(p.name_of(*(it + 1)) == "tp all_reduce");
}

TEST_CASE("recompute re-runs carry the tensor-parallel collectives (recompute + tensor pieces)",
          "[lowering][pieces][tp][recompute]") {
  // Full recompute re-runs each block's 13 forward kernels before the block's backward: 4 * 13
  // = 52 ".recompute" kernels, and through the tensor piece's layer hooks the block's two
  // forward all-reduces again, phase "recompute": 2 * 4 = 8 (the embedding is in no block and
  // is not recomputed). Forward and backward counts stay 9 and 9.
  const Scenario s = parse(gpt(2, "\"kind\":\"tensor_parallel\",\"tp\":2,\"recompute\":\"full\""));
  const Program p = compose(s, {kRecompute, kTensor});
  CHECK(ops_of(p, 0, [&](const Op& o) { return ends_with(p.name_of(o), ".recompute"); }).size() ==
        52);
  std::map<std::string, int> by_phase;
  for (const Op* op : ops_of(p, 0, [](const Op& o) { return o.kind == OpKind::kCollective; }))
    ++by_phase[to_string(op->phase)];
  CHECK(by_phase["recompute"] == 8);
  CHECK(by_phase["forward"] == 9);
  CHECK(by_phase["backward"] == 9);
}

// [SECTION] Recompute -----------------------------------------------------------------------------

TEST_CASE("recompute piece alone: full re-runs a block, selective the attention core",
          "[lowering][pieces][recompute]") {
  // One GPU, 4 blocks, one micro-batch of 8. Full: 13 kernels per block re-run = 52, one
  // "recomputed block" buffer per block, allocated right before the re-run and freed after the
  // block's first layer's backward (h.i.ln_1.bwd). Selective: the attention core's 4 kernels
  // (scores, softmax, dropout, av) per block = 16, one "recomputed attention" buffer per block.
  const Program full =
      compose(parse(gpt(1, "\"kind\":\"3d\",\"recompute\":\"full\"")), {kRecompute});
  CHECK(ops_of(full, 0, [&](const Op& o) {
          return ends_with(full.name_of(o), ".recompute");
        }).size() == 52);
  CHECK(count_named(full, 0, "recomputed block") == 2 * 4);  // 4 allocs + 4 frees
  // The re-run of block 3 comes right before its last layer's backward, in forward order.
  const auto last_bwd = std::find_if(full.ops.begin(), full.ops.end(), [&](const Op& o) {
    return full.name_of(o) == "h.3.mlp.residual.bwd";
  });
  REQUIRE(last_bwd != full.ops.end());
  CHECK(full.name_of(*(last_bwd - 1)) == "h.3.mlp.residual.recompute");
  CHECK(full.name_of(*(last_bwd - 13)) == "h.3.ln_1.recompute");
  CHECK(full.name_of(*(last_bwd - 14)) == "recomputed block");
  const Program sel =
      compose(parse(gpt(1, "\"kind\":\"3d\",\"recompute\":\"selective\"")), {kRecompute});
  const auto re =
      ops_of(sel, 0, [&](const Op& o) { return ends_with(sel.name_of(o), ".recompute"); });
  CHECK(re.size() == 16);
  CHECK(sel.name_of(*re.front()) ==
        "h.3.attn.scores.recompute");  // backward starts at the last block
  CHECK(count_named(sel, 0, "recomputed attention") == 2 * 4);
  // Without the piece: no re-run at all.
  const Program none = compose(parse(gpt(1, "\"kind\":\"3d\",\"recompute\":\"full\"")), {});
  CHECK(ops_of(none, 0, [&](const Op& o) {
          return ends_with(none.name_of(o), ".recompute");
        }).empty());
}

// [SECTION] Pipeline ------------------------------------------------------------------------------

TEST_CASE("pipeline piece alone: m sends and receives per boundary, loss on the last stage",
          "[lowering][pieces][pipeline]") {
  // 8 layers over p = 4 stages (2 each), m = 8 micro-batches of 1 sample, output 4096 bytes per
  // sample. Stage s sends m activations forward unless it is the last, receives m unless it is
  // the first, and the reverse for gradients; each transfer is the segment's output, 4096 * 1
  // bytes. Each stage allocates one activation block per micro-batch (2 layers * 1 MiB * 1) and
  // frees it after that micro-batch's backward; only the last stage computes the loss, m times.
  const int p = 4, m = 8;
  const Scenario s = parse(
      uniform(4, 8, 1000, 1 << 20, 4096, "\"kind\":\"pipeline\",\"pp\":4,\"micro_batch_size\":1"));
  const Program prog = compose(s, {kPipeline});
  for (int g = 0; g < p; ++g) {
    CAPTURE(g);
    const bool first = g == 0, last = g == p - 1;
    CHECK(count_named(prog, g, "send activations") == (last ? 0 : m));
    CHECK(count_named(prog, g, "recv activations") == (first ? 0 : m));
    CHECK(count_named(prog, g, "send gradients") == (first ? 0 : m));
    CHECK(count_named(prog, g, "recv gradients") == (last ? 0 : m));
    for (const Op* op : ops_of(prog, g, [](const Op& o) { return o.kind == OpKind::kCollective; }))
      CHECK(op->bytes == 4096);
    CHECK(count_named(prog, g, "mb0 activations") == 2);  // alloc + free
    const auto act = ops_of(prog, g, [&](const Op& o) {
      return o.kind == OpKind::kAlloc && ends_with(prog.name_of(o), "activations") &&
             prog.name_of(o) != "input batch";
    });
    CHECK(act.size() == static_cast<std::size_t>(m));
    for (const Op* a : act) CHECK(a->bytes == 2 << 20);
    CHECK(ops_of(prog, g, [&](const Op& o) { return ends_with(prog.name_of(o), "loss"); }).size() ==
          static_cast<std::size_t>(last ? m : 0));
  }
}

TEST_CASE("pipeline piece, interleaved: v chunks per stage, the last segment sends nothing",
          "[lowering][pieces][pipeline]") {
  // v = 2: 8 segments of one layer, segment g = chunk * p + stage. Every segment but the last
  // (stage 3, chunk 1) sends its output forward once per micro-batch: stages 0-2 send m * v =
  // 16, stage 3 m * (v - 1) = 8; every segment but the first receives: stage 0 8, others 16.
  const int m = 8;
  const Scenario s = parse(uniform(4, 8, 1000, 1024, 4096,
                                   "\"kind\":\"pipeline\",\"pp\":4,\"micro_batch_size\":1,"
                                   "\"schedule\":\"interleaved\",\"virtual_stages\":2"));
  const Program prog = compose(s, {kPipeline});
  for (int g = 0; g < 4; ++g) {
    CAPTURE(g);
    CHECK(count_named(prog, g, "send activations") == (g == 3 ? m : 2 * m));
    CHECK(count_named(prog, g, "recv activations") == (g == 0 ? m : 2 * m));
  }
}

// [SECTION] Data parallel -------------------------------------------------------------------------

TEST_CASE("data-parallel piece alone: one reduction per unit at the last micro-batch",
          "[lowering][pieces][dp]") {
  // dp = 4, 4 layers of 2^20 parameters (4 units), fp32 gradients: 4 MiB per unit. Gradient
  // accumulation 2 gives m = 2 micro-batches of 1 sample per rank; only the last reduces:
  // 4 all-reduces on rank 0, each waited for by the optimizer.
  const std::string strategy = "\"kind\":\"zero\",\"zero_stage\":0";
  const Scenario s =
      parse(uniform(4, 4, 1 << 20, 1024, 1024, strategy, ",\"gradient_accumulation\":2"));
  REQUIRE(s.strategy.parallel.micro_batches == 2);
  const Program p = compose(s, {kData});
  const auto ar = ops_of(p, 0, [](const Op& o) { return o.kind == OpKind::kCollective; });
  REQUIRE(ar.size() == 4);
  for (const Op* op : ar) {
    CHECK(p.name_of(*op) == "dp all_reduce grads");
    CHECK(op->bytes == 4 << 20);
    CHECK(op->phase == Phase::kBackward);
    CHECK(starts_with(p.name_of(op->deps.at(0).op), "mb1 "));
  }
  const auto opt =
      ops_of(p, 0, [&](const Op& o) { return starts_with(p.name_of(o), "optimizer.step"); });
  REQUIRE(opt.size() == 1);
  CHECK(opt.front()->deps.size() == 4);
  // overlap_grad_reduce (default): unit 3's reduction goes out right after its backward kernel,
  // before the other units' backward; without overlap all four follow the last backward kernel.
  CHECK(p.name_of(ar.front()->id - 1) == "mb1 l3.bwd");
  const Program late =
      compose(parse(uniform(4, 4, 1 << 20, 1024, 1024, strategy + ",\"overlap_grad_reduce\":false",
                            ",\"gradient_accumulation\":2")),
              {kData});
  const auto lar = ops_of(late, 0, [](const Op& o) { return o.kind == OpKind::kCollective; });
  REQUIRE(lar.size() == 4);
  CHECK(late.name_of(lar.front()->id - 1) == "mb1 l0.bwd");
  // ZeRO-1 (Megatron's distributed optimizer): the same reductions as reduce-scatters.
  const Program z1 = compose(
      parse(uniform(4, 4, 1 << 20, 1024, 1024, "\"kind\":\"zero\",\"zero_stage\":1")), {kData});
  CHECK(count_named(z1, 0, "dp reduce_scatter grads") == 4);
  CHECK(collectives(z1, 0) == 4);
}

// [SECTION] Sharding ------------------------------------------------------------------------------

TEST_CASE("sharding piece: ZeRO-3 gathers each unit twice per micro-batch, reduce-scatters once",
          "[lowering][pieces][zero]") {
  // dp = 4, 4 units of 2^20 fp32 parameters (4 MiB), m = 2. Per micro-batch each unit is
  // gathered before its forward and again before its backward: 4 * 2 * 2 = 16 all-gathers of
  // 4 MiB; its gradients are reduce-scattered every micro-batch: 4 * 2 = 8 (the data-parallel
  // piece, which owns the groups, reduces nothing from stage 2 on). Stage 3 has no all-gather
  // after the optimizer (the parameters stay sharded).
  const Scenario s = parse(uniform(4, 4, 1 << 20, 1024, 1024, "\"kind\":\"zero\",\"zero_stage\":3",
                                   ",\"gradient_accumulation\":2"));
  const Program p = compose(s, {kData, kSharding});
  CHECK(count_named(p, 0, "zero all_gather params") == 16);
  CHECK(count_named(p, 0, "zero reduce_scatter grads") == 8);
  CHECK(collectives(p, 0) == 24);
  for (const Op* op : ops_of(p, 0, [](const Op& o) { return o.kind == OpKind::kCollective; }))
    CHECK(op->bytes == 4 << 20);
  // Prefetch (default): unit 1's gather is issued before unit 0's forward kernel.
  const auto first_fwd = std::find_if(p.ops.begin(), p.ops.end(),
                                      [&](const Op& o) { return p.name_of(o) == "mb0 l0.fwd"; });
  const auto gathers_before = std::count_if(p.ops.begin(), first_fwd, [&](const Op& o) {
    return p.name_of(o) == "zero all_gather params";
  });
  CHECK(gathers_before == 2);
  // Without prefetch every gather but the first waits for the kernel issued before it.
  const Program np =
      compose(parse(uniform(4, 4, 1 << 20, 1024, 1024,
                            "\"kind\":\"zero\",\"zero_stage\":3,\"prefetch\":false")),
              {kData, kSharding});
  const auto g =
      ops_of(np, 0, [&](const Op& o) { return np.name_of(o) == "zero all_gather params"; });
  REQUIRE(g.size() == 8);
  CHECK(g.front()->deps.empty());
  for (std::size_t k = 1; k < g.size(); ++k) {
    REQUIRE(g[k]->deps.size() == 1);
    CHECK(np.ops[static_cast<std::size_t>(g[k]->deps[0].op)].kind == OpKind::kCompute);
  }
}

TEST_CASE("sharding piece: shard_grad_op gathers once per micro-batch, ZeRO-2 gathers after step",
          "[lowering][pieces][zero]") {
  // FSDP shard_grad_op keeps a unit's gathered parameters from its forward to its backward:
  // 4 units * m = 2 -> 8 all-gathers, and the 8 reduce-scatters of stage 2.
  const Program sgo = compose(parse(uniform(4, 4, 1 << 20, 1024, 1024,
                                            "\"kind\":\"fsdp\",\"fsdp_sharding\":\"shard_grad_op\"",
                                            ",\"gradient_accumulation\":2")),
                              {kData, kSharding});
  CHECK(count_named(sgo, 0, "zero all_gather params") == 8);
  CHECK(count_named(sgo, 0, "zero reduce_scatter grads") == 8);
  // ZeRO-2: parameters replicated, so no gathers in the step; after the optimizer updates the
  // rank's shard, one all-gather of all 4 * 2^20 parameters (16 MiB), phase optimizer.
  const Program z2 =
      compose(parse(uniform(4, 4, 1 << 20, 1024, 1024, "\"kind\":\"zero\",\"zero_stage\":2")),
              {kData, kSharding});
  const auto ag =
      ops_of(z2, 0, [&](const Op& o) { return z2.name_of(o) == "zero all_gather params"; });
  REQUIRE(ag.size() == 1);
  CHECK(ag.front()->bytes == 16 << 20);
  CHECK(ag.front()->phase == Phase::kOptimizer);
  CHECK(count_named(z2, 0, "zero reduce_scatter grads") == 4);
  // Each reduce-scatter drains a full-size gradient bucket (4 MiB), allocated before the
  // unit's backward and freed after its reduce-scatter.
  const auto buckets = ops_of(z2, 0, [&](const Op& o) { return z2.name_of(o) == "grad bucket"; });
  REQUIRE(buckets.size() == 8);
  for (const Op* b : buckets) CHECK(b->bytes == 4 << 20);
}

// [SECTION] Composition ---------------------------------------------------------------------------

namespace {

// A test-only dimension, as expert parallelism would be added: its own group over each
// data-parallel position's ranks, an all-to-all before every "mlp.fc" kernel forward (dispatch)
// and after every "mlp.proj" kernel forward (combine), the reverse backward. It records the
// hooks it sees, to show the nesting order.
class ToyExpertPiece final : public hybrid::ParallelPiece {
 public:
  ToyExpertPiece(hybrid::Emitter& e, std::vector<std::string>* log) : e_(e), log_(log) {}
  void add_groups() override {
    e_.grid().for_each_group({ParallelDim::kDp},
                             [&](const std::vector<int>& rks, const RankCoord&) {
                               const int g = e_.add_group(rks, "toy ep");
                               for (int x : rks) group_of_rank_[x] = g;
                             });
  }
  void begin_unit(hybrid::LayerPass& lp) override { log("begin_unit", lp); }
  void end_unit(hybrid::LayerPass& lp) override { log("end_unit", lp); }
  void begin_layer(hybrid::LayerPass& lp) override {
    log("begin_layer", lp);
    if (name(lp) == (lp.forward() ? "mlp.fc" : "mlp.proj")) a2a(lp);
  }
  void end_layer(hybrid::LayerPass& lp) override {
    log("end_layer", lp);
    if (name(lp) == (lp.forward() ? "mlp.proj" : "mlp.fc")) a2a(lp);
  }

 private:
  hybrid::Emitter& e_;
  std::vector<std::string>* log_;
  std::map<int, int> group_of_rank_;
  std::string name(const hybrid::LayerPass& lp) const {
    const std::string& n = e_.scenario().model.layers[static_cast<std::size_t>(lp.layer)].name;
    const auto dot = n.find('.', 2);  // "h.0.mlp.fc" -> "mlp.fc"
    return dot == std::string::npos ? n : n.substr(dot + 1);
  }
  void log(const char* hook, const hybrid::LayerPass& lp) {
    if (log_ && lp.layer == 1 && lp.phase == StepPhase::kForward) log_->push_back(hook);
  }
  void a2a(hybrid::LayerPass& lp) {
    hybrid::RankState& r = lp.r();
    r.last_compute = e_.coll(r, r.compute, "toy ep all_to_all", CollectiveKind::kAllToAll,
                             group_of_rank_.at(r.rank), 1 << 20, {}, lp.phase);
  }
};

}  // namespace

TEST_CASE("a new dimension is a piece added to the composition, the others' ops unchanged",
          "[lowering][pieces][compose]") {
  // dp 2 x tp 2 x pp 2 on 8 GPUs, 4 blocks (2 per stage), m = 8 / (dp 2 x 2) = 2, rank symmetry
  // on. The toy expert piece adds 2 all-to-alls per block forward and 2 backward on each
  // representative: 2 blocks * 2 micro-batches * 2 = 8 each way on GPU 0; validate_program
  // (inside compose) checks that every instance has its members. Removing its ops leaves exactly
  // the program without it.
  const Scenario s = parse(gpt(8, "\"kind\":\"3d\",\"tp\":2,\"pp\":2,\"micro_batch_size\":2"));
  REQUIRE(s.strategy.parallel.micro_batches == 2);
  const std::vector<PieceMaker> all = {kPipeline, kData, kSharding, kRecompute, kTensor};
  const Program base = compose(s, all);
  std::vector<std::string> log;
  std::vector<PieceMaker> with = all;
  with.push_back([&](hybrid::Emitter& e) { return std::make_unique<ToyExpertPiece>(e, &log); });
  const Program ep = compose(s, with);
  int fwd = 0, bwd = 0;
  std::vector<std::string> others;
  for (const Op& op : ep.ops) {
    if (ep.name_of(op) == "toy ep all_to_all") {
      if (op.gpu != 0) continue;
      (op.phase == Phase::kForward ? fwd : bwd)++;
      continue;
    }
    others.push_back(ep.name_of(op));
  }
  // 2 blocks on stage 0 x 2 micro-batches x 2 all-to-alls
  CHECK(fwd == 2 * 2 * 2);
  CHECK(bwd == 2 * 2 * 2);
  std::vector<std::string> base_names;
  for (const Op& op : base.ops) base_names.push_back(base.name_of(op));
  CHECK(others == base_names);
  // Hooks nest: a unit's hooks wrap its layers' (layer 1 = h.0.ln_1 begins the unit h.0).
  REQUIRE(log.size() >= 2);
  CHECK(log[0] == "begin_unit");
  CHECK(log[1] == "begin_layer");
  // lower() is this composition without the toy piece.
  const Program lowered = lower(s);
  REQUIRE(lowered.ops.size() == base.ops.size());
  for (std::size_t i = 0; i < base.ops.size(); ++i) {
    CHECK(lowered.name_of(lowered.ops[i]) == base.name_of(base.ops[i]));
    if (lowered.name_of(lowered.ops[i]) != base.name_of(base.ops[i])) break;
  }
}
