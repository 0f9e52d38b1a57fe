// torch.compile's fusion pass (core/model/compile_fusion.hpp; docs/compile.md): which layers of a
// GPT block fuse, the bytes and kernels saved (derived by hand for one block), the min-cut rule,
// and the lowered Program and simulation eager vs compiled: fewer, longer kernels, the same
// tensor-parallel collectives.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/model/compile_fusion.hpp"
#include "core/model/model_builders.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// GPT with h 64, a 4, s 32, V 512: sh = 2048, as^2 = 4 x 32 x 32 = 4096 elements per sample.
GptConfig small_gpt(int layers) {
  GptConfig c;
  c.layers = layers;
  c.hidden = 64;
  c.heads = 4;
  c.seq_len = 32;
  c.vocab = 512;
  return c;
}

std::vector<std::string> block_names(const ModelSpec& m, int block) {
  std::vector<std::string> out;
  for (const LayerSpec& l : m.layers)
    if (l.block == block) out.push_back(l.name);
  return out;
}

std::string scenario(const std::string& strategy, int gpus, bool compile) {
  return "{\"cluster\":{\"gpus_per_node\":" + std::to_string(gpus) +
         ",\"gpu\":\"A100-SXM4-80GB\"},"
         "\"model\":{\"gpt\":{\"layers\":2,\"hidden\":256,\"heads\":8,\"seq_len\":256,"
         "\"vocab\":1024}},"
         "\"training\":{\"global_batch\":8,\"precision\":\"bf16\",\"steps\":1,\"compile\":" +
         std::string(compile ? "true" : "false") + "},\"strategy\":{" + strategy + "}}";
}

struct Kernels {
  int forward = 0, backward = 0, collectives = 0;
  double forward_framework_ops = 0;
};
Kernels count(const Program& p) {
  Kernels k;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCollective) ++k.collectives;
    if (op.kind != OpKind::kCompute) continue;
    if (op.phase == Phase::kForward) ++k.forward;
    if (op.phase == Phase::kBackward) ++k.backward;
  }
  return k;
}

}  // namespace

TEST_CASE("compile fuses a GPT block's pointwise chains, never across GEMMs or blocks",
          "[compile]") {
  const ModelSpec eager = build_gpt(small_gpt(2), 2);
  CompileReport rep;
  const ModelSpec m = compile_model(eager, &rep);
  // 13 layers per block become 11: softmax + dropout (the attention core's pointwise pair) and
  // the attention residual + ln_2 (pointwise into the next reduction); ln_1 cannot join the
  // previous block's residual (torchtitan compiles block by block); qkv, scores, av, proj, fc and
  // proj are GEMMs (cuBLAS extern kernels) and stay.
  CHECK(block_names(m, 1) == std::vector<std::string>{"h.1.ln_1", "h.1.attn.qkv", "h.1.attn.scores",
                                                      "h.1.attn.softmax+dropout", "h.1.attn.av",
                                                      "h.1.attn.proj", "h.1.attn.residual+ln_2",
                                                      "h.1.mlp.fc", "h.1.mlp.gelu", "h.1.mlp.proj",
                                                      "h.1.mlp.residual"});
  CHECK(rep.layers_before == 1 + 2 * 13 + 2);
  CHECK(rep.layers_after == 1 + 2 * 11 + 2);
  // Forward launches per block: eager 16 (softmax 2, each residual 2, the other 11 one each);
  // compiled 11, one per layer. Embedding, ln_f and lm_head are outside the blocks: unchanged.
  CHECK(rep.fwd_kernels_saved == 2 * (16 - 11));
  // Per fused group (bf16, e = 2) per sample, by hand:
  //   softmax + dropout: the softmax output (e as^2 = 8192 B) no longer written nor read:
  //     saved 2 x 8192 = 16384; traffic 2e as^2 + 2e as^2 + as^2 - 16384 = 20480 (read the
  //     scores, write the probabilities and the 1-byte mask).
  //   residual + ln_2: the residual stream (e sh = 4096 B) must still be written (mlp.residual
  //     reads it again), only ln_2's read goes: saved 4096; traffic (3e sh + sh) + 2e sh - 4096
  //     = 14336 + 8192 - 4096 = 18432.
  // So 16384 + 4096 = 20480 bytes per block per sample forward, and the same backward (the
  // intermediates' gradients likewise).
  CHECK(rep.fwd_bytes_saved_per_sample == Approx(2 * 20480.0));
  CHECK(rep.bwd_bytes_saved_per_sample == Approx(2 * 20480.0));
  const LayerSpec* sd = nullptr;
  const LayerSpec* rl = nullptr;
  for (const LayerSpec& l : m.layers) {
    if (l.name == "h.0.attn.softmax+dropout") sd = &l;
    if (l.name == "h.0.attn.residual+ln_2") rl = &l;
  }
  REQUIRE(sd != nullptr);
  REQUIRE(rl != nullptr);
  CHECK(sd->fwd_bytes_per_sample == Approx(20480.0));
  CHECK(rl->fwd_bytes_per_sample == Approx(18432.0));
  // Backward of softmax + dropout: eager 3e as^2 + (2e as^2 + as^2) = 45056, minus the
  // intermediate gradient's write and read 16384 = 28672 (read dy, the mask and the scores,
  // write dx).
  CHECK(sd->bwd_bytes_per_sample == Approx(28672.0));
  CHECK(sd->kernels == 1);
  CHECK(backward_kernels(*sd) == 1.0);
  CHECK(backward_kernels(*rl) == 2.0);  // + ln_2's weight-gradient reduction
  CHECK(sd->tp_role == TpRole::kSharded);
  CHECK(rl->tp_role == TpRole::kReplicated);
  CHECK(sd->selective_recompute);  // still re-run by selective recompute with the core
  CHECK(rl->params == 2 * 64);     // ln_2's weight and bias
  // FLOPs summed: softmax 5 as^2 + dropout as^2 = 6 x 4096.
  CHECK(sd->fwd_flops_per_sample == Approx(6.0 * 4096));
  // Saved activations are unchanged in the GPT block: every tensor a member saves is either in
  // HBM anyway (the scores the batched GEMM wrote, the residual stream) or a dropout mask, so the
  // partitioner changes which tensor is saved, not how many bytes:
  // sh(34 + 5as/h) x e/2 per block = 2048 x (34 + 5 x 4 x 32 / 64) = 2048 x 44 = 90112.
  double eager_act = 0, compiled_act = 0;
  for (const LayerSpec& l : eager.layers)
    if (l.block == 0) eager_act += l.activation_bytes_per_sample;
  for (const LayerSpec& l : m.layers)
    if (l.block == 0) compiled_act += l.activation_bytes_per_sample;
  CHECK(eager_act == Approx(90112.0));
  CHECK(compiled_act == Approx(eager_act));
  // Parameters and FLOPs of the whole model are unchanged.
  CHECK(m.total_params() == eager.total_params());
}

TEST_CASE("compile's min-cut rule: a chain saving its inputs keeps only the group's input",
          "[compile]") {
  // A GEMM writing 100 bytes, then three pointwise layers of one block each reading 100, writing
  // 100 and saving their input (100). Fused: traffic 3 x 200 - 2 x 2 x 100 = 200 (read the GEMM's
  // output, write the last output); saved: the group's input only (100): the partitioner
  // recomputes the two intermediates in the fused backward instead of saving them.
  LayerSpec g;
  g.name = "b.fc";
  g.block = 0;
  g.kind = ComputeKind::kGemm;
  g.tp_role = TpRole::kColumn;
  g.output_bytes_per_sample = 100;
  std::vector<LayerSpec> chain;
  for (const char* n : {"b.a", "b.b", "b.c"}) {
    LayerSpec l;
    l.name = n;
    l.block = 0;
    l.kind = ComputeKind::kElementwise;
    l.tp_role = TpRole::kSharded;
    l.fwd_flops_per_sample = 10;
    l.fwd_bytes_per_sample = 200;
    l.activation_bytes_per_sample = 100;
    l.output_bytes_per_sample = 100;
    chain.push_back(l);
  }
  const LayerSpec f = fuse_layers(chain, &g);
  CHECK(f.name == "b.a+b+c");
  CHECK(f.fwd_bytes_per_sample == Approx(200.0));
  CHECK(f.activation_bytes_per_sample == Approx(100.0));
  CHECK(f.fwd_flops_per_sample == Approx(30.0));
  CHECK(f.output_bytes_per_sample == Approx(100.0));
  // Without a saved group input (the first member saves nothing) every member keeps its own.
  chain[0].activation_bytes_per_sample = 0;
  CHECK(fuse_layers(chain, &g).activation_bytes_per_sample == Approx(200.0));
  // A different tensor-parallel role is a boundary (a TP collective may lie between).
  chain[1].tp_role = TpRole::kReplicated;
  CHECK_FALSE(compile_fuses(chain[0], chain[1]));
  // So is another block.
  chain[1].tp_role = TpRole::kSharded;
  chain[1].block = 1;
  CHECK_FALSE(compile_fuses(chain[0], chain[1]));
}

TEST_CASE("compiled Program: fewer, longer kernels, the same TP collectives, a faster step",
          "[compile][lowering]") {
  // Single GPU, 2 blocks: forward kernels eager 1 + 2 x 13 + 2 = 29, compiled 1 + 2 x 11 + 2 =
  // 25 (one op per layer); backward likewise.
  const Scenario se = parse_scenario_string(scenario("\"kind\":\"single\"", 1, false), "e.json");
  const Scenario sc = parse_scenario_string(scenario("\"kind\":\"single\"", 1, true), "c.json");
  const Program pe = lower(se), pc = lower(sc);
  REQUIRE(validate_program(pc).empty());
  const Kernels ke = count(pe), kc = count(pc);
  CHECK(ke.forward == 29);
  CHECK(kc.forward == 25);
  CHECK(ke.backward == 29);
  CHECK(kc.backward == 25);
  sim::SimExecutor xe(se), xc(sc);
  const ExecutionResult re = xe.run(pe, RunControl{}), rc = xc.run(pc, RunControl{});
  REQUIRE(re.complete);
  REQUIRE(rc.complete);
  auto stats = [](const Program& p, const ExecutionResult& r) {
    TimeNs busy = 0, end = 0;
    int n = 0;
    for (const Op& op : p.ops) {
      const OpTiming& t = r.timings[static_cast<std::size_t>(op.id)];
      end = std::max(end, t.end_ns);
      if (op.kind != OpKind::kCompute) continue;
      busy += t.end_ns - t.start_ns;
      ++n;
    }
    return std::pair<double, TimeNs>{static_cast<double>(busy) / n, end};
  };
  const auto [mean_e, end_e] = stats(pe, re);
  const auto [mean_c, end_c] = stats(pc, rc);
  CHECK(mean_c > mean_e);  // fewer, longer kernels
  CHECK(end_c < end_e);    // less traffic, fewer launches and kernel overheads

  // Tensor parallel (tp 2): the same collectives eager and compiled (fusion never crosses one).
  const std::string tp = "\"kind\":\"tensor_parallel\",\"tp\":2";
  const Kernels te = count(lower(parse_scenario_string(scenario(tp, 2, false), "e.json")));
  const Kernels tc = count(lower(parse_scenario_string(scenario(tp, 2, true), "c.json")));
  CHECK(tc.collectives == te.collectives);
  CHECK(tc.forward < te.forward);
}

TEST_CASE("training.compile: a boolean, a warning when there is no block to compile",
          "[compile][parser]") {
  std::string bad = scenario("\"kind\":\"single\"", 1, true);
  bad.replace(bad.find("\"compile\":true"), 14, "\"compile\":\"yes\"");
  CHECK_THROWS_WITH(parse_scenario_string(bad, "c.json"),
                    Catch::Contains("training.compile") && Catch::Contains("true or false"));
  const Scenario s = parse_scenario_string(
      "{\"cluster\":{\"gpu\":\"A100-SXM4-80GB\"},\"model\":{\"layers\":[{\"type\":\"linear\","
      "\"in\":8,\"out\":8},{\"type\":\"relu\"}]},\"training\":{\"global_batch\":4,\"compile\":true}"
      "}",
      "c.json");
  bool warned = false;
  for (const std::string& w : s.warnings) warned = warned || w.find("training.compile") == 0;
  CHECK(warned);
  CHECK(s.model.layers.size() == 2);  // nothing fused outside blocks
}

TEST_CASE("compiled blocks lower under 3D with selective and full recompute",
          "[compile][lowering]") {
  // tp 2 x pp 2, 2 blocks: the fused softmax+dropout keeps the attention core's recompute
  // marking, so selective recompute still re-runs scores, softmax+dropout and av together; full
  // recompute re-runs the whole compiled block.
  for (const char* rc : {"none", "selective", "full"}) {
    const std::string st =
        "\"kind\":\"3d\",\"tp\":2,\"pp\":2,\"dp\":1,\"micro_batch_size\":2,"
        "\"recompute\":\"" +
        std::string(rc) + "\"";
    const Scenario s = parse_scenario_string(scenario(st, 4, true), "c.json");
    const Program p = lower(s);
    REQUIRE(validate_program(p).empty());
    sim::SimExecutor ex(s);
    CHECK(ex.run(p, RunControl{}).complete);
  }
}
