// The GPUs added with FP8 training (docs/scenario.md, "GPU catalog"): H100 PCIe, H800 SXM, L40S,
// B200 and GB200, and the FP8 GEMM efficiency prior every FP8-capable entry uses. Internal to
// core/hardware/gpu_catalog.cpp, which appends these entries to the catalog.
#pragma once

#include <vector>

#include "core/hardware/gpu_catalog.hpp"

namespace csim::core {

// The FP8 GEMM curve derived from a GPU's bf16 gemm curve (docs/fp8.md, "FP8 GEMM efficiency"):
// max_efficiency x 1.75 / 2 (FP8 GEMMs run at 1.75x the bf16 ones on large shapes while the peak
// doubles), the same half_flops. A prior from a published kernel benchmark, not a fit.
EfficiencyCurve fp8_gemm_prior(const EfficiencyCurve& gemm);

// H100-PCIe-80GB, H800-SXM5-80GB, L40S-48GB, B200-180GB, GB200-186GB, in that order. The Hopper
// and Blackwell entries reuse `h100_sxm`'s efficiency curves, the L40S `a100_80`'s (each source
// says so).
std::vector<GpuCatalogEntry> modern_gpu_entries(const GpuCatalogEntry& h100_sxm,
                                                const GpuCatalogEntry& a100_80);

}  // namespace csim::core
