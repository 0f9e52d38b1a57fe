// The kernel a library launches for a simulated compute kernel event, named as the library names
// it (docs/trace-format.md, "Library kernel names"): cuBLAS's GEMMs by architecture and dtype,
// FlashAttention's and cuDNN's attention kernels, PyTorch's ATen kernels, Transformer Engine's
// under Megatron, Inductor's under torch.compile. One representative name per event (the op's
// main kernel). Read from what a simulated trace holds: the event's name (its layer path), its
// args kind, dtype and phase, and the run's metadata "kernel_names" (KernelNameContext), which
// the trace builder writes. The per-rank files name their kernels so (per_rank_traces.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace csim::prof {

struct KernelNameContext {
  int compute_capability = 0;  // x10: 90 = 9.0
  std::string framework;       // training.framework: plain, torchtitan, megatron_te, hf
  std::string attention;       // the fused attention kernel: flash2, flash3, cudnn ("" none)
  std::string norm;            // layernorm or rmsnorm ("" for models that are not transformers)
  std::string fp8_recipe;      // training.fp8.recipe when precision is fp8, else ""
  std::string optimizer;       // adam or sgd
  bool compile = false;        // training.compile
  bool fused_rmsnorm = false;  // training.fused_rmsnorm
  bool torch_optim = true;     // PyTorch's optimizer (not Apex's / TE's / DeepSpeed's FusedAdam)
  bool for_loop = false;       // training.pytorch_version < 2.0: a for-loop optimizer

  nlohmann::json to_json() const;
  // The context of a trace's metadata "kernel_names"; nullopt when it has none (a real trace).
  static std::optional<KernelNameContext> from_metadata(const nlohmann::json& metadata);
};

// The library's name of a compute kernel event: `kind` (gemm, elementwise, conv, attention),
// `dtype` (fp32, tf32, fp16, bf16, fp8), `backward` (phase backward), `op_name` (the event's name:
// the layer path and pass suffix).
std::string library_kernel_name(const KernelNameContext& c, std::string_view kind,
                                std::string_view dtype, bool backward, std::string_view op_name);

}  // namespace csim::prof
