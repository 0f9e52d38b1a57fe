// Fused attention cores through the lowering (docs/attention.md, "Backward" and "Efficiency"):
// the backward's own FLOPs and the kernel's own efficiency reach the Program's ops on every path.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/lowering/lowering.hpp"
#include "core/model/attention_kernels.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// Replaces build_gpt's eager core (scores, softmax, dropout, av) of every block with one fused
// layer of `kernel` (no dropout: GPT-2 small shape, a = 12, d = 64).
void fuse_attention(Scenario& s, AttentionKernel kernel) {
  std::vector<LayerSpec> out;
  const auto& layers = s.model.layers;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string& n = layers[i].name;
    if (n.size() > 11 && n.compare(n.size() - 11, 11, "attn.scores") == 0) {
      AttentionShape sh;
      sh.seq_len = s.model.transformer.seq_len;
      sh.heads = s.model.transformer.heads;
      sh.kv_heads = sh.heads;
      sh.head_dim = s.model.transformer.hidden / sh.heads;
      LayerSpec core = attention_core_layers(kernel, sh, 2, n.substr(0, n.size() - 11))[0];
      core.block = layers[i].block;
      out.push_back(core);
      i += 3;  // softmax, dropout, av
      continue;
    }
    out.push_back(layers[i]);
  }
  s.model.layers = out;
}

// The first compute op on `gpu` whose name ends in `name` (a micro-batch prefix may precede it).
const Op& find_op(const Program& p, const std::string& name, int gpu = 0) {
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kCompute && op.gpu == gpu && p.name_of(op).size() >= name.size() &&
        p.name_of(op).compare(p.name_of(op).size() - name.size(), name.size(), name) == 0)
      return op;
  FAIL("no op " << name);
  return p.ops.front();
}

bool has_op_containing(const Program& p, const std::string& a, const std::string& b) {
  for (const Op& op : p.ops)
    if (p.name_of(op).find(a) != std::string::npos && p.name_of(op).find(b) != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("flash3 core on one H200: backward 2.5x forward, its own efficiency", "[attention]") {
  Scenario s = parse_scenario_file(test::scenario_path("gpt2_small_1xh200.json"));
  fuse_attention(s, AttentionKernel::kFlash3);
  const Program p = lower(s);
  const Op& fwd = find_op(p, "h.0.attn.core.fwd");
  const Op& bwd = find_op(p, "h.0.attn.core.bwd");
  // batch 8, s = 1024, a = 12, d = 64, causal: P = s^2 / 2 = 524,288; forward 4 P a d * 8 =
  // 4 * 524288 * 768 * 8 = 1.2885e10 FLOPs; backward 2.5x (not build_gpt's 2x)
  CHECK(fwd.flops == 4.0 * 524288.0 * 768.0 * 8.0);
  CHECK(bwd.flops == 2.5 * fwd.flops);
  CHECK(fwd.compute_kind == ComputeKind::kAttention);
  // flash3 on Hopper, d = 64, k = s/2 = 512 keys per query: forward 0.500 * 512 / 712,
  // backward 0.512 * 512 / 932, each times the causal diagonal-tile factor u (docs/attention.md,
  // "Causal diagonal tiles"): forward tiles 192 x 128, query blocks of 192 rows process 256, 384,
  // 640, 768, 1024 keys and the last 64 rows 1024: 192 x 3072 + 64 x 1024 = 589,824 + 65,536 =
  // 655,360 pairs for 524,288 useful: u = 0.8; backward 128 x 128: 128^2 x (8 + 7 + ... + 1) =
  // 589,824: u = 8/9
  CHECK(fwd.max_efficiency == Approx(0.500 * 512.0 / 712.0 * 0.8));
  CHECK(bwd.max_efficiency == Approx(0.512 * 512.0 / 932.0 * 8.0 / 9.0));
  // the other layers keep their kind's curve
  CHECK(find_op(p, "h.0.attn.qkv.fwd").max_efficiency == 0.0);
  CHECK(find_op(p, "h.0.attn.qkv.bwd").flops == 2.0 * find_op(p, "h.0.attn.qkv.fwd").flops);
}

TEST_CASE("flash2 core under tensor parallelism and selective recompute", "[attention]") {
  // 4 A100s, tensor parallel tp = 4 (12 heads -> 3 per rank), selective recompute
  Scenario s = parse_scenario_file(test::scenario_path("gpt2_small_8xa100.json"),
                                   {"cluster.gpus_per_node=4", "strategy.kind=tensor_parallel",
                                    "strategy.recompute=selective", "training.global_batch=8"});
  const Program eager = lower(s);
  // build_gpt's eager core is re-run by selective recompute
  CHECK(has_op_containing(eager, "h.0.attn.softmax", ".recompute"));
  fuse_attention(s, AttentionKernel::kFlash2);
  const Program p = lower(s);
  const Op& fwd = find_op(p, "h.0.attn.core.fwd");
  const Op& bwd = find_op(p, "h.0.attn.core.bwd");
  // each rank runs 1/4 of the heads: forward 4 P a d * b / 4; backward 2.5x of that
  CHECK(fwd.flops == Approx(4.0 * 524288.0 * 768.0 * static_cast<double>(fwd.batch) / 4.0));
  CHECK(bwd.flops == Approx(2.5 * fwd.flops));
  // flash2 on Ampere, d = 64, k = 512: forward 0.642 * 512 / 612, backward 0.576 * 512 / 782,
  // each times u = 8/9 (128 x 128 tiles both ways at s = 1024: 128^2 x 36 = 589,824 processed
  // for 524,288 useful)
  CHECK(fwd.max_efficiency == Approx(0.642 * 512.0 / 612.0 * 8.0 / 9.0));
  CHECK(bwd.max_efficiency == Approx(0.576 * 512.0 / 782.0 * 8.0 / 9.0));
  // nothing s^2 is saved, so selective recompute re-runs nothing of the fused core
  CHECK_FALSE(has_op_containing(p, "attn.core", ".recompute"));
}
