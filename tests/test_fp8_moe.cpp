// MoE in FP8 (core/model/fp8_moe.hpp; docs/fp8.md, "MoE in FP8"): DeepEP's FP8 dispatch with
// 1x128 scales (the combine in bf16), the experts' SwiGLU input cached in FP8, and their refusals.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/input_error_support.hpp"
#include "tests/layer_lookup.hpp"

using namespace csim;
using namespace csim::core;
using csim::test::error_of;
using csim::test::layer;

namespace {

// One node of 4 H100s: 4 blocks, h 256, s 64, 8 experts of 128, top 2; FP8 with `fp8` as
// training.fp8; 3d with `strategy`.
std::string tiny(const std::string& fp8, const std::string& strategy) {
  return R"({"cluster": {"gpus_per_node": 4, "gpu": "H100-SXM5-80GB"}, "model": {"transformer":
         {"layers": 4, "hidden": 256, "heads": 4, "ffn_hidden": 512, "seq_len": 64, "vocab": 1000,
         "mlp": "swiglu", "norm": "rmsnorm", "position": "rope", "moe": {"experts": 8, "top_k": 2,
         "expert_ffn_hidden": 128}}}, "training": {"global_batch": 16, "precision": "fp8",
         "fp8": )" +
         fp8 + R"(, "optimizer": "adam", "steps": 2}, "strategy": {"kind": "3d",
         "micro_batch_size": 1, )" +
         strategy + "}}";
}

const std::string kDeepEp = R"("dp": 4, "ep": 4, "moe_dispatcher": "deepep")";

// The first collective on GPU 0 whose name is `name`.
const Op* named(const Program& p, const std::string& name) {
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kCollective && op.gpu == 0 && p.name_of(op) == name) return &op;
  return nullptr;
}

}  // namespace

TEST_CASE("FP8 dispatch: the dispatch and the combine's gradient in FP8, the combine in bf16",
          "[ep][deepep][fp8]") {
  const Program bf = lower(parse_scenario_string(tiny(R"({"recipe": "block"})", kDeepEp), "a"));
  const Program f8 = lower(
      parse_scenario_string(tiny(R"({"recipe": "block", "moe_dispatch": true})", kDeepEp), "b"));
  REQUIRE(validate_program(f8).empty());
  // Per sample a rank's routed copies are s k h e = 64 x 2 x 256 x 2 = 65,536 bytes in bf16;
  // in FP8 with FP32 scales per 1x128 tile, 64 x 2 x 256 x (1 + 4/128) = 33,792.
  for (const char* name : {"ep deepep dispatch", "ep deepep combine", "ep deepep combine grad",
                           "ep deepep dispatch grad"}) {
    INFO(name);
    REQUIRE(named(bf, name) != nullptr);
    REQUIRE(named(f8, name) != nullptr);
    CHECK(named(bf, name)->bytes == 65'536);
  }
  CHECK(named(f8, "ep deepep dispatch")->bytes == 33'792);
  CHECK(named(f8, "ep deepep combine grad")->bytes == 33'792);
  CHECK(named(f8, "ep deepep combine")->bytes == 65'536);
  CHECK(named(f8, "ep deepep dispatch grad")->bytes == 65'536);
}

TEST_CASE("The experts' SwiGLU input cached in FP8", "[moe][fp8]") {
  const Scenario off = parse_scenario_string(tiny(R"({"recipe": "block"})", kDeepEp), "a");
  const Scenario on =
      parse_scenario_string(tiny(R"({"recipe": "block", "moe_act_input": true})", kDeepEp), "b");
  // t = s k = 128 copies, n = t f_e = 16,384 outputs. Off: 3 e n + 4 t = 98,304 + 512 = 98,816
  // (docs/transformer.md, "Where the routing weights are applied"). On: gate and up in FP8 with
  // 1x128 scales, 2 n (1 + 4/128) = 33,792, + the FP32 weights 4 t = 512: 34,304.
  CHECK(layer(off.model, "h.0.mlp.experts.swiglu").activation_bytes_per_sample == Approx(98'816.0));
  CHECK(layer(on.model, "h.0.mlp.experts.swiglu").activation_bytes_per_sample == Approx(34'304.0));
  // experts.proj saves its FP8 GEMM input either way (docs/fp8.md, "Memory"): unchanged.
  CHECK(layer(on.model, "h.0.mlp.experts.proj").activation_bytes_per_sample ==
        layer(off.model, "h.0.mlp.experts.proj").activation_bytes_per_sample);
}

TEST_CASE("FP8 dispatch: refused without 1x128 tiles, ignored under another dispatcher",
          "[ep][deepep][fp8]") {
  // The delayed recipe has no 1x128 tiles.
  InputError e = error_of([] {
    parse_scenario_string(tiny(R"({"recipe": "delayed", "moe_dispatch": true})", kDeepEp), "c");
  });
  CHECK(e.json_path() == "training.fp8.moe_dispatch");
  CHECK(e.message().find("1x128") != std::string::npos);
  // NCCL's all-to-all moves bf16 (Megatron-Core's dispatchers): the switch is ignored (a
  // warning), so an override of the dispatcher still runs; the dispatch keeps its 65,536 bytes.
  const Program a2a = lower(parse_scenario_string(
      tiny(R"({"recipe": "block", "moe_dispatch": true})", R"("dp": 4, "ep": 4)"), "d"));
  REQUIRE(named(a2a, "ep all_to_all dispatch") != nullptr);
  CHECK(named(a2a, "ep all_to_all dispatch")->bytes == 65'536);
}
