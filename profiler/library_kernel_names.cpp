// Library kernel names of simulated compute kernels (library_kernel_names.hpp; every name and the
// rule that picks it in docs/trace-format.md, "Library kernel names").
#include "profiler/library_kernel_names.hpp"

namespace csim::prof {
namespace {

bool has(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// ATen's template spelling of an element type (an FP8 GEMM's neighbours run in bf16).
std::string aten_type(std::string_view dtype) {
  if (dtype == "bf16" || dtype == "fp8") return "c10::BFloat16";
  if (dtype == "fp16") return "c10::Half";
  return "float";
}

// The event's layer path: its name without the pass suffix.
std::string_view layer_of(std::string_view name) {
  for (std::string_view tail : {".fwd", ".bwd", ".recompute"})
    if (name.size() > tail.size() && name.substr(name.size() - tail.size()) == tail)
      return name.substr(0, name.size() - tail.size());
  return name;
}

// ATen's vectorized elementwise kernel running FUNCTOR (its full template spelling).
std::string vectorized(const std::string& functor) {
  return "void at::native::vectorized_elementwise_kernel<4, " + functor +
         ", at::detail::Array<char*, 3> >";
}

// A functor templated on the element type: NAME<T>.
std::string of_type(const char* name, std::string_view dtype) {
  return std::string(name) + "<" + aten_type(dtype) + ">";
}

// cuBLAS / cuBLASLt kernel families by architecture and input type, one representative tile
// (which tile cuBLAS picks for a shape is not modelled).
std::string gemm(const KernelNameContext& c, std::string_view dtype) {
  const int cc = c.compute_capability;
  // torchao rowwise: torch._scaled_mm's CUTLASS kernel (aten/src/ATen/native/cuda/
  // RowwiseScaledMM.cu); tensorwise and TE's recipes: cuBLASLt, below.
  if (dtype == "fp8" && c.fp8_recipe == "rowwise")
    return "void cutlass::device_kernel<f8f8bf16_rowwise_kernel>";
  const std::string t = dtype == "bf16"   ? "bf16"
                        : dtype == "fp16" ? "f16"
                        : dtype == "fp8"  ? "e4m3"
                        : dtype == "tf32" ? "tf32"
                                          : "f32";
  if (cc >= 90)
    return "sm90_xmma_gemm_" + t + (dtype == "fp8" ? "bf16" : t) + "_" + t +
           "f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_"
           "cublas";
  if (cc >= 89 && dtype == "fp8")
    return "sm89_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x64_stage3_warpsize2x2x1_"
           "tensor16x8x32_kernel";
  if (cc >= 80) {
    if (dtype == "bf16" || dtype == "fp16") {
      const std::string a = dtype == "bf16" ? "bf16" : "fp16";
      return "ampere_" + a + "_s16816gemm_" + a + "_128x128_ldg8_f2f_stages_32x5_tn";
    }
    if (dtype == "tf32")
      return "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align4>";
    return "ampere_sgemm_128x64_tn";
  }
  if (cc >= 70) {
    if (dtype == "fp16")
      return cc >= 75 ? "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn"
                      : "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_tn";
    return "volta_sgemm_128x64_tn";
  }
  return "maxwell_sgemm_128x64_tn";  // cuBLAS's Maxwell kernels also run Pascal
}

std::string attention(const KernelNameContext& c, std::string_view dtype, bool backward) {
  if (c.attention == "flash2")
    return backward ? "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_params>"
                    : "void flash::flash_fwd_kernel<Flash_fwd_params>";
  if (c.attention == "flash3")
    return backward ? "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::"
                      "FlashAttnBwdSm90<CollectiveMainloopBwdSm90, CollectiveEpilogueBwd> > >"
                    : "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::"
                      "FlashAttnFwdSm90<CollectiveMainloopFwdSm90, CollectiveEpilogueFwd> > >";
  if (c.attention == "cudnn")
    return backward ? "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_20_"
                      "64x128x128_4x1x1_cga1x1x1_kernel0_0"
                    : "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_"
                      "64x128x128_4x1x1_cga1x1x1_kernel0_0";
  return gemm(c, dtype);
}

std::string norm(const KernelNameContext& c, std::string_view d, bool backward) {
  if (c.norm == "rmsnorm" && c.framework == "megatron_te")
    return backward ? "void transformer_engine::normalization::rmsnorm_bwd_tuned_kernel<"
                      "transformer_engine::normalization::Kernel_traits<float> >"
                    : "void transformer_engine::normalization::rmsnorm_fwd_tuned_kernel<"
                      "transformer_engine::normalization::Kernel_traits<float> >";
  if (c.norm == "rmsnorm" && c.fused_rmsnorm)  // torchtitan's Triton fused_rmsnorm
    return backward ? "_rms_norm_bwd_kernel_sm" : "_rms_norm_fwd_kernel";
  if (c.norm == "rmsnorm") return "";  // an eager composite: named after its multiply
  return backward ? "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<" +
                        aten_type(d) + ", float>"
                  : "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<" +
                        aten_type(d) + ", float>";
}

std::string optimizer(const KernelNameContext& c) {
  if (!c.torch_optim)  // Apex's / Transformer Engine's / DeepSpeed's FusedAdam
    return "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float, float, "
           "float> >";
  if (c.for_loop) return "";  // one ATen kernel per operation: named after the multiply
  return c.optimizer == "sgd"
             ? "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
               "(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::"
               "BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>"
             : "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
               "(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::"
               "FusedAdamMathFunctor<float, 4> >";
}

std::string elementwise(const KernelNameContext& c, std::string_view layer, std::string_view d,
                        bool backward) {
  const bool te = c.framework == "megatron_te";
  const bool torchao = c.fp8_recipe == "rowwise" || c.fp8_recipe == "tensorwise";
  // torch.compile's fused groups (core/model/compile_fusion.hpp names them "a+b").
  if (c.compile && has(layer, "+")) {
    const std::size_t dot = layer.rfind('.');
    std::string n = backward ? "triton_poi_fused_bwd_" : "triton_poi_fused_";
    for (char ch : layer.substr(dot == std::string_view::npos ? 0 : dot + 1))
      n += (ch == '+' || ch == '.') ? '_' : ch;
    return n + "_0";
  }
  if (has(layer, "fp8_amax") || has(layer, "clip_grad_norm_ norm"))
    return "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<" + aten_type(d) +
           ", at::native::func_wrapper_t<float, at::native::MaxNanFunctor<float> >, unsigned int, "
           "float, 4> >";
  if (has(layer, "fp8_cast") || has(layer, "fp8_transpose")) {
    if (!torchao) return "void transformer_engine::detail::cast_transpose_kernel<4, 8, float>";
    if (has(layer, "fp8_transpose"))
      return "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::"
             "native::direct_copy_kernel_cuda(at::TensorIteratorBase&)> >";
    return vectorized(
        "at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::Float8_e4m3fn, "
        "at::native::binary_internal::MulFunctor<float> >");
  }
  if (has(layer, "optimizer.step"))
    if (std::string o = optimizer(c); !o.empty()) return o;
  if (layer == "loss" || has(layer, ".loss") || has(layer, " loss"))
    return backward ? "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, "
                      "float, float, at::native::(anonymous namespace)::LogSoftMaxBackwardEpilogue>"
                    : "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, "
                      "float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>";
  if (has(layer, "softmax")) {
    if (te)
      return backward ? "void scaled_upper_triang_masked_softmax_warp_backward<c10::BFloat16, "
                        "c10::BFloat16, float, 11>"
                      : "void scaled_upper_triang_masked_softmax_warp_forward<c10::BFloat16, "
                        "c10::BFloat16, float, 11>";
    const std::string t = aten_type(d);
    return "void at::native::(anonymous namespace)::cunn_SoftMax" +
           std::string(backward ? "Backward" : "Forward") + "<4, " + t + ", float, " + t +
           ", at::native::(anonymous namespace)::SoftMax" + (backward ? "Backward" : "Forward") +
           "Epilogue>";
  }
  if (has(layer, "dropout"))
    return backward
               ? vectorized(of_type("at::native::(anonymous namespace)::MaskedScaleFunctor", d))
               : "void at::native::(anonymous namespace)::fused_dropout_kernel_vec<" +
                     aten_type(d) + ", float, unsigned int, 1, 4, bool>";
  if (has(layer, "ln_") || has(layer, "norm"))
    if (std::string n = norm(c, d, backward); !n.empty()) return n;
  if (has(layer, "embed") || has(layer, "wte"))
    return backward ? "void at::native::(anonymous namespace)::embedding_backward_feature_kernel<" +
                          aten_type(d) + ", float, long>"
                    : "void at::native::(anonymous namespace)::indexSelectLargeIndex<" +
                          aten_type(d) + ", long, unsigned int, 2, 2, -2, true>";
  if (has(layer, "gelu"))
    return vectorized(of_type(
        backward ? "at::native::GeluBackwardCUDAKernelImpl" : "at::native::GeluCUDAKernelImpl", d));
  if (has(layer, "swiglu") || has(layer, "silu"))
    return vectorized(
        of_type(backward ? "at::native::silu_backward_kernel" : "at::native::silu_kernel", d));
  if (has(layer, "residual")) return vectorized(of_type("at::native::CUDAFunctor_add", d));
  // Anything else (a composite norm's or RoPE's operations, a for-loop optimizer's, a clip's
  // multiply): ATen's multiply, the commonest operation of those sequences.
  const std::string t = aten_type(d);
  return vectorized("at::native::BinaryFunctor<" + t + ", " + t + ", " + t +
                    ", at::native::binary_internal::MulFunctor<float> >");
}

}  // namespace

nlohmann::json KernelNameContext::to_json() const {
  return {{"compute_capability", compute_capability},
          {"framework", framework},
          {"attention", attention},
          {"norm", norm},
          {"fp8_recipe", fp8_recipe},
          {"optimizer", optimizer},
          {"compile", compile},
          {"fused_rmsnorm", fused_rmsnorm},
          {"torch_optim", torch_optim},
          {"for_loop", for_loop}};
}

std::optional<KernelNameContext> KernelNameContext::from_metadata(const nlohmann::json& md) {
  if (!md.is_object()) return std::nullopt;
  const auto it = md.find("kernel_names");
  if (it == md.end() || !it->is_object()) return std::nullopt;
  const nlohmann::json& j = *it;
  KernelNameContext c;
  c.compute_capability = j.value("compute_capability", 0);
  c.framework = j.value("framework", "");
  c.attention = j.value("attention", "");
  c.norm = j.value("norm", "");
  c.fp8_recipe = j.value("fp8_recipe", "");
  c.optimizer = j.value("optimizer", "adam");
  c.compile = j.value("compile", false);
  c.fused_rmsnorm = j.value("fused_rmsnorm", false);
  c.torch_optim = j.value("torch_optim", true);
  c.for_loop = j.value("for_loop", false);
  return c;
}

std::string library_kernel_name(const KernelNameContext& c, std::string_view kind,
                                std::string_view dtype, bool backward, std::string_view op_name) {
  const std::string_view layer = layer_of(op_name);
  if (kind == "conv") {
    if (c.compute_capability >= 80)
      return std::string("sm80_xmma_") + (backward ? "dgrad" : "fprop") +
             "_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x16_stage4_"
             "warpsize2x2x1_g1_tensor16x8x8_kernel";
    return backward ? "void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>"
                    : "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, "
                      "false, true>";
  }
  if (kind == "attention") {
    // The fused core (core/model/attention_kernels.cpp: attn.core); eager attention's scores and
    // attention x values are batched GEMMs.
    if (has(layer, "attn.core")) return attention(c, dtype, backward);
    return gemm(c, dtype);
  }
  if (kind == "gemm") return gemm(c, dtype);
  return elementwise(c, layer, dtype, backward);
}

}  // namespace csim::prof
