// Multi-token prediction (core/model/mtp_layers.hpp; docs/transformer.md, "Multi-token
// prediction"): DeepSeek-V3's counts with one depth, the layers a depth adds and where they sit,
// the FLOPs they add, the last pipeline stage holding them, and the bad inputs.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/flops.hpp"
#include "core/model/model_transformer.hpp"
#include "core/model/mtp_layers.hpp"
#include "core/model/transformer_flops.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/input_error_support.hpp"
#include "tests/layer_lookup.hpp"
#include "tests/test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

Scenario deepseek_v3(const std::string& mtp) {
  const std::string path = test::repo_path("scenarios/models/deepseek_v3.json");
  return parse_scenario_string(
      R"({"cluster": {"gpus_per_node": 8, "gpu": "H100-SXM5-80GB"}, "model": {"hf_config": ")" +
          path + R"(", "seq_len": 4096)" + mtp + R"(}, "training": {"global_batch": 8,
          "precision": "bf16", "steps": 1}, "strategy": {"kind": "single"}})",
      "dsv3.json");
}

// A small dense decoder: 2 blocks, h 256, 4 heads (d 64), SwiGLU f 512, s 64, V 1000, RMSNorm,
// RoPE; `mtp` adds keys to model.transformer; `strategy` is the strategy object's body.
std::string tiny(const std::string& mtp, const std::string& strategy = R"("kind": "single")",
                 int gpus = 1) {
  return R"({"cluster": {"gpus_per_node": )" + std::to_string(gpus) +
         R"(, "gpu": "H100-SXM5-80GB"}, "host": {"python": false}, "model": {"transformer":
         {"layers": 2, "hidden": 256, "heads": 4, "ffn_hidden": 512, "seq_len": 64, "vocab": 1000,
         "mlp": "swiglu", "norm": "rmsnorm", "position": "rope")" +
         mtp + R"(}}, "training": {"global_batch": 4, "precision": "bf16", "steps": 1},
         "strategy": {)" +
         strategy + "}}";
}

using csim::test::error_of;
using csim::test::layer;

}  // namespace

TEST_CASE("DeepSeek-V3 with one MTP depth: 682,636,487,424 parameters, 38,240,398,080 active",
          "[mtp][hf_config]") {
  // Without MTP (tests/test_mla.cpp derives both): 671,026,419,200 total, 37,552,297,472 active.
  const Scenario off = deepseek_v3("");
  CHECK(off.model.total_params() == 671'026'419'200LL);
  CHECK(off.model.active_params() == 37'552'297'472LL);
  CHECK(mtp_params(off.model).total == 0);
  const Scenario zero = deepseek_v3(R"(, "mtp_layers": 0)");
  CHECK(zero.model.layers.size() == off.model.layers.size());
  // One depth (h 7168): enorm + hnorm 2 x 7,168 = 14,336; eh_proj 2 x 7168 x 7168 =
  // 102,760,448; the block, shaped as block 60 (MLA + MoE, the checkpoint's model.layers.61):
  // MLA with its ln_1 and ln_2 187,121,664 + MoE MLP 11,320,164,608 = 11,507,286,272; its final
  // norm (shared_head.norm) 7,168. Sum 14,336 + 102,760,448 + 11,507,286,272 + 7,168 =
  // 11,610,068,224. Shared with the main model, counted there once: the token embedding (the
  // depth's lookup) and the output head (its logits) -- the checkpoint stores its own copies,
  // 2 x 129,280 x 7,168 = 1,853,358,080 more: 13,463,426,304, the report's "14B".
  // Total 671,026,419,200 + 11,610,068,224 = 682,636,487,424.
  // Active: the depth's 248 unrouted experts x 44,040,192 = 10,921,967,616 inactive:
  // 11,610,068,224 - 10,921,967,616 = 688,100,608; 37,552,297,472 + 688,100,608 = 38,240,398,080.
  const Scenario on = deepseek_v3(R"(, "mtp_layers": 1)");
  CHECK(mtp_params(on.model).total == 11'610'068'224LL);
  CHECK(mtp_params(on.model).active == 688'100'608LL);
  CHECK(on.model.total_params() == 682'636'487'424LL);
  CHECK(on.model.active_params() == 38'240'398'080LL);
  CHECK(layer(on.model, "mtp.0.eh_proj").params == 2LL * 7168 * 7168);
  CHECK(layer(on.model, "mtp.0.embed").params == 0);
  CHECK(layer(on.model, "mtp.0.lm_head").params == 0);
  // The depth's block is an MoE block with MLA, numbered after the main model's 61.
  CHECK(layer(on.model, "mtp.0.attn.q_down").block == 61);
  CHECK(layer(on.model, "mtp.0.mlp.experts.fc").expert_role == ExpertRole::kFirst);
  CHECK(layer(on.model, "mtp.0.mlp.experts.fc").params ==
        layer(on.model, "h.60.mlp.experts.fc").params);
}

TEST_CASE("An MTP depth's layers follow the final norm, the main LM head stays last", "[mtp]") {
  const Scenario s = parse_scenario_string(tiny(R"(, "mtp_layers": 2)"), "mtp.json");
  const ModelSpec& m = s.model;
  CHECK(static_cast<std::int64_t>(m.layers.size()) ==
        transformer_layer_count(m.transformer_config));
  std::size_t ln_f = 0;
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].name == "ln_f") ln_f = i;
  // Depth 0 right after ln_f: embed, enorm, hnorm, concat, eh_proj, then its block's ln_1.
  CHECK(m.layers[ln_f + 1].name == "mtp.0.embed");
  CHECK(m.layers[ln_f + 2].name == "mtp.0.enorm");
  CHECK(m.layers[ln_f + 3].name == "mtp.0.hnorm");
  CHECK(m.layers[ln_f + 4].name == "mtp.0.concat");
  CHECK(m.layers[ln_f + 5].name == "mtp.0.eh_proj");
  CHECK(m.layers[ln_f + 6].name == "mtp.0.ln_1");
  CHECK(m.layers.back().name == "lm_head");
  CHECK(m.layers[m.layers.size() - 2].name == "mtp.1.loss");
  // Blocks 2 and 3 (after the main model's 0 and 1); the lookup, head and loss outside them.
  CHECK(layer(m, "mtp.0.eh_proj").block == 2);
  CHECK(layer(m, "mtp.0.ln_f").block == 2);
  CHECK(layer(m, "mtp.1.mlp.fc").block == 3);
  CHECK(layer(m, "mtp.1.embed").block == -1);
  CHECK(layer(m, "mtp.1.lm_head").block == -1);
  CHECK(layer(m, "mtp.1.loss").block == -1);
  // h 256: params per depth enorm + hnorm + ln_f 3 x 256, eh_proj 2 x 256 x 256 = 131,072, the
  // block 4 x 256 x 256 (q, k, v, o) + 3 x 256 x 512 (SwiGLU) + 2 x 256 (norms) = 262,144 +
  // 393,216 + 512 = 655,872: 768 + 131,072 + 655,872 = 787,712; two depths 1,575,424.
  CHECK(mtp_params(m).total == 1'575'424);
  const Scenario off = parse_scenario_string(tiny(""), "off.json");
  CHECK(m.total_params() - off.model.total_params() == 1'575'424);
  // The loss layer hands on the main hidden state (e s h = 2 x 64 x 256 bytes), which the main
  // LM head reads: its tensor-parallel input is that, not the logits.
  CHECK(layer(m, "mtp.1.loss").output_bytes_per_sample == 2.0 * 64 * 256);
  CHECK(layer(m, "mtp.1.loss").activation_bytes_per_sample == 2.0 * 64 * 1000);
}

TEST_CASE("MTP FLOPs: one more block, eh_proj and LM head per depth", "[mtp]") {
  const Scenario on = parse_scenario_string(tiny(R"(, "mtp_layers": 1)"), "mtp.json");
  const Scenario off = parse_scenario_string(tiny(""), "off.json");
  // Per sample, forward, s 64, h 256, a = g = 4, d 64, f 512, V 1000:
  //   block: q, k, v 2 s h (a + 2g) d = 2 x 64 x 256 x 768 = 25,165,824; o 2 s a d h =
  //          8,388,608; SwiGLU 3 x 2 s h f = 50,331,648; attention 2 x (2 a d) x s^2/2 =
  //          2 x 512 x 2,048 = 2,097,152: 85,983,232
  //   eh_proj 2 s (2h) h = 16,777,216;  LM head 2 s h V = 32,768,000
  //   depth = 85,983,232 + 16,777,216 + 32,768,000 = 135,528,448
  const TransformerForwardFlops f = transformer_forward_flops(on.model.transformer_config);
  const TransformerForwardFlops f0 = transformer_forward_flops(off.model.transformer_config);
  CHECK(f.mtp == Approx(135'528'448.0).epsilon(1e-12));
  CHECK(f.blocks + f.logits - f0.blocks - f0.logits == Approx(135'528'448.0).epsilon(1e-12));
  CHECK(f0.mtp == 0);
  // The MFU numerator (Megatron counts MTP in num_floating_point_operations): 3 B x depth =
  // 3 x 4 x 135,528,448 = 1,626,341,376 more per step.
  CHECK(model_flops_per_step(on) - model_flops_per_step(off) ==
        Approx(1'626'341'376.0).epsilon(1e-9));
  CHECK(layer(on.model, "mtp.0.eh_proj").fwd_flops_per_sample == 16'777'216.0);
  CHECK(layer(on.model, "mtp.0.lm_head").fwd_flops_per_sample == 32'768'000.0);
  // Megatron's per-token count adds per depth one layer of the last kind, 6 [h (a d + 2 g d) +
  // a d h + (2 a d) s / 2 + 3 h f] = 6 (196,608 + 65,536 + 16,384 + 393,216) = 4,030,464; its
  // norms and eh_proj 6 (3h + 2h^2) = 6 x 131,840 = 791,040; one more head 6 h V = 1,536,000:
  // 6,357,504.
  CHECK(transformer_flops_per_token(on.model).megatron -
            transformer_flops_per_token(off.model).megatron ==
        Approx(6'357'504.0).epsilon(1e-9));
}

TEST_CASE("Under pp 2 the last stage holds the MTP depth", "[mtp][lowering]") {
  const std::string pp = R"("kind": "pipeline", "pp": 2, "micro_batch_size": 1)";
  const Scenario on = parse_scenario_string(tiny(R"(, "mtp_layers": 1)", pp, 2), "mtp.json");
  const Scenario off = parse_scenario_string(tiny("", pp, 2), "off.json");
  const auto segs = partition_layers(on.model, 2, on.strategy.parallel.segment_blocks);
  const auto segs0 = partition_layers(off.model, 2, off.strategy.parallel.segment_blocks);
  // Stage 0 unchanged (embed + block 0); stage 1 gains every mtp.* layer.
  CHECK(segs[0].end == segs0[0].end);
  for (int i = 0; i < segs[0].end; ++i) CHECK_FALSE(is_mtp_layer(on.model.layers[i]));
  CHECK(segs[1].end == static_cast<int>(on.model.layers.size()));
  // The last stage's parameters grow by the depth's 787,712 (see above); the first's do not.
  CHECK(max_stage_params(on.model, on.strategy.parallel) -
            max_stage_params(off.model, off.strategy.parallel) ==
        787'712);
  // Simulated: GPU 1's parameter memory grows by the depth's bf16 weights, GPU 0's not.
  auto params_peak = [](const Scenario& s) {
    const Program p = lower(s);
    REQUIRE(validate_program(p).empty());
    sim::SimExecutor ex(s);
    const ExecutionResult r = ex.run(p, RunControl{});
    REQUIRE(r.complete);
    const MemoryReport rep = memory_timeline(p, r.timings, s.cluster);
    std::map<int, Bytes> peak;
    for (const GpuMemory& g : rep.gpus)
      for (const MemorySample& smp : g.samples)
        peak[g.gpu] =
            std::max(peak[g.gpu], smp.by_category[static_cast<std::size_t>(MemCategory::kParams)]);
    return peak;
  };
  const auto a = params_peak(on), b = params_peak(off);
  CHECK(a.at(0) == b.at(0));
  CHECK(a.at(1) - b.at(1) == 2 * 787'712);  // bf16: 2 bytes per parameter
}

TEST_CASE("MTP bad inputs name model.*.mtp_layers", "[mtp]") {
  InputError e = error_of([] { parse_scenario_string(tiny(R"(, "mtp_layers": -1)"), "bad.json"); });
  CHECK(e.json_path() == "model.transformer.mtp_layers");
  e = error_of([] { parse_scenario_string(tiny(R"(, "mtp_layers": 65)"), "bad.json"); });
  CHECK(e.json_path() == "model.transformer.mtp_layers");
  e = error_of([] { (void)deepseek_v3(R"(, "mtp_layers": -2)"); });
  CHECK(e.json_path() == "model.mtp_layers");
}
