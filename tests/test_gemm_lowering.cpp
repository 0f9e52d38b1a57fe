// The GEMM shapes the lowering gives a linear layer's kernels, and Megatron's overlap of the
// input-gradient all-reduce with the weight-gradient GEMM (docs/cost-model.md, "GEMM shape";
// docs/program.md, "TP communication overlap"). Expected values derived in comments.
#include <catch2/catch.hpp>

#include <string>

#include "backends/sim/sim_executor.hpp"
#include "core/cost/gemm_shape_cost.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// GPT h = 1536, 16 heads, s = 2048 at TP 8 on one DGX A100, micro-batch 4, fp16. nccl_sms 0:
// collectives take no SMs from the kernels beside them, so overlapped times add up exactly.
Scenario tp8(bool overlap) {
  const std::string text =
      R"({"cluster": {"nodes": 1, "gpus_per_node": 8,
                      "gpu": {"base": "A100-SXM4-80GB", "nccl_sms": 0}},
          "host": {"python": false},
          "model": {"gpt": {"layers": 2, "hidden": 1536, "heads": 16, "seq_len": 2048,
                            "vocab": 32000}},
          "training": {"global_batch": 4, "precision": "fp16", "optimizer": "adam", "steps": 1},
          "strategy": {"kind": "tensor_parallel", "tp": 8, "tp_comm_overlap": )" +
      std::string(overlap ? "true" : "false") + "}}";
  return parse_scenario_string(text, "tp8");
}

// The first op on GPU 0 whose name starts with `name`.
const Op& find(const Program& p, const std::string& name) {
  for (const Op& op : p.ops) {
    if (op.gpu == 0 && p.name_of(op).rfind(name, 0) == 0) return op;
  }
  FAIL("no op " << name);
  return p.ops.front();
}

bool same(const GemmShape& a, std::int64_t m, std::int64_t n, std::int64_t k) {
  return a.batch == 1 && a.m == m && a.n == n && a.k == k;
}

}  // namespace

TEST_CASE("a linear layer's kernels carry its shape on one TP rank", "[gemm_shape][tp]") {
  // m = 4 samples x 2048 tokens = 8192. Column-parallel layers split n by 8, row-parallel k:
  //   attn.qkv  1536 -> 3 x 1536: n 4608 / 8 = 576, k 1536
  //   attn.proj 1536 -> 1536:     n 1536, k 1536 / 8 = 192
  //   mlp.fc    1536 -> 6144:     n 6144 / 8 = 768, k 1536
  //   mlp.proj  6144 -> 1536:     n 1536, k 6144 / 8 = 768
  //   lm_head   1536 -> 32000 (vocabulary-parallel, as column): n 4000, k 1536
  const Program p = lower(tp8(false));
  CHECK(same(find(p, "h.0.attn.qkv.fwd").gemm, 8192, 576, 1536));
  CHECK(same(find(p, "h.0.attn.proj.fwd").gemm, 8192, 1536, 192));
  CHECK(same(find(p, "h.0.mlp.fc.fwd").gemm, 8192, 768, 1536));
  CHECK(same(find(p, "h.0.mlp.proj.fwd").gemm, 8192, 1536, 768));
  CHECK(same(find(p, "lm_head.fwd").gemm, 8192, 4000, 1536));
  CHECK(find(p, "h.0.attn.qkv.fwd").gemm_pass == GemmPass::kForward);
  // The backward op runs both products of the same forward shape; FLOPs 2 x 2 m n k.
  const Op& b = find(p, "h.0.mlp.proj.bwd");
  CHECK(b.gemm_pass == GemmPass::kBackward);
  CHECK(same(b.gemm, 8192, 1536, 768));
  CHECK(b.flops == Approx(4.0 * 8192 * 1536 * 768));
  // The attention core's batched GEMMs and the pointwise layers have none (their curves).
  CHECK(find(p, "h.0.attn.scores.fwd").gemm.empty());
  CHECK(find(p, "h.0.ln_1.fwd").gemm.empty());
}

TEST_CASE("TP overlap: the input-gradient all-reduce runs beside the weight gradient",
          "[gemm_shape][tp]") {
  const Scenario on = tp8(true), off = tp8(false);
  const Program po = lower(on), pf = lower(off);
  REQUIRE(validate_program(po).empty());
  // With the overlap attn.qkv's backward is two kernels: dgrad, then wgrad, on the compute
  // stream; the all-reduce between them on the "tp" stream waits for dgrad.
  const Op& dgrad = find(po, "h.1.attn.qkv.bwd");
  const Op& wgrad = find(po, "h.1.attn.qkv.bwd (wgrad)");
  CHECK(dgrad.gemm_pass == GemmPass::kDgrad);
  CHECK(wgrad.gemm_pass == GemmPass::kWgrad);
  CHECK(dgrad.stream == wgrad.stream);
  CHECK(dgrad.flops == Approx(2.0 * 8192 * 576 * 1536));
  CHECK(wgrad.flops == Approx(2.0 * 8192 * 576 * 1536));
  const Op* ar = nullptr;
  for (const Op& op : po.ops) {
    if (op.gpu == 0 && op.id > dgrad.id && op.kind == OpKind::kCollective) {
      ar = &op;
      break;
    }
  }
  REQUIRE(ar != nullptr);
  CHECK(ar->stream != dgrad.stream);
  CHECK(ar->collective == CollectiveKind::kAllReduce);
  CHECK(po.streams[static_cast<std::size_t>(ar->stream)].name == "tp");
  // Row-parallel layers have no backward all-reduce: one op as without the overlap.
  CHECK(find(po, "h.1.attn.proj.bwd").gemm_pass == GemmPass::kBackward);

  // Timing. From the start of attn.qkv's backward to the start of ln_1's (which needs the reduced
  // input gradient): in line, dgrad + wgrad + all-reduce; overlapped, dgrad + max(wgrad,
  // all-reduce). The overlap hides min(all-reduce, wgrad). Host work runs far ahead (no Python)
  // and the 8 ranks are symmetric, so nothing else enters the span.
  sim::SimExecutor xo(on), xf(off);
  const ExecutionResult ro = xo.run(po, {}), rf = xf.run(pf, {});
  auto span = [](const Program& p, const ExecutionResult& r) {
    return r.timings[static_cast<std::size_t>(find(p, "h.1.ln_1.bwd").id)].start_ns -
           r.timings[static_cast<std::size_t>(find(p, "h.1.attn.qkv.bwd").id)].start_ns;
  };
  const OpTiming& art = ro.timings[static_cast<std::size_t>(ar->id)];
  const TimeNs ar_ns = art.end_ns - art.start_ns;
  const TimeNs wgrad_ns =
      gemm_duration_ns(on.cluster.gpu, Dtype::kFp16, wgrad.gemm, GemmPass::kWgrad);
  CHECK(ar_ns > 0);
  CHECK(span(pf, rf) - span(po, ro) == std::min(ar_ns, wgrad_ns));
}
