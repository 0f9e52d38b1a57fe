// DeepSpeed ZeRO-3's parameter coordinator and lowering (core/lowering/zero3_fetch.{hpp,cpp};
// docs/program.md, "ZeRO-3 parameter fetch"), its keys (core/scenario/parse_parallel_zero3.cpp) and
// the optimizer step's temporaries (core/lowering/optimizer_memory.cpp; docs/memory.md). Every
// expected value is derived in a comment first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/sim/sim_executor.hpp"
#include "core/cost/collective_cost.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/optimizer_memory.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/lowering/zero3_fetch.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// A GPT of 4 blocks on one node of 8 A100s: h = 1024, 16 heads, s = 512, V = 32000 (tied LM
// head: 0 parameters), bf16 + Adam, global batch 8 (dp 8: one micro-batch per rank).
// Modules (layers above the 1e5-element persistence threshold):
//   embed     V h + s h        = 33,292,288
//   attn.qkv  3h^2 + 3h        =  3,148,800
//   attn.proj h^2 + h          =  1,049,600
//   mlp.fc    4h^2 + 4h        =  4,198,400
//   mlp.proj  4h^2 + h         =  4,195,328
// ln_1, ln_2, ln_f (2h = 2,048) are persistent. A block's modules: 12,592,128 elements.
constexpr std::int64_t kEmbed = 33292288, kQkv = 3148800, kProj = 1049600, kFc = 4198400,
                       kMlpProj = 4195328;
constexpr std::int64_t kBlockModules = kQkv + kProj + kFc + kMlpProj;
constexpr std::int64_t kModel = 4 * (kBlockModules + 2 * 2048) + kEmbed + 2048;  // + ln_f

std::string gpt(const std::string& strategy_extra, int steps = 2,
                const std::string& host = "\"python\":false") {
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":8,\"gpu\":\"A100-SXM4-80GB\"},\"host\":{" +
         host +
         "},\"model\":{\"gpt\":{\"layers\":4,\"hidden\":1024,\"heads\":16,\"seq_len\":512,"
         "\"vocab\":32000}},\"training\":{\"global_batch\":8,\"precision\":\"bf16\","
         "\"optimizer\":\"adam\",\"steps\":" +
         std::to_string(steps) + "},\"strategy\":{\"kind\":\"zero\",\"zero_stage\":3" +
         strategy_extra + "}}";
}

Scenario parse(const std::string& json) {
  return parse_scenario_string(json, "test.json", {});
}

Program lowered(const std::string& json) {
  Program p = lower(parse(json));
  const std::string problem = validate_program(p);
  INFO(problem);
  REQUIRE(problem.empty());
  return p;
}

std::string parse_error(const std::string& json) {
  try {
    parse(json);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::string kAg = "zero all_gather params", kRs = "zero reduce_scatter grads";

std::vector<const Op*> named(const Program& p, int step, const std::string& name) {
  std::vector<const Op*> out;
  for (const Op& op : p.ops)
    if (op.gpu == 0 && op.step == step && p.name_of(op) == name) out.push_back(&op);
  return out;
}

}  // namespace

// [SECTION] Coordinator ---------------------------------------------------------------------------

TEST_CASE("ZeRO-3 coordinator: step 1 records and gathers on demand, step 2 prefetches",
          "[zero3]") {
  // Modules 0..3 of 30M elements; a micro-batch uses 0 1 2 3 (forward) 3 2 1 0 (backward).
  // Defaults: prefetch bucket 5e7, max live 1e9, reuse distance 1e9.
  const std::int64_t m = 30'000'000;
  Zero3Coordinator c(Zero3Spec{}, {m, m, m, m});
  const std::vector<int> order{0, 1, 2, 3, 3, 2, 1, 0};
  // Micro-batch 1 (record mode): every use gathers its module on demand and frees it: 8 gathers.
  c.reset_step();
  for (int mod : order) {
    const Zero3Use u = c.use(mod, true);
    CHECK(u.on_demand);
    CHECK(u.gathers.size() == 1);
    CHECK(c.release(mod, true));
  }
  CHECK(c.gathers_issued() == 8);
  CHECK(c.trace() == order);
  CHECK(c.live_numel() == 0);
  // Micro-batch 2 (complete trace). Use 0: on demand {0}; then pop uses while the prefetched
  // elements stay below min(1e9 - 30M, 5e7) = 5e7: module 1 (30M < 5e7 goes on), module 2
  // (60M: stop): one coalesced gather {1, 2}. Release of 0: used again 7 uses later after
  // 6 x 30M = 180M < 1e9 elements: kept.
  c.reset_step();
  Zero3Use u = c.use(0, true);
  REQUIRE(u.gathers.size() == 2);
  CHECK(u.gathers[0] == std::vector<int>{0});
  CHECK(u.gathers[1] == std::vector<int>{1, 2});
  // Serials 8 (on demand) and 9 (prefetch); wait_stream ran between them, so the kernel waits
  // for serial 8.
  CHECK(u.tail == 8);
  CHECK_FALSE(c.release(0, true));
  CHECK(c.live_numel() == 3 * m);
  // Use 1: in flight in gather 9, whose wait() runs here; the queue is at use 3 (module 3):
  // prefetched (30M), then uses 4.. are modules gathered already: {3}.
  u = c.use(1, true);
  CHECK_FALSE(u.on_demand);
  CHECK(u.handle_waited == 9);
  REQUIRE(u.gathers.size() == 1);
  CHECK(u.gathers[0] == std::vector<int>{3});
  // Every later use finds its module gathered: no more gathers this micro-batch; the backward
  // uses free (nothing follows within the reuse distance but uses already popped: the last
  // use of each module frees it).
  for (std::size_t k = 2; k < order.size(); ++k) {
    const Zero3Use v = c.use(order[k], true);
    CHECK(v.gathers.empty());
    c.release(order[k], true);
  }
  CHECK(c.gathers_issued() == 11);
  CHECK(c.live_numel() == 0);
}

TEST_CASE("ZeRO-3 coordinator: max_live_parameters stops the prefetch, every use waits",
          "[zero3]") {
  // max live = one module: after the on-demand gather live = 30M, budget = min(30M - 30M, 5e7)
  // = 0, so nothing is prefetched and every use of the replayed micro-batch gathers on demand.
  const std::int64_t m = 30'000'000;
  Zero3Spec z;
  z.max_live_numel = m;
  z.max_reuse_distance_numel = 0;  // free after every use
  Zero3Coordinator c(z, {m, m, m, m});
  const std::vector<int> order{0, 1, 2, 3, 3, 2, 1, 0};
  for (int mb = 0; mb < 2; ++mb) {
    c.reset_step();
    for (int mod : order) {
      const Zero3Use u = c.use(mod, true);
      CHECK(u.on_demand);
      CHECK(u.gathers.size() == 1);
      CHECK(c.release(mod, true));
    }
  }
  CHECK(c.gathers_issued() == 16);
}

TEST_CASE("ZeRO-3 coordinator: the host synchronizes on the fetch 3 uses back", "[zero3]") {
  // Every use gathers on demand (no prefetch), so uses 0, 1, 2 leave events on serials 0, 1, 2;
  // use 3 finds 3 outstanding (> 2) and synchronizes on the oldest, serial 0; use 4 on serial 1.
  Zero3Spec z;
  z.prefetch_bucket_numel = 0;
  Zero3Coordinator c(z, {10, 10, 10, 10, 10});
  c.reset_step();
  std::vector<int> sync;
  for (int mod = 0; mod < 5; ++mod) sync.push_back(c.use(mod, true).host_sync);
  CHECK(sync == std::vector<int>{-1, -1, -1, 0, 1});
}

TEST_CASE("ZeRO-3 synchronous coordinator (DeepSpeed 0.3.x): fetch, synchronize, one ahead",
          "[zero3]") {
  // Modules 0..3 of 30M elements; a micro-batch uses 0 1 2 3 (forward) 3 2 1 0 (backward).
  // Defaults: prefetch bucket 5e7, max live 1e9, reuse distance 1e9.
  const std::int64_t m = 30'000'000;
  Zero3SyncCoordinator c(Zero3Spec{}, {m, m, m, m}, {m, m, m, m});
  const std::vector<int> order{0, 1, 2, 3, 3, 2, 1, 0};
  // Step 1 records: every use gathers on demand and synchronizes on its own handle; no prefetch
  // (the trace finishes at the first optimizer step); every use frees.
  c.begin_step(1);
  c.reset_step();
  for (int mod : order) {
    const Zero3SyncUse u = c.use(mod, true);
    CHECK(u.fetch);
    CHECK(u.synchronize);
    CHECK(u.handles == 1);
    CHECK(u.prefetch.empty());
    CHECK(c.release(mod, true));
  }
  CHECK(c.trace() == order);
  CHECK(c.live_numel() == 0);
  // Step 2. Use 0: on demand, synchronize (1 handle); nothing in flight now, so prefetch from
  // this use: 0 is gathered, 1 (30M < 5e7, go on), 2 (60M >= 5e7: stop) -> {1, 2}. Release of 0:
  // next used at position 7, after 6 x 30M = 180M < 1e9 elements: kept.
  c.begin_step(2);
  c.reset_step();
  Zero3SyncUse u = c.use(0, true);
  CHECK(u.fetch);
  CHECK(u.handles == 1);
  CHECK(u.prefetch == std::vector<int>{1, 2});
  CHECK_FALSE(c.release(0, true));
  // Use 1: in flight -> synchronize on both handles (1 and 2); then prefetch {3}.
  u = c.use(1, true);
  CHECK_FALSE(u.fetch);
  CHECK(u.synchronize);
  CHECK(u.handles == 2);
  CHECK(u.prefetch == std::vector<int>{3});
  CHECK_FALSE(c.release(1, true));
  // Use 2: gathered by the last synchronize: no synchronize; 3 is in flight, so no prefetch.
  u = c.use(2, true);
  CHECK_FALSE(u.synchronize);
  CHECK(u.prefetch.empty());
  CHECK_FALSE(c.release(2, true));
  // Use 3 (forward): in flight -> synchronize on its one handle.
  u = c.use(3, true);
  CHECK(u.synchronize);
  CHECK(u.handles == 1);
  CHECK_FALSE(c.release(3, true));  // used again right after: distance 0
  CHECK(c.live_numel() == 4 * m);
  // The backward finds everything gathered; each module's last use frees it.
  for (std::size_t k = 4; k < order.size(); ++k) {
    u = c.use(order[k], true);
    CHECK_FALSE(u.fetch);
    CHECK_FALSE(u.synchronize);
    CHECK(c.release(order[k], true));
  }
  CHECK(c.live_numel() == 0);
}

// [SECTION] Lowering ------------------------------------------------------------------------------

TEST_CASE("ZeRO-3: one all-gather per module, not per block", "[zero3][strategies]") {
  // Step 1 records (no prefetch, every use frees): the forward gathers embed + 4 modules x 4
  // blocks = 17, the backward the same 17 again: 34 all-gathers. Each block's 4 are the QKV,
  // attention projection and two MLP GEMMs: 8 gathers of W x 3,148,800 = 6,297,600 B (4 blocks x
  // forward and backward). LayerNorms (2,048 elements) are never gathered.
  const Program p = lowered(gpt(""));
  const auto ag1 = named(p, 1, kAg);
  CHECK(ag1.size() == 34);
  CHECK(std::count_if(ag1.begin(), ag1.end(), [](const Op* o) { return o->bytes == 2 * kQkv; }) ==
        8);
  CHECK(std::count_if(ag1.begin(), ag1.end(), [](const Op* o) { return o->bytes == 2 * 2048; }) ==
        0);
  // Step 2 replays: the embedding on demand; its prefetch pops the block modules in trace order
  // until 5e7 elements: 3 blocks (37,776,384) + b3's four (50,368,512 >= 5e7): one gather of all
  // 16, 2 x 50,368,512 B. The reuse distance (1e9 > the whole trace's 2 x 83.7M) keeps
  // everything gathered into the backward: 2 all-gathers in step 2.
  const auto ag2 = named(p, 2, kAg);
  REQUIRE(ag2.size() == 2);
  CHECK(ag2[0]->bytes == 2 * kEmbed);
  CHECK(ag2[1]->bytes == 2 * 4 * kBlockModules);
  // Gradients: reduce_bucket_size 5e8 exceeds the model (kModel = 83,679,232), so one
  // reduce-scatter at the end of the backward, of W x kModel bytes (bf16: DeepSpeed reduces in
  // the model dtype).
  const auto rs = named(p, 1, kRs);
  REQUIRE(rs.size() == 1);
  CHECK(rs[0]->bytes == 2 * kModel);
}

TEST_CASE("ZeRO-3: reduce_bucket_size splits the gradients", "[zero3][strategies]") {
  // Bucket 1e7 elements; the backward's layers with gradients from the last: ln_f 2,048, block
  // 3's mlp.proj (4,197,376), mlp.fc (8,395,776), ln_2 (8,397,824), attn.proj (9,447,424);
  // attn.qkv would make 12.6M > 1e7: reduce-scatter 9,447,424 and start over. Bucket by bucket:
  //   9,447,424 | b3 qkv, ln_1, b2 mlp.proj 7,346,176 | b2 fc, ln_2, proj, qkv, ln_1 8,400,896
  //   | b1 mlp.proj, fc, ln_2, proj 9,445,376 | b1 qkv, ln_1, b0 mlp.proj 7,346,176
  //   | b0 fc, ln_2, proj, qkv, ln_1 8,400,896 | embed 33,292,288 (alone; the pass's end)
  // 7 reduce-scatters whose elements sum to kModel = 83,679,232.
  const Program p = lowered(gpt(",\"reduce_bucket_size\":1e7"));
  const auto rs = named(p, 1, kRs);
  CHECK(rs.size() == 7);
  Bytes sum = 0;
  for (const Op* o : rs) sum += o->bytes;
  CHECK(sum == 2 * kModel);
  CHECK(rs.front()->bytes == 2 * 9447424);
  CHECK(rs.back()->bytes == 2 * kEmbed);
}

TEST_CASE("ZeRO-3: max_live_parameters forces on-demand fetches the kernels wait for",
          "[zero3][strategies]") {
  // stage3_max_live_parameters 1 leaves no prefetch budget and a reuse distance of 0 frees
  // every module after its use, so step 2 gathers every use on demand like step 1: 34.
  const std::string extra = ",\"stage3_max_live_parameters\":1,\"stage3_max_reuse_distance\":0";
  const Scenario s = parse(gpt(extra));
  Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  const auto ag2 = named(p, 2, kAg);
  CHECK(ag2.size() == 34);
  // The exposed wait: every module's kernel waits for its own gather (a stream dep), issued only
  // when the host reaches the module. Here a gather (a 6.3 MB QKV over 8 GPUs: tens of us) takes
  // longer than the kernel before it (a 3.2 GFLOP GEMM: ~15 us), so kernels start exactly at
  // their gather's end: the compute stream idles for gather.end - previous kernel's end.
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, RunControl{});
  REQUIRE(r.complete);
  int waited = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || op.step != 2 || op.kind != OpKind::kCompute) continue;
    for (const Dep& d : op.deps) {
      const Op& g = p.ops[static_cast<std::size_t>(d.op)];
      if (p.name_of(g) != kAg) continue;
      const OpTiming& t = r.timings[static_cast<std::size_t>(op.id)];
      const OpTiming& tg = r.timings[static_cast<std::size_t>(g.id)];
      CHECK(t.start_ns >= tg.end_ns);
      if (t.start_ns == tg.end_ns) ++waited;
    }
  }
  CHECK(waited > 0);
  // Each of the 34 small gathers pays the collective's latency on its own: its duration is at
  // least NCCL's launch + setup term (CommParams::nccl_base_latency_us, 4 us; the per-hop alphas
  // of the 8-rank ring come on top: docs/cost-model.md, "Communication").
  const TimeNs base_ns = static_cast<TimeNs>(CommParams{}.nccl_base_latency_us * 1000);
  for (const Op* g : ag2) {
    const OpTiming& t = r.timings[static_cast<std::size_t>(g->id)];
    CHECK(t.end_ns - t.start_ns >= base_ns);
  }
}

TEST_CASE("ZeRO-3: overlap_comm false runs the gathers on the compute stream",
          "[zero3][strategies]") {
  // DeepSpeed: __allgather_stream = default_stream() without overlap_comm.
  const Program on = lowered(gpt(""));
  const Program off = lowered(gpt(",\"overlap_comm\":false"));
  const auto ag_on = named(on, 1, kAg), ag_off = named(off, 1, kAg);
  const auto stream_role = [](const Program& p, const Op* o) {
    return p.streams[static_cast<std::size_t>(o->stream)].role;
  };
  CHECK(stream_role(on, ag_on.front()) == StreamRole::kComm);
  CHECK(stream_role(off, ag_off.front()) == StreamRole::kCompute);
}

TEST_CASE("ZeRO-3: the reduce-scatter's per-rank slicing on the host", "[zero3][strategies]") {
  // One bucket (5e8 > the model) of every gradient tensor: embed 2 (wte, wpe), 12 per block
  // (4 weights, 4 biases, ln_1 and ln_2 weight and bias) x 4, ln_f 2 (the LM head is tied) = 52.
  // reduce_scatter_coalesced before the collective: T (p + 1) + 3 = 52 x 9 + 3 = 471 framework
  // ops, 471 x 4.8 us = 2,260.8 us of Python and 471 x 2.0 = 942 us of dispatch; after it
  // 5 T = 260 (docs/program.md, "ZeRO-3 parameter fetch").
  const Program p = lowered(gpt("", 1, "\"cpu_cores\":8"));
  const auto prep = named(p, 1, "zero3 reduce_scatter_coalesced");
  REQUIRE(prep.size() == 1);
  CHECK(prep[0]->python_ns == 2260800);
  CHECK(prep[0]->dispatch_ns == 942000);
  const auto after = named(p, 1, "zero3 partition_grads");
  REQUIRE(after.size() == 1);
  CHECK(after[0]->python_ns == 260 * 4800);
}

namespace {
const std::string kSync = ",\"zero3_fetch\":\"synchronous\"";
}  // namespace

TEST_CASE("ZeRO-3 synchronous: one all-gather and one reduce-scatter per tensor",
          "[zero3][strategies]") {
  // Tensors under 1e5 elements persist (stage3.py v0.3.14, persistent_parameters): biases
  // (3,072, 1,024, 4,096, 1,024) and the norms' 1,024-element weights and biases. Gathered: wte
  // (32,768,000) and wpe (524,288), and the 4 weights of each block. Step 1 (no prefetch): forward
  // and backward each fetch 2 + 16 = 18 tensors: 36 all-gathers, then _post_step's one of the
  // persistent tensors: 4 x 13,312 + ln_f 2,048 = 55,296 elements, 110,592 B in bf16.
  const Program p = lowered(gpt(kSync));
  const auto ag = named(p, 1, kAg);
  REQUIRE(ag.size() == 37);
  CHECK(std::count_if(ag.begin(), ag.end(),
                      [](const Op* o) { return o->bytes == 2 * 3 * 1024 * 1024; }) == 8);
  CHECK(ag.back()->bytes == 2 * 55296);
  CHECK(ag.back()->phase == Phase::kOptimizer);
  // Every gathered tensor synchronizes the device before its all-gather (pp 625): 36.
  CHECK(named(p, 1, "zero3 torch.cuda.synchronize").size() == 36);
  // Gradients: one reduce-scatter per tensor, 52 (the bucket is the whole model), together the
  // model's elements.
  const auto rs = named(p, 1, kRs);
  REQUIRE(rs.size() == 52);
  Bytes sum = 0;
  for (const Op* o : rs) sum += o->bytes;
  CHECK(sum == 2 * kModel);
}

TEST_CASE("ZeRO-3 synchronous: per-rank loops on the host", "[zero3][strategies]") {
  // p = 8, host defaults (4.8 us Python + 2.0 us dispatch per framework op).
  //   _allgather_param: p narrows + the shard's copy_ + the call = 10 ops: 48 us + 20 us; then
  //     ProcessGroupNCCL's p copy_ calls, dispatch only: 16 us.
  //   _post_step: per persistent tensor 1 + 4p = 33 ops, 34 tensors: 1,122 ops -> 5,385.6 us of
  //     Python; dispatch (1,122 + the flat buffer's 8 copies) x 2.0 = 2,260 us.
  const Program p = lowered(gpt(kSync, 1, "\"cpu_cores\":8"));
  const auto issue = named(p, 1, "zero3 all_gather partitions");
  REQUIRE_FALSE(issue.empty());
  CHECK(issue[0]->python_ns == 48000);
  CHECK(issue[0]->dispatch_ns == 20000);
  const auto copies = named(p, 1, "zero3 all_gather copy-out");
  REQUIRE_FALSE(copies.empty());
  CHECK(copies[0]->kind == OpKind::kHostWork);
  CHECK(copies[0]->dispatch_ns == 16000);
  const auto post = named(p, 1, "zero3 persistent copy-out");
  REQUIRE(post.size() == 2);  // the host loop, then the copy kernel
  CHECK(post[0]->python_ns == 5385600);
  CHECK(post[0]->dispatch_ns == 2260000);
}

TEST_CASE("ZeRO-3 synchronous: the host waits for the whole device at every fetch",
          "[zero3][strategies]") {
  // _synchronize_communication and _allgather_param call torch.cuda.synchronize(): when such a
  // host op ends, every GPU op issued before it on the rank has ended, whatever its stream.
  const Scenario s = parse(gpt(kSync));
  const Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  sim::SimExecutor ex(s);
  const ExecutionResult r = ex.run(p, RunControl{});
  REQUIRE(r.complete);
  int checked = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || op.step != 2) continue;
    const std::string n = p.name_of(op);
    if (n != "zero3 synchronize_communication" && n != "zero3 torch.cuda.synchronize") continue;
    const TimeNs at = r.timings[static_cast<std::size_t>(op.id)].end_ns;
    for (OpId k = 0; k < op.id; ++k) {
      const Op& g = p.ops[static_cast<std::size_t>(k)];
      if (g.gpu != 0 || g.stream < 0 || g.kind == OpKind::kAlloc || g.kind == OpKind::kFree)
        continue;
      CHECK(r.timings[static_cast<std::size_t>(k)].end_ns <= at);
    }
    ++checked;
  }
  CHECK(checked > 0);
}

// [SECTION] Keys
// ------------------------------------------------------------------------------------

TEST_CASE("ZeRO-3 keys: DeepSpeed's defaults, numbers as DeepSpeed writes them, refusals",
          "[zero3][parse]") {
  const Zero3Spec d = parse(gpt("")).strategy.parallel.zero3;
  CHECK(d.prefetch_bucket_numel == 50000000);
  CHECK(d.max_live_numel == 1000000000);
  CHECK(d.max_reuse_distance_numel == 1000000000);
  CHECK(d.persistence_threshold_numel == 100000);
  CHECK(d.reduce_bucket_numel == 500000000);
  CHECK(d.overlap_comm);
  CHECK(d.fetch == Zero3Fetch::kAsync);
  CHECK(parse(gpt(kSync)).strategy.parallel.zero3.fetch == Zero3Fetch::kSynchronous);
  CHECK_THAT(parse_error(gpt(",\"zero3_fetch\":\"eager\"")),
             Catch::Contains("strategy.zero3_fetch"));
  const Zero3Spec z = parse(gpt(",\"stage3_prefetch_bucket_size\":2e8")).strategy.parallel.zero3;
  CHECK(z.prefetch_bucket_numel == 200000000);
  CHECK(parse(gpt(",\"prefetch\":false")).strategy.parallel.zero3.prefetch_bucket_numel == 0);
  CHECK_THAT(parse_error(gpt(",\"prefetch\":false,\"stage3_prefetch_bucket_size\":5")),
             Catch::Contains("prefetch false contradicts"));
  CHECK_THAT(parse_error(gpt(",\"reduce_bucket_size\":0")),
             Catch::Contains("strategy.reduce_bucket_size"));
  std::string stage2 = gpt(",\"overlap_comm\":true");
  stage2.replace(stage2.find("\"zero_stage\":3"), 14, "\"zero_stage\":2");
  CHECK_THAT(parse_error(stage2), Catch::Contains("needs strategy.kind zero with zero_stage 3"));
}

// [SECTION] Memory --------------------------------------------------------------------------------

TEST_CASE("Model-state bytes per parameter by framework", "[zero3][memory]") {
  // dp 8, Psi = kModel = 83,679,232, shard ceil(Psi / 8) = 10,459,904.
  // DeepSpeed ZeRO-3, bf16 + Adam: params 2 + grads 2 (model dtype) + fp32 master 4 + Adam 8 =
  // 16 bytes per shard element (the ZeRO paper's 16 Psi / N); Megatron's fp32 main grads (G = 4)
  // would make it 18. The optimizer step adds DeepSpeed's fp32 gradient partition, 4 per shard
  // element, during the step.
  const std::int64_t shard = 10459904;
  const Program p = lowered(gpt(""));
  Bytes grads = 0, params = 0, tmp = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || op.kind != OpKind::kAlloc) continue;
    if (p.name_of(op) == ".grad" && op.step == 1) grads = op.bytes;
    if (p.name_of(op) == "model parameters") params = op.bytes;
    if (p.name_of(op) == "zero3 fp32 grad partition" && op.step == 1) tmp = op.bytes;
  }
  CHECK(params == 2 * shard);
  CHECK(grads == 2 * shard);
  CHECK(tmp == 4 * shard);
  // PyTorch's foreach Adam (FSDP1 here, full_shard over 8): exp_avg_sq_sqrt, one fp32 tensor per
  // updated (shard) element: 4 x 10,459,904 during the step. Megatron's 3d: FusedAdam, none.
  const std::string zero3 = "\"kind\":\"zero\",\"zero_stage\":3";
  std::string fsdp = gpt("");
  fsdp.replace(fsdp.find(zero3), zero3.size(), "\"kind\":\"fsdp\"");
  const OptimizerTemporary t = optimizer_step_temporary(parse(fsdp), shard);
  CHECK(t.bytes == 4 * shard);
  std::string mega = gpt("");
  mega.replace(mega.find(zero3), zero3.size(), "\"kind\":\"3d\"");
  CHECK(optimizer_step_temporary(parse(mega), shard).bytes == 0);
}

// [SECTION] FSDP1 ---------------------------------------------------------------------------------

namespace {

std::string fsdp1(const std::string& extra) {
  std::string j = gpt(extra, 1);
  const std::string zero3 = "\"kind\":\"zero\",\"zero_stage\":3";
  j.replace(j.find(zero3), zero3.size(), "\"kind\":\"fsdp\"");
  return j;
}

// Step 1's FSDP1 all-gathers on GPU 0, in issue order, split by phase.
std::vector<const Op*> fsdp1_gathers(const Program& p, const std::string& phase) {
  std::vector<const Op*> out;
  for (const Op* o : named(p, 1, kAg))
    if (to_string(o->phase) == phase) out.push_back(o);
  return out;
}

bool host_waits(const Op& o) {
  return std::any_of(o.deps.begin(), o.deps.end(),
                     [](const Dep& d) { return d.kind == DepKind::kHostWaits; });
}

}  // namespace

TEST_CASE("FSDP1: limit_all_gathers holds the host two units ahead", "[fsdp1][strategies]") {
  // Units in forward: embed, blocks 0..3, the head (ln_f + lm_head): 6 gathers. Each forward
  // reshard queues a free event (the unit's last kernel); the gather of unit k >= 2 finds 2
  // queued and waits for the oldest, unit k - 2's: 4 gathers with a host wait, each on a forward
  // kernel of unit k - 2. Without the limiter none waits.
  const Program on = lowered(fsdp1(""));
  const auto fwd = fsdp1_gathers(on, "forward");
  REQUIRE(fwd.size() == 6);
  int waits = 0;
  for (std::size_t k = 0; k < fwd.size(); ++k) {
    CHECK(host_waits(*fwd[k]) == (k >= 2));
    for (const Dep& d : fwd[k]->deps) {
      if (d.kind != DepKind::kHostWaits) continue;
      ++waits;
      const Op& kernel = on.ops[static_cast<std::size_t>(d.op)];
      CHECK(kernel.kind == OpKind::kCompute);
      CHECK(kernel.id < fwd[k - 1]->id);  // before unit k - 1's gather: unit k - 2's last kernel
    }
  }
  CHECK(waits == 4);
  const Program off = lowered(fsdp1(",\"limit_all_gathers\":false"));
  for (const Op* o : fsdp1_gathers(off, "forward")) CHECK_FALSE(host_waits(*o));
}

TEST_CASE("FSDP1: forward_prefetch and backward_prefetch order the gathers",
          "[fsdp1][strategies]") {
  // forward_prefetch false (PyTorch's default): unit 1's gather is issued after unit 0's
  // kernels; with it, before them (right after unit 0's own gather).
  const auto first_kernel_after = [](const Program& p, OpId id) {
    for (const Op& op : p.ops)
      if (op.id > id && op.gpu == 0 && op.kind == OpKind::kCompute) return op.id;
    return kNoOp;
  };
  const Program lazy = lowered(fsdp1(""));
  const Program eager = lowered(fsdp1(",\"forward_prefetch\":true"));
  const auto fl = fsdp1_gathers(lazy, "forward"), fe = fsdp1_gathers(eager, "forward");
  REQUIRE(fl.size() == 6);
  REQUIRE(fe.size() == 6);
  CHECK(first_kernel_after(lazy, fl[0]->id) < fl[1]->id);
  CHECK(first_kernel_after(eager, fe[0]->id) > fe[1]->id);
  // Backward (the head is gathered again, then the blocks and the embedding: 6). BACKWARD_PRE:
  // the second gather goes out before the head's first backward kernel; "none": after it.
  const Program pre = lowered(fsdp1(""));
  const Program none = lowered(fsdp1(",\"backward_prefetch\":\"none\""));
  const auto bp = fsdp1_gathers(pre, "backward"), bn = fsdp1_gathers(none, "backward");
  REQUIRE(bp.size() == 6);
  REQUIRE(bn.size() == 6);
  CHECK(first_kernel_after(pre, bp[0]->id) > bp[1]->id);
  CHECK(first_kernel_after(none, bn[0]->id) < bn[1]->id);
  CHECK_THAT(parse_error(fsdp1(",\"prefetch\":false,\"forward_prefetch\":true")),
             Catch::Contains("prefetch false contradicts forward_prefetch"));
  CHECK_THAT(parse_error(gpt(",\"limit_all_gathers\":true")),
             Catch::Contains("is an FSDP1 argument"));
}
