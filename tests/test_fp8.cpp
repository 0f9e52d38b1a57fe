// FP8 training (docs/fp8.md): the recipe x GPU support matrix, the FP8 GEMMs' speed-up bounded by
// their share of the step, the FP8 weight copies and scaling state in memory, the saved
// activations, and the cast / amax kernels in the Program and the trace. Every expected value is
// derived in the comment before its check.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "backends/sim/sim_executor.hpp"
#include "core/cost/compute_cost.hpp"
#include "core/error.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/hardware/gpu_catalog_modern.hpp"
#include "core/lowering/lowering.hpp"
#include "core/model/fp8_recipe.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "run/run.hpp"
#include "run/scenario_loader.hpp"
#include "test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// A small GPT (2 blocks: 4 FP8 GEMM layers each = 8) on one GPU, no Python (GPU-bound), Adam.
std::string gpt_scenario(const std::string& gpu, const std::string& training,
                         const std::string& strategy = R"({"kind": "single"})", int gpus = 1) {
  return R"({"cluster": {"nodes": 1, "gpus_per_node": )" + std::to_string(gpus) + R"(, "gpu": ")" +
         gpu +
         R"("}, "host": {"python": false},
    "model": {"gpt": {"layers": 2, "hidden": 2048, "heads": 16, "seq_len": 2048, "vocab": 32768}},
    "training": )" +
         training + R"(, "strategy": )" + strategy + "}";
}

// accumulation 0: training.gradient_accumulation not given (the parallel kinds derive it).
std::string fp8_training(const std::string& recipe, const std::string& extra = "", int batch = 4,
                         int accumulation = 0) {
  const std::string ga =
      accumulation > 0 ? R"(, "gradient_accumulation": )" + std::to_string(accumulation) : "";
  return R"({"global_batch": )" + std::to_string(batch) + ga +
         R"(, "steps": 2, "precision": "fp8", "fp8": {"recipe": ")" + recipe + "\"" + extra + "}}";
}

std::string bf16_training(int batch = 4) {
  return R"({"global_batch": )" + std::to_string(batch) + R"(, "steps": 2, "precision": "bf16"})";
}

Scenario parse(const std::string& json) {
  return parse_scenario_string(json, "test.json");
}

struct Run {
  Scenario s;
  Program p;
  ExecutionResult r;
};

Run simulate(const std::string& json) {
  Run run{parse(json), {}, {}};
  run.p = lower(run.s);
  REQUIRE(validate_program(run.p).empty());
  sim::SimExecutor ex(run.s);
  run.r = ex.run(run.p, RunControl{});
  REQUIRE(run.r.complete);
  return run;
}

// Step 2's duration: the end of its loss.item() minus the end of step 1's (the host waits for
// each step's GPU work there).
TimeNs step2_ns(const Run& run) {
  TimeNs ends[3] = {0, 0, 0};
  for (const Op& op : run.p.ops) {
    if (run.p.name_of(op) != "loss.item()" || op.step < 1 || op.step > 2) continue;
    ends[op.step] = std::max(ends[op.step], run.r.timings[static_cast<std::size_t>(op.id)].end_ns);
  }
  return ends[2] - ends[1];
}

int count_ops(const Program& p, const std::string& suffix, int step) {
  int n = 0;
  for (const Op& op : p.ops) {
    const std::string& name = p.name_of(op);
    if (op.step != step || name.size() < suffix.size()) continue;
    n += name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  return n;
}

const Op* find_op(const Program& p, const std::string& name) {
  for (const Op& op : p.ops)
    if (p.name_of(op) == name) return &op;
  return nullptr;
}

Bytes peak_of(const Run& run, MemCategory cat) {
  const MemoryReport rep = memory_timeline(run.p, run.r.timings, run.s.cluster);
  Bytes peak = 0;
  for (const GpuMemory& g : rep.gpus)
    for (const MemorySample& smp : g.samples)
      peak = std::max(peak, smp.by_category[static_cast<std::size_t>(cat)]);
  return peak;
}

std::int64_t fp8_params(const Scenario& s) {
  std::int64_t n = 0;
  for (const LayerSpec& l : s.model.layers) n += runs_in_fp8(l, s.training) ? l.params : 0;
  return n;
}

}  // namespace

// [SECTION] Support matrix ------------------------------------------------------------------------

TEST_CASE("fp8: recipe x GPU support matrix as Transformer Engine's, refusals name the need",
          "[fp8]") {
  // TE (docs/fp8.md, "Support matrix"): per-tensor delayed/current scaling and torchao rowwise
  // need cc >= 8.9 (L40S, Hopper, Blackwell); block scaling cc >= 9.0; MXFP8 / NVFP4 cc 10.x.
  struct Gpu {
    const char* name;
    int cc;
  };
  const Gpu gpus[] = {{"V100-SXM2-16GB", 70}, {"A100-SXM4-80GB", 80}, {"L40S-48GB", 89},
                      {"H100-PCIe-80GB", 90}, {"H100-SXM5-80GB", 90}, {"H800-SXM5-80GB", 90},
                      {"H200-SXM-141GB", 90}, {"B200-180GB", 100},    {"GB200-186GB", 100}};
  const std::map<std::string, std::pair<int, int>> range = {
      {"delayed", {89, 1000}},    {"current", {89, 1000}}, {"rowwise", {89, 1000}},
      {"tensorwise", {89, 1000}}, {"block", {90, 1000}},   {"mxfp8", {100, 109}},
      {"nvfp4", {100, 109}}};
  for (const Gpu& g : gpus) {
    for (const auto& [recipe, cc] : range) {
      INFO(g.name << " " << recipe);
      const std::string json = gpt_scenario(g.name, fp8_training(recipe));
      const bool ok = g.cc >= cc.first && g.cc <= cc.second;
      if (ok) {
        CHECK_NOTHROW(parse(json));
        continue;
      }
      try {
        parse(json);
        FAIL("accepted");
      } catch (const InputError& e) {
        // The refusal is the recipe's, at its key, naming the GPU's compute capability.
        CHECK(e.json_path() == "training.fp8.recipe");
        CHECK(e.message().find(std::string(g.name) + " has ") != std::string::npos);
        CHECK(e.message().find(" needs compute capability ") != std::string::npos);
      }
    }
  }
  // The exact lines (the GPU, the recipe and the compute capability it needs):
  auto message = [](const std::string& gpu, const std::string& training) {
    try {
      parse(gpt_scenario(gpu, training));
    } catch (const InputError& e) {
      return e.json_path() + ": " + e.message();
    }
    return std::string("accepted");
  };
  CHECK(message("A100-SXM4-80GB", fp8_training("delayed")) ==
        "training.fp8.recipe: delayed scaling needs compute capability 8.9 or newer; "
        "A100-SXM4-80GB has 8.0");
  // Without a training.fp8 object the default recipe (delayed) is blamed on the precision.
  CHECK(message("A100-SXM4-80GB", R"({"global_batch": 4, "precision": "fp8"})") ==
        "training.precision: delayed scaling needs compute capability 8.9 or newer; "
        "A100-SXM4-80GB has 8.0");
  CHECK(message("L40S-48GB", fp8_training("block")) ==
        "training.fp8.recipe: block scaling (1x128 activations, 128x128 weights) needs compute "
        "capability 9.0 or newer (Hopper or later); L40S-48GB has 8.9");
  CHECK(message("H100-SXM5-80GB", fp8_training("mxfp8")) ==
        "training.fp8.recipe: MXFP8 block scaling needs compute capability 10.x (Blackwell "
        "datacenter: B200, GB200); H100-SXM5-80GB has 9.0");
  CHECK(message("H200-SXM-141GB", fp8_training("nvfp4")) ==
        "training.fp8.recipe: NVFP4 block scaling needs compute capability 10.x (Blackwell "
        "datacenter: B200, GB200); H200-SXM-141GB has 9.0");
  // FP8 attention is cuDNN's fused FP8 attention: Hopper or later.
  CHECK(message("L40S-48GB", fp8_training("delayed", R"(, "attention": true)")) ==
        "training.fp8.attention: FP8 attention (cuDNN fused FP8 attention) needs compute "
        "capability 9.0 or newer; L40S-48GB has 8.9");
  CHECK(message("H100-SXM5-80GB", fp8_training("delayed", R"(, "attention": true)")) == "accepted");
}

TEST_CASE("fp8: an inline GPU without an FP8 peak, and fp8_all_gather without sharding, refused",
          "[fp8]") {
  const std::string no_peak = R"({"cluster": {"gpu": {"base": "H100-SXM5-80GB",
      "peak_fp8_tflops": 0}}, "model": {"gpt": {"layers": 1, "hidden": 64, "heads": 2,
      "seq_len": 16, "vocab": 100}}, "training": {"global_batch": 2, "precision": "fp8"}})";
  try {
    parse(no_peak);
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.json_path() == "training.precision");
    CHECK(e.message() == "fp8 is not supported by H100-SXM5-80GB (no fp8 peak in its figures)");
  }
  // fp8_all_gather needs sharded parameters: refused under DDP, accepted under FSDP.
  const std::string ag = R"(, "fp8_all_gather": true)";
  try {
    parse(gpt_scenario("H100", fp8_training("delayed", ag, 8), R"({"kind": "ddp"})", 8));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.json_path() == "training.fp8.fp8_all_gather");
    CHECK(e.message().find("needs sharded parameters") != std::string::npos);
  }
  const Scenario fsdp8 =
      parse(gpt_scenario("H100", fp8_training("delayed", ag, 8), R"({"kind": "fsdp"})", 8));
  const Scenario fsdp16 =
      parse(gpt_scenario("H100", fp8_training("delayed", "", 8), R"({"kind": "fsdp"})", 8));
  // FSDP's per-block all-gathers of step 2's forward on GPU 0 move every parameter once:
  // 2 B x P as stored; with fp8_all_gather the FP8 layers' P8 parameters at 1 B: 2P - P8.
  const auto forward_gathers = [](const Program& p) {
    Bytes sum = 0;
    for (const Op& op : p.ops)
      if (op.kind == OpKind::kCollective && op.collective == CollectiveKind::kAllGather &&
          op.step == 2 && op.gpu == 0 && op.phase == Phase::kForward)
        sum += op.bytes;
    return sum;
  };
  const Bytes with = forward_gathers(lower(fsdp8)), without = forward_gathers(lower(fsdp16));
  CHECK(without == 2 * fsdp16.model.total_params());
  CHECK(with == without - fp8_params(fsdp8));
  // The byte count the FSDP2 lowering uses (docs/fp8.md, "FP8 all-gather"): 1 B/param for the
  // per-tensor recipes instead of the 2 B of bf16 weights; MXFP8 adds its 1/32 B scales.
  Fp8Spec f;
  CHECK(fp8_all_gather_bytes(1000, f, 2) == 2000);  // off: the weights as stored
  f.fp8_all_gather = true;
  CHECK(fp8_all_gather_bytes(1000, f, 2) == 1000);
  f.recipe = Fp8Recipe::kMxfp8;
  CHECK(fp8_all_gather_bytes(3200, f, 2) == 3300);  // 3200 x (1 + 1/32)
}

// [SECTION] Speed ---------------------------------------------------------------------------------

TEST_CASE("fp8: a GPT step on one H100 is faster than bf16 and slower than 2x", "[fp8]") {
  const Run bf16 = simulate(gpt_scenario("H100", bf16_training()));
  const Run fp8 = simulate(gpt_scenario("H100", fp8_training("delayed")));
  const TimeNs t_bf16 = step2_ns(bf16), t_fp8 = step2_ns(fp8);
  // G = the bf16 step's time in the GEMMs that run FP8 under precision fp8 (the block linear
  // layers, forward and backward). An FP8 GEMM runs at most r = (1979 x 0.700) / (989.5 x 0.62)
  // = 2.1645x the bf16 rate (H100's fitted FP8 tile efficiency, gpu_catalog.cpp, against the bf16
  // gemm curve's, docs/cost-model.md, "GEMM shape"; the tiles' bf16 output stores do not shrink and
  // the memory floor at most halves, so no GEMM gains more), the casts add time, everything else is
  // unchanged:
  //   t_fp8 >= t_bf16 - G + G / r.
  // 2x would need G (1 - 1/r) >= t_bf16 / 2, i.e. G >= 0.929 t_bf16: the LM head, the attention
  // core, the norms and the casts take more than 7.1 % of this step, so it stays below 2x.
  TimeNs g = 0;
  for (const Op& op : bf16.p.ops) {
    if (op.kind != OpKind::kCompute || op.step != 2 || op.compute_kind != ComputeKind::kGemm)
      continue;
    const LayerSpec* l = nullptr;
    for (const LayerSpec& x : bf16.s.model.layers)
      if (bf16.p.name_of(op) == x.name + ".fwd" || bf16.p.name_of(op) == x.name + ".bwd") l = &x;
    if (l != nullptr && runs_in_fp8(*l, fp8.s.training)) {
      const OpTiming& t = bf16.r.timings[static_cast<std::size_t>(op.id)];
      g += t.end_ns - t.start_ns;
    }
  }
  INFO("bf16 " << t_bf16 << " ns, fp8 " << t_fp8 << " ns, FP8-able GEMMs " << g << " ns");
  REQUIRE(g > 0);
  CHECK(g < t_bf16);
  CHECK(t_fp8 < t_bf16);
  CHECK(static_cast<double>(t_fp8) >=
        static_cast<double>(t_bf16 - g) + static_cast<double>(g) / (1979 * 0.700 / (989.5 * 0.62)));
  CHECK(2 * t_fp8 > t_bf16);
  // The FP8 GEMMs carry dtype fp8; the LM head and the attention core stay bf16.
  const Op* qkv = find_op(fp8.p, "h.0.attn.qkv.fwd");
  const Op* head = find_op(fp8.p, "lm_head.fwd");
  const Op* scores = find_op(fp8.p, "h.0.attn.scores.fwd");
  REQUIRE(qkv);
  REQUIRE(head);
  REQUIRE(scores);
  CHECK(qkv->dtype == Dtype::kFp8);
  CHECK(head->dtype == Dtype::kBf16);
  CHECK(scores->dtype == Dtype::kBf16);
  // lm_head: true puts the LM head in FP8 too.
  const Scenario with_head =
      parse(gpt_scenario("H100", fp8_training("delayed", R"(, "lm_head": true)")));
  const Program ph = lower(with_head);
  CHECK(find_op(ph, "lm_head.fwd")->dtype == Dtype::kFp8);
}

TEST_CASE("fp8: H100's FP8 GEMM curve is the fitted 0.700, the prior bf16 x 1.75/2 elsewhere",
          "[fp8]") {
  const GpuSpec& h = find_gpu("h100")->gpu;
  const EfficiencyCurve& gemm = h.efficiency[static_cast<int>(ComputeKind::kGemm)];
  // Fitted on mbridge2509_llama3_8b_h100_8gpu (docs/accuracy.md): 0.700, same half_flops (2e9,
  // scaled x2 for fp8 by compute_cost). The prior, kept for the GPUs without a fit (L40S):
  // 0.62 x 1.75 / 2 = 0.5425 from H100's gemm curve.
  CHECK(h.fp8_gemm_efficiency.max_efficiency == Approx(0.700));
  CHECK(find_gpu("h200")->gpu.fp8_gemm_efficiency.max_efficiency == Approx(0.700));
  CHECK(fp8_gemm_prior(gemm).max_efficiency == Approx(0.5425));
  CHECK(h.fp8_gemm_efficiency.half_flops == gemm.half_flops);
  // A 1 TFLOP GEMM: bf16 1e12 / (989.5e12 x 0.62 x 1e12/(1e12+2e9)) + 1.2 us; the FP8 peak is
  // not part of peak_max, so this is the figure without it (docs/fp8.md, "FP8 GEMM efficiency").
  const double f = 1e12;
  GpuSpec no_fp8 = h;
  no_fp8.peak_fp8_flops_per_s = 0;
  CHECK(compute_duration_ns(h, ComputeKind::kGemm, Dtype::kBf16, f, 0) ==
        compute_duration_ns(no_fp8, ComputeKind::kGemm, Dtype::kBf16, f, 0));
  // fp8: 1e12 / (1979e12 x 0.700 x 1e12/(1e12+4e9)) + 1.2 us
  const double eff = h.fp8_gemm_efficiency.max_efficiency * f / (f + 4e9);
  const double fp8_s = f / (1979e12 * eff);
  CHECK(compute_duration_ns(h, ComputeKind::kGemm, Dtype::kFp8, f, 0) ==
        round_to_ns(fp8_s) + h.kernel_overhead_ns);
}

// [SECTION] Memory --------------------------------------------------------------------------------

TEST_CASE("fp8: memory grows by the FP8 weight copies and the scaling state, inputs saved in FP8",
          "[fp8]") {
  const Run bf16 = simulate(gpt_scenario("H100", bf16_training()));
  const Run fp8 = simulate(gpt_scenario("H100", fp8_training("delayed")));
  // Parameters: bf16 weights 2 B/param in both; delayed scaling caches an FP8 copy and its
  // transpose of every FP8 GEMM weight: 2 copies x 1 B/param.
  const std::int64_t p8 = fp8_params(fp8.s);
  // Per block: qkv 3h^2+3h, proj h^2+h, fc 4h^2+4h, proj 4h^2+h (h = 2048): 12h^2 + 9h.
  const std::int64_t h = 2048;
  CHECK(p8 == 2 * (12 * h * h + 9 * h));
  CHECK(peak_of(fp8, MemCategory::kParams) == peak_of(bf16, MemCategory::kParams) + 2 * p8);
  // Scaling state: 8 FP8 GEMMs x 3 tensors x (1024 amax x 4 B + scale + scale_inv) = 8 x 12,312.
  CHECK(peak_of(fp8, MemCategory::kBuffers) == peak_of(bf16, MemCategory::kBuffers) + 8 * 12312);
  // Saved activations: the FP8 GEMMs keep their input's FP8 copy, 1 B instead of 2 per element
  // (qkv saves its input, s x h elements: 2 B x 2048 x 2048 in bf16).
  const auto saved = [](const Scenario& s, const std::string& name) {
    for (const LayerSpec& l : s.model.layers)
      if (l.name == name) return l.activation_bytes_per_sample;
    return -1.0;
  };
  CHECK(saved(bf16.s, "h.0.attn.qkv") == Approx(2.0 * 2048 * 2048));
  CHECK(saved(fp8.s, "h.0.attn.qkv") == Approx(2048.0 * 2048));
  CHECK(saved(fp8.s, "h.0.ln_1") == saved(bf16.s, "h.0.ln_1"));  // bf16 layers unchanged
  // torchao rowwise keeps no FP8 weight copy (recast every forward and backward) and no state.
  const Run rw = simulate(gpt_scenario("H100", fp8_training("rowwise")));
  CHECK(peak_of(rw, MemCategory::kParams) == peak_of(bf16, MemCategory::kParams));
  CHECK(peak_of(rw, MemCategory::kBuffers) == peak_of(bf16, MemCategory::kBuffers));
  // torchao saves the bf16 input (save_for_backward(input_hp, weight_hp_t)): no saving on
  // activations, unlike TE's FP8 columnwise copy above.
  const Run tw = simulate(gpt_scenario("H100", fp8_training("tensorwise")));
  CHECK(saved(tw.s, "h.0.attn.qkv") == saved(bf16.s, "h.0.attn.qkv"));
}

// [SECTION] Kernels -------------------------------------------------------------------------------

TEST_CASE("fp8: cast and amax kernels per recipe, weight casts per step or per micro-batch",
          "[fp8]") {
  // 8 FP8 GEMM layers, 2 micro-batches per step (gradient_accumulation 2, batch 4).
  {
    // Delayed (TE): the weight cast on the step's first micro-batch only (TE's weight caching:
    // 8 per step), one input cast per GEMM and micro-batch (16), one gradient cast (16), the amax
    // taken by the cast (no amax pass), one amax history update per step.
    const Program p = lower(parse(gpt_scenario("H100", fp8_training("delayed", "", 4, 2))));
    for (int step : {1, 2}) {
      CHECK(count_ops(p, ".fp8_cast_weight", step) == 8);
      CHECK(count_ops(p, ".fp8_cast_input", step) == 16);
      CHECK(count_ops(p, ".fp8_cast_grad", step) == 16);
      CHECK(count_ops(p, ".fp8_amax_input", step) == 0);
      CHECK(count_ops(p, "fp8 amax history update", step) == 1);
    }
    // qkv's input cast: n = s x h = 4,194,304 elements per sample x 2 samples; reads 2 B, writes
    // the FP8 copy and its transpose (2 x 1 B): n x 4 B.
    const Op* c = find_op(p, "h.0.attn.qkv.fp8_cast_input");
    REQUIRE(c);
    CHECK(c->bytes == 2LL * 2048 * 2048 * 4);
    CHECK(c->compute_kind == ComputeKind::kElementwise);
    // The history update streams 8 GEMMs' state in and out: 2 x 8 x 12,312 B.
    CHECK(find_op(p, "fp8 amax history update")->bytes == 2 * 8 * 12312);
  }
  {
    // Current scaling: an amax pass before every input and gradient cast, no history.
    const Program p = lower(parse(gpt_scenario("H100", fp8_training("current", "", 4, 2))));
    CHECK(count_ops(p, ".fp8_amax_input", 2) == 16);
    CHECK(count_ops(p, ".fp8_amax_grad", 2) == 16);
    CHECK(count_ops(p, "fp8 amax history update", 2) == 0);
    // The amax pass reads the bf16 input once: n x 2 B.
    CHECK(find_op(p, "h.0.attn.qkv.fp8_amax_input")->bytes == 2LL * 2048 * 2048 * 2);
  }
  {
    // torchao rowwise: the weight recast in every forward (16) and every backward (16).
    const Program p = lower(parse(gpt_scenario("H100", fp8_training("rowwise", "", 4, 2))));
    CHECK(count_ops(p, ".fp8_cast_weight", 2) == 32);
  }
  {
    // torchao tensorwise (float8_linear.py, matmul_with_hp_or_float8_args): every forward casts
    // the weight and the input, each after an amax pass (16 + 16); every backward casts the
    // gradient, the weight again, the gradient and the saved bf16 input along the other
    // dimension (16 each, each after an amax pass), and transposes the weight's, the dim-1
    // gradient's and the dim-1 input's FP8 copies for torch._scaled_mm (16 each).
    const Program p = lower(parse(gpt_scenario("H100", fp8_training("tensorwise", "", 4, 2))));
    CHECK(count_ops(p, ".fp8_cast_weight", 2) == 32);
    CHECK(count_ops(p, ".fp8_amax_weight", 2) == 32);
    CHECK(count_ops(p, ".fp8_amax_input", 2) == 16);
    CHECK(count_ops(p, ".fp8_amax_input_dim1", 2) == 16);
    CHECK(count_ops(p, ".fp8_cast_grad", 2) == 16);
    CHECK(count_ops(p, ".fp8_cast_grad_dim1", 2) == 16);
    CHECK(count_ops(p, ".fp8_amax_grad_dim1", 2) == 16);
    for (const char* t :
         {".fp8_transpose_weight", ".fp8_transpose_grad_dim1", ".fp8_transpose_input_dim1"})
      CHECK(count_ops(p, t, 2) == 16);
    CHECK(count_ops(p, "fp8 amax history update", 2) == 0);
    // qkv's dim-1 input cast from the saved bf16 input: n = 2 x s x h elements read at 2 B and
    // written once at 1 B: 3 n; its transposition reads and writes 1 B each: 2 n.
    const double n = 2.0 * 2048 * 2048;
    CHECK(find_op(p, "h.0.attn.qkv.fp8_cast_input_dim1")->bytes == static_cast<Bytes>(3 * n));
    CHECK(find_op(p, "h.0.attn.qkv.fp8_transpose_input_dim1")->bytes == static_cast<Bytes>(2 * n));
    // The forward input cast writes one copy (c = 1): 3 n.
    CHECK(find_op(p, "h.0.attn.qkv.fp8_cast_input")->bytes == static_cast<Bytes>(3 * n));
  }
  {
    // bf16: no FP8 op at all.
    const Program p = lower(parse(gpt_scenario("H100", bf16_training())));
    for (const Op& op : p.ops) CHECK(p.name_of(op).find("fp8") == std::string::npos);
  }
}

TEST_CASE("fp8: tensor and pipeline parallel GPT on 8 H100 runs FP8 per rank, faster than bf16",
          "[fp8]") {
  // 3D: dp 2 x tp 2 x pp 2; each rank casts its own (TP-sharded) share.
  const std::string st = R"({"kind": "3d", "dp": 2, "tp": 2, "pp": 2, "micro_batch_size": 1})";
  const Run bf16 = simulate(gpt_scenario("H100", bf16_training(8), st, 8));
  const Run fp8 = simulate(gpt_scenario("H100", fp8_training("delayed", "", 8), st, 8));
  int casts = 0, fp8_gemms = 0;
  for (const Op& op : fp8.p.ops) {
    casts += fp8.p.name_of(op).find(".fp8_cast_input") != std::string::npos;
    fp8_gemms += op.kind == OpKind::kCompute && op.dtype == Dtype::kFp8;
  }
  CHECK(casts > 0);
  CHECK(fp8_gemms > 0);
  TimeNs end_bf16 = 0, end_fp8 = 0;
  for (const OpTiming& t : bf16.r.timings) end_bf16 = std::max(end_bf16, t.end_ns);
  for (const OpTiming& t : fp8.r.timings) end_fp8 = std::max(end_fp8, t.end_ns);
  CHECK(end_fp8 < end_bf16);
  CHECK(2 * end_fp8 > end_bf16);
}

TEST_CASE("fp8: the bundled gpt_fp8_8xh100 scenario's trace has the cast and amax kernels",
          "[fp8][scenarios]") {
  const Scenario s = run::load_scenario(test::scenario_path("gpt_fp8_8xh100.json"));
  CHECK(s.warnings.empty());
  run::RunRequest rq;
  rq.scenario = &s;
  const run::RunResult rr = run::run(rq);
  bool cast = false, grad = false, history = false, weight = false;
  for (const prof::TraceEvent& e : rr.trace.events) {
    cast = cast || e.name == "h.0.attn.qkv.fp8_cast_input";
    grad = grad || e.name == "h.0.mlp.fc.fp8_cast_grad";
    weight = weight || e.name == "h.23.mlp.proj.fp8_cast_weight";
    history = history || e.name == "fp8 amax history update";
  }
  CHECK(cast);
  CHECK(grad);
  CHECK(weight);
  CHECK(history);
}
