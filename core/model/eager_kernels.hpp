// Eager kernel sequences per framework (`training.framework`; docs/transformer.md, "Eager kernel
// sequences"). The transformer builder (core/model/model_transformer.hpp) costs each pointwise
// module as one fused kernel that reads its input and writes its output once, which is what
// Transformer Engine's kernels and torch.compile do. In eager PyTorch a module written as a chain
// of tensor operations launches one kernel per operation, each reading and writing its tensors,
// some in fp32: torchtitan's RMSNorm (x.float(), pow, mean, add, rsqrt, mul, type_as, * weight),
// its complex-multiply RoPE, the GQA key/value repeat, Hugging Face's rotate_half RoPE and GPT-2's
// gelu_new. This pass gives those layers the framework's kernel count, traffic and saved bytes,
// and keeps the fused figures beside them (LayerSpec::fused_*) for torch.compile's fusion
// (core/model/compile_fusion.hpp), which then recovers them.
#pragma once

#include <optional>
#include <string>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// The names `training.framework` takes, in Framework order.
inline constexpr const char* kFrameworkNames[] = {"plain", "torchtitan", "megatron_te", "hf"};

// The framework a scenario runs when `training.framework` is not given: FSDP2 (not
// Megatron-FSDP) is torchtitan's; 3D, tensor / pipeline parallel, ZeRO and Megatron-FSDP are
// Megatron's (with Transformer Engine); a model from a Hugging Face config under DDP,
// DataParallel, FSDP1, model parallel or one GPU is Hugging Face's; anything else plain
// (torch.nn modules: one kernel each).
Framework default_framework(StrategyKind kind, int fsdp_version, bool megatron_fsdp, bool hf_model);

// The attention kernel PyTorch's scaled_dot_product_attention picks for torchtitan and Hugging
// Face models when the scenario does not name one: its flash backend (FlashAttention-2) on
// compute capability 8.0 and above, the eager (math) path below it (PyTorch's sdp_utils.cpp
// priority order: flash, memory-efficient, math, cuDNN). nullopt: the framework brings its own
// (Megatron with Transformer Engine, plain) and the GPU's default stands.
std::optional<AttentionKernel> framework_attention_kernel(Framework f, const GpuSpec& gpu);

// Gives the pointwise layers of every transformer block (and the final norm) of M the eager
// kernel sequence of framework F; layers whose module is one kernel anyway (LayerNorm, residual
// adds, SwiGLU's silu and mul) are left as built. No-op for plain and megatron_te, and for models
// not built by build_transformer (model.gpt, layer lists, ResNet). FUSED_RMSNORM keeps RMSNorm one
// kernel (torchtitan's norm_type "fused_rmsnorm", a Triton kernel: models/norms.py FusedRMSNorm).
void apply_eager_kernels(ModelSpec& m, Framework f, bool fused_rmsnorm = false);

// Forward kernel launches of transformer block BLOCK (the Llama block's count in
// docs/transformer.md, "Eager kernel sequences").
int block_forward_kernels(const ModelSpec& m, int block);

}  // namespace csim::core
