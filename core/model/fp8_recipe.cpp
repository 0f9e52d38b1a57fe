// FP8 training recipes (docs/fp8.md). The table below is Transformer Engine's support matrix
// and each recipe's quantisation layout; the byte functions are docs/fp8.md, "Memory" and
// "FP8 all-gather".
#include "core/model/fp8_recipe.hpp"

#include <cmath>

#include "core/error.hpp"

namespace csim::core {

namespace {

// docs/fp8.md, "Recipes" and "Support matrix". Columns: recipe, key, title, min cc, max cc,
// requirement, amax pass, amax history, data B/elem, scale B/elem, copies, weight cache, source.
const Fp8RecipeTraits kTraits[kNumFp8Recipes] = {
    {Fp8Recipe::kDelayed, "delayed", "delayed scaling", 89, 0, "compute capability 8.9 or newer",
     false, true, 1.0, 0.0, 2, true, false,
     "Transformer Engine DelayedScaling: per-tensor scale from an amax history, amax taken by "
     "the cast kernel; FP8 on sm_89+ (TE's FP8 support: Ada, Hopper, Blackwell)"},
    {Fp8Recipe::kCurrent, "current", "current (per-tensor) scaling", 89, 0,
     "compute capability 8.9 or newer", true, false, 1.0, 0.0, 2, true, false,
     "Transformer Engine Float8CurrentScaling: per-tensor scale from the tensor's own amax, an "
     "amax pass before each cast; sm_89+"},
    {Fp8Recipe::kBlock, "block", "block scaling (1x128 activations, 128x128 weights)", 90, 0,
     "compute capability 9.0 or newer (Hopper or later)", false, false, 1.0, 4.0 / 128.0, 2, true,
     false,
     "Transformer Engine Float8BlockScaling (DeepSeek-V3 technical report, section 3.3: 1x128 "
     "tiles for activations, 128x128 blocks for weights, an fp32 scale each, taken in the cast); "
     "cuBLAS 12.9 block-scaled FP8 on Hopper"},
    {Fp8Recipe::kMxfp8, "mxfp8", "MXFP8 block scaling", 100, 109,
     "compute capability 10.x (Blackwell datacenter: B200, GB200)", false, false, 1.0, 1.0 / 32.0,
     2, true, false,
     "Transformer Engine MXFP8BlockScaling (OCP Microscaling spec v1.0: an E8M0 scale per 32 "
     "elements, taken in the cast); Blackwell tensor cores (sm_100) only"},
    {Fp8Recipe::kNvfp4, "nvfp4", "NVFP4 block scaling", 100, 109,
     "compute capability 10.x (Blackwell datacenter: B200, GB200)", true, false, 0.5, 1.0 / 16.0, 2,
     true, false,
     "Transformer Engine NVFP4BlockScaling: 4-bit E2M1 data, an E4M3 scale per 16 elements and a "
     "per-tensor fp32 scale from a global amax pass; Blackwell (sm_100) only"},
    {Fp8Recipe::kRowwise, "rowwise", "torchao rowwise scaling", 89, 0,
     "compute capability 8.9 or newer (torch._scaled_mm rowwise kernels: sm_90, and sm_89 since "
     "PyTorch 2.6)",
     false, false, 1.0, 0.0, 1, false, true,
     "torchao float8 Float8LinearConfig.from_recipe_name('rowwise'): per-row scales (fp32 per "
     "row, negligible per element) taken in the cast; weights recast in every forward and "
     "backward (no cached FP8 copy)"},
    {Fp8Recipe::kTensorwise, "tensorwise", "torchao tensorwise scaling", 89, 0,
     "compute capability 8.9 or newer (torch._scaled_mm: sm_89+)", true, false, 1.0, 0.0, 1, false,
     true,
     "torchao float8 Float8LinearConfig() (recipe 'tensorwise', torchtitan's float8 default): a "
     "per-tensor scale from an amax pass (tensor_to_amax) before each cast; weights recast in "
     "every forward and backward; torch._scaled_mm on cuBLASLt, the GEMM TE's recipes use"},
};

std::string cc_text(int cc) {
  return std::to_string(cc / 10) + "." + std::to_string(cc % 10);
}

bool cc_in(int cc, int lo, int hi) {
  return cc >= lo && (hi == 0 || cc <= hi);
}

}  // namespace

const Fp8RecipeTraits& fp8_traits(Fp8Recipe r) {
  const int i = static_cast<int>(r);
  CSIM_ASSERT(i >= 0 && i < kNumFp8Recipes);
  CSIM_ASSERT(kTraits[i].recipe == r);
  return kTraits[i];
}

std::string fp8_recipe_refusal(Fp8Recipe r, const GpuSpec& gpu) {
  const Fp8RecipeTraits& tr = fp8_traits(r);
  if (cc_in(gpu.compute_capability, tr.min_cc, tr.max_cc)) return "";
  return std::string(tr.title) + " needs " + tr.needs + "; " + gpu.name + " has " +
         cc_text(gpu.compute_capability);
}

std::string fp8_attention_refusal(const GpuSpec& gpu) {
  if (gpu.compute_capability >= 90) return "";
  return "FP8 attention (cuDNN fused FP8 attention) needs compute capability 9.0 or newer; " +
         gpu.name + " has " + cc_text(gpu.compute_capability);
}

// docs/fp8.md, "What runs in FP8".
bool runs_in_fp8(const LayerSpec& l, const Fp8Spec& f) {
  if (l.kind == ComputeKind::kGemm && l.block >= 0) return true;
  if (l.kind == ComputeKind::kGemm && l.tp_role == TpRole::kVocabOutput) return f.lm_head;
  if (l.kind == ComputeKind::kAttention && l.block >= 0) return f.attention;
  return false;
}

bool runs_in_fp8(const LayerSpec& l, const TrainingSpec& t) {
  return t.precision == Precision::kFp8 && runs_in_fp8(l, t.fp8);
}

double fp8_quantized_bytes_per_elem(const Fp8RecipeTraits& tr) {
  return tr.data_bytes + tr.scale_bytes;
}

// docs/fp8.md, "Memory": params x copies x (data + scale).
Bytes fp8_weight_copy_bytes(std::int64_t params, const Fp8Spec& f) {
  const Fp8RecipeTraits& tr = fp8_traits(f.recipe);
  if (!tr.weight_cache) return 0;
  return static_cast<Bytes>(
      std::llround(static_cast<double>(params) * tr.copies * fp8_quantized_bytes_per_elem(tr)));
}

// docs/fp8.md, "Memory": 3 tensors x (amax_history_len x 4 B + scale + scale_inv).
Bytes fp8_scaling_state_bytes(const Fp8Spec& f) {
  if (!fp8_traits(f.recipe).amax_history) return 0;
  return 3 * (static_cast<Bytes>(f.amax_history_len) * 4 + 2 * 4);
}

double fp8_saved_activation_factor(const Fp8Spec& f) {
  const Fp8RecipeTraits& tr = fp8_traits(f.recipe);
  if (tr.high_precision_saved) return 1.0;  // torchao saves the bf16 input
  return fp8_quantized_bytes_per_elem(tr) / kFp8HighPrecisionBytes;
}

// docs/fp8.md, "FP8 all-gather".
Bytes fp8_all_gather_bytes(std::int64_t params, const Fp8Spec& f, int weights_bytes_per_param) {
  if (!f.fp8_all_gather) return params * weights_bytes_per_param;
  return static_cast<Bytes>(std::llround(static_cast<double>(params) *
                                         fp8_quantized_bytes_per_elem(fp8_traits(f.recipe))));
}

void apply_fp8_saved_activations(ModelSpec& m, const TrainingSpec& t) {
  if (t.precision != Precision::kFp8) return;
  const double k = fp8_saved_activation_factor(t.fp8);
  for (LayerSpec& l : m.layers) {
    if (!runs_in_fp8(l, t.fp8)) continue;
    l.activation_bytes_per_sample *= k;
    if (l.selective_activation_bytes_per_sample > 0) l.selective_activation_bytes_per_sample *= k;
  }
}

}  // namespace csim::core
