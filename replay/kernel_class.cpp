// Kernel classes for the GPU what-if (docs/replay.md, "Another GPU"): by category and name, as
// HTA's kernel breakdown and Lumos do; the name rules are the only knowledge of kernel libraries.
#include <algorithm>
#include <cctype>
#include <string>

#include "replay/replay_program.hpp"

namespace csim::replay {

const char* to_string(KernelClass c) {
  switch (c) {
    case KernelClass::kGemm:
      return "gemm";
    case KernelClass::kMemoryBound:
      return "memory-bound";
    case KernelClass::kLaunchBound:
      return "launch-bound";
    case KernelClass::kCollective:
      return "collective";
    case KernelClass::kHostCopy:
      return "host copy";
  }
  return "?";
}

namespace {

bool has(const std::string& s, const char* w) {
  return s.find(w) != std::string::npos;
}

}  // namespace

bool is_collective_kernel(const std::string& name) {
  return name.rfind("ncclKernel", 0) == 0 || name.rfind("ncclDevKernel", 0) == 0 ||
         name.rfind("void ncclKernel", 0) == 0 || name.rfind("void ncclDevKernel", 0) == 0 ||
         name.rfind("rccl", 0) == 0 || has(name, "ncclAllReduce") || has(name, "nccl::");
}

KernelClass classify_kernel(Cat cat, const std::string& name, TimeNs dur_ns, bool* tensor_core,
                            bool* tf32) {
  *tensor_core = false;
  *tf32 = false;
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (cat == Cat::kKernel && is_collective_kernel(name)) return KernelClass::kCollective;
  if (cat == Cat::kMemcpy && !has(n, "dtod")) return KernelClass::kHostCopy;
  if (dur_ns <= kLaunchBoundNs) return KernelClass::kLaunchBound;
  if (cat != Cat::kKernel) return KernelClass::kMemoryBound;  // memset, on-device copy
  // Batch-norm and layer-norm kernels of cuDNN are memory-bound even though cuDNN writes them.
  // FBGEMM's embedding-table kernels (fbgemm_gpu::, split_embedding_*) are memory-bound lookups.
  const bool norm = has(n, "bn_") || has(n, "norm") || has(n, "softmax") || has(n, "embedding") ||
                    has(n, "fbgemm_gpu");
  const bool gemm = has(n, "gemm") || has(n, "gemv") || has(n, "cutlass") || has(n, "xmma") ||
                    has(n, "cublas") || has(n, "conv") || has(n, "wgrad") || has(n, "dgrad") ||
                    has(n, "fprop") || has(n, "flash") || has(n, "fmha") || has(n, "attention") ||
                    has(n, "implicit_") || has(n, "winograd") || has(n, "_mma") ||
                    has(n, "tensorop") || has(n, "ampere_") || has(n, "volta_") ||
                    has(n, "turing_") || has(n, "sm80_") || has(n, "sm90_") || has(n, "sm75_") ||
                    has(n, "sm70_") || has(n, "tilelang") || has(n, "triton_mm") ||
                    has(n, "mfma") || has(n, "rocblas") || has(n, "hipblaslt") || has(n, "ck::");
  if (!gemm || norm) return KernelClass::kMemoryBound;
  // cuBLAS/CUTLASS name the math: s1688/tf32 is TF32 on tensor cores; h/bf16/hmma/884/1688/16816
  // half-precision tensor cores; sgemm/"_s" plain FP32.
  *tf32 = has(n, "tf32") ||
          ((has(n, "s1688") || has(n, "s16816")) && !has(n, "bf16") && !has(n, "f16"));
  *tensor_core = *tf32 || has(n, "tensorop") || has(n, "h884") || has(n, "h1688") ||
                 has(n, "h16816") || has(n, "bf16") || has(n, "f16") || has(n, "hmma") ||
                 has(n, "xmma") || has(n, "flash") || has(n, "fmha") || has(n, "mfma") ||
                 has(n, "sm80_") || has(n, "sm90_");
  return KernelClass::kGemm;
}

}  // namespace csim::replay
