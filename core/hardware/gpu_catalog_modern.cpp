// The GPUs added with FP8 training (docs/scenario.md, "GPU catalog"; docs/fp8.md). Every figure
// names its source; NVIDIA's datasheets headline 2:4-sparse tensor figures ("*: with sparsity"),
// stored here halved (dense). System datasheets (DGX B200, GB200 NVL72) give whole-system
// figures: the per-GPU share (system / GPUs) is stored, and the source says so.
//
// Index: [SECTION] Helpers, [SECTION] Hopper, [SECTION] Ada, [SECTION] Blackwell
//
// Efficiency curves: none of these GPUs has a compute case in published-measurements.json, so
// each reuses the nearest documented prior of its architecture (Hopper and Blackwell: the H100
// SXM estimates; Ada: the A100 fit) with half_flops restated at the GPU's own highest dense
// peak (the kernel whose ideal duration is ~2 us, as gpu_catalog.cpp explains).
#include "core/hardware/gpu_catalog_modern.hpp"

#include <algorithm>
#include <string>

namespace csim::core {

// [SECTION] Helpers ------------------------------------------------------------------------------

// docs/fp8.md, "FP8 GEMM efficiency": NVIDIA's cuBLAS 12.9 benchmark (technical blog "Boosting
// Matrix Multiplication Speed and Flexibility with NVIDIA cuBLAS 12.9", 2025) measures FP8
// matmuls on H100 at up to 1.75x the BF16 ones for large shapes; the FP8 peak is 2x the bf16
// one, so FP8 reaches 1.75 / 2 = 0.875 of the bf16 share of its peak.
EfficiencyCurve fp8_gemm_prior(const EfficiencyCurve& gemm) {
  EfficiencyCurve c;
  c.max_efficiency = gemm.max_efficiency * 1.75 / 2.0;
  c.half_flops = gemm.half_flops;
  c.source =
      "prior (not fitted): 1.75/2 of the gemm curve's max_efficiency; NVIDIA technical blog "
      "'Boosting Matrix Multiplication Speed and Flexibility with NVIDIA cuBLAS 12.9' (FP8 "
      "matmuls on H100 up to 1.75x BF16 on large shapes, at 2x the peak); to be fitted to "
      "published-measurements-modern.json";
  return c;
}

namespace {

constexpr double kTflops = 1e12;

MemoryReserve reserve_mib(Bytes context, Bytes nccl, Bytes workspace) {
  MemoryReserve r;
  r.cuda_context_bytes = context * kMiB;
  r.nccl_buffers_bytes = nccl * kMiB;
  r.workspace_bytes = workspace * kMiB;
  return r;
}

double peak_max(const GpuSpec& g) {
  return std::max({g.peak_fp32_flops_per_s, g.peak_tf32_flops_per_s, g.peak_fp16_flops_per_s,
                   g.peak_bf16_flops_per_s});
}

// Copies `prior`'s curves onto `g` (which has its peaks set), half_flops = 2 us at g's highest
// dense peak, each source prefixed with where the curve comes from; the FP8 GEMM curve from the
// copied gemm curve.
void reuse_curves(GpuSpec& g, const GpuSpec& prior, const std::string& why) {
  const double half = 2e-6 * peak_max(g);
  for (int k = 0; k < kNumComputeKinds; ++k) {
    g.efficiency[k] = prior.efficiency[k];
    g.efficiency[k].half_flops = half;
    g.efficiency[k].source =
        "reused from " + prior.name + " (" + why +
        "), half_flops = 2 us at this GPU's dense peak: " + prior.efficiency[k].source;
  }
  g.fp8_gemm_efficiency = fp8_gemm_prior(g.efficiency[static_cast<int>(ComputeKind::kGemm)]);
}

// [SECTION] Hopper -------------------------------------------------------------------------------

GpuCatalogEntry h100_pcie(const GpuCatalogEntry& h100_sxm) {
  GpuCatalogEntry e = h100_sxm;
  GpuSpec& g = e.gpu;
  g.name = "H100-PCIe-80GB";
  g.memory_bytes = 80 * kGiB;                 // 5 HBM2e stacks
  g.peak_fp32_flops_per_s = 51 * kTflops;     //
  g.peak_tf32_flops_per_s = 378 * kTflops;    // datasheet 756 TFLOPS is 2:4 sparse
  g.peak_fp16_flops_per_s = 756.5 * kTflops;  // datasheet 1,513 TFLOPS is 2:4 sparse
  g.peak_bf16_flops_per_s = 756.5 * kTflops;  //
  g.peak_fp8_flops_per_s = 1513 * kTflops;    // datasheet 3,026 TFLOPS is 2:4 sparse
  g.mem_bw_bytes_per_s = 2000 * kGB;
  g.sm_count = 114;
  g.nccl_sms = 8;  // assumed: NCCL's channels over PCIe (not calibrated)
  g.compute_capability = 90;
  reuse_curves(g, h100_sxm.gpu, "same GH100 silicon; no H100 PCIe compute case");
  g.source =
      "NVIDIA H100 Tensor Core GPU datasheet (PCIe: 51 TFLOPS fp32; 756 tf32, 1,513 fp16/bf16 "
      "and 3,026 fp8 TFLOPS with sparsity -> dense 378 / 756.5 / 1,513; 80 GB HBM2e, 2 TB/s); "
      "Hopper whitepaper (114 SMs on H100 PCIe, sm_90)";
  e.aliases = {"h100pcie", "h100pcie80gb", "h100pcie5", "h10080gbpcie"};
  e.intra_kind = IntraNodeKind::kPcie;
  e.pcie_gen = 5;
  e.nvlink_links_per_gpu = 12;  // only through the optional 2-GPU NVLink bridges (not default)
  e.nvlink_bytes_per_s_per_link = 25 * kGB;
  e.nvswitch_bytes_per_s = 0;
  e.nics_per_node = 4;
  e.nic_bytes_per_s = 25 * kGB;  // 200 Gb/s
  e.link_source =
      "NVIDIA H100 datasheet (PCIe: PCIe 5.0 x16 128 GB/s bidirectional; NVLink bridge 600 GB/s "
      "bidirectional between GPU pairs, not a default topology); NICs assumed: a typical 8-GPU "
      "PCIe server with 4x 200 Gb/s (one per PCIe switch)";
  e.power.tdp_w = 350;
  e.power.tdp_source =
      "NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe max TDP 300-350 W "
      "(configurable)";
  return e;
}

GpuCatalogEntry h800(const GpuCatalogEntry& h100_sxm) {
  GpuCatalogEntry e = h100_sxm;  // same GH100 SXM5 part: peaks, memory, SMs, curves
  GpuSpec& g = e.gpu;
  g.name = "H800-SXM5-80GB";
  for (int k = 0; k < kNumComputeKinds; ++k)
    g.efficiency[k].source = "as H100-SXM5-80GB (same silicon): " + g.efficiency[k].source;
  g.fp8_gemm_efficiency.source = "as H100-SXM5-80GB: " + g.fp8_gemm_efficiency.source;
  g.source =
      "NVIDIA H800 SXM5 specifications (NVIDIA product brief for the China market: H100 SXM5 "
      "tensor figures, 67 TFLOPS fp32; 989 tf32, 1,979 fp16/bf16, 3,958 fp8 TFLOPS with sparsity "
      "-> dense 494.5 / 989.5 / 1,979; 80 GB HBM3, 3.35 TB/s; fp64 cut to 1 TFLOPS; NVLink 400 "
      "GB/s); 132 SMs, sm_90";
  e.aliases = {"h800", "h800sxm", "h800sxm5", "h80080gb", "h800sxm580gb"};
  e.nvlink_links_per_gpu = 8;
  e.nvlink_bytes_per_s_per_link = 25 * kGB;
  e.nvswitch_bytes_per_s = 200 * kGB;  // 400 GB/s bidirectional
  e.link_source =
      "NVIDIA H800 SXM5 specifications: NVLink 400 GB/s bidirectional (200 GB/s per direction, 8 "
      "NVLink4 links) through NVSwitch; DeepSeek-V3 technical report (2024, section 3.2.2) "
      "measures 160 GB/s of it and 8x 400 Gb/s InfiniBand per node; PCIe 5.0 x16";
  e.power.tdp_source = "as H100-SXM5-80GB (same GH100 SXM5 part): " + h100_sxm.power.tdp_source;
  e.power.clock_source = "as H100-SXM5-80GB (same part): " + h100_sxm.power.clock_source;
  return e;
}

// [SECTION] Ada ----------------------------------------------------------------------------------

GpuCatalogEntry l40s(const GpuCatalogEntry& a100_80) {
  GpuCatalogEntry e;
  GpuSpec& g = e.gpu;
  g.name = "L40S-48GB";
  g.memory_bytes = 48 * kGiB;                  // GDDR6 with ECC
  g.peak_fp32_flops_per_s = 91.6 * kTflops;    //
  g.peak_tf32_flops_per_s = 183 * kTflops;     // datasheet dense (366 with sparsity)
  g.peak_fp16_flops_per_s = 362.05 * kTflops;  // datasheet dense (733 with sparsity)
  g.peak_bf16_flops_per_s = 362.05 * kTflops;  //
  g.peak_fp8_flops_per_s = 733 * kTflops;      // datasheet dense (1,466 with sparsity)
  g.mem_bw_bytes_per_s = 864 * kGB;
  g.sm_count = 142;
  g.nccl_sms = 4;  // assumed: NCCL's channels over PCIe (not calibrated)
  g.compute_capability = 89;
  g.kernel_overhead_ns = 1500;  // as A100 (estimate)
  g.mem_bw_efficiency = 0.80;   // GDDR, as the GTX 1080 Ti entry (estimate)
  reuse_curves(g, a100_80.gpu,
               "nearest documented prior with tensor cores: the A100 fit; no Ada compute case");
  g.source =
      "NVIDIA L40S datasheet (91.6 TFLOPS fp32; tf32 183, bf16/fp16 362.05, fp8 733 TFLOPS "
      "dense, twice that with sparsity; 48 GB GDDR6, 864 GB/s; 142 RT cores = 142 SMs); Ada "
      "Lovelace (AD102, sm_89)";
  e.aliases = {"l40s", "l40s48gb", "nvidial40s"};
  e.reserve = reserve_mib(500, 128, 128);
  e.reserve_source = a100_80.reserve_source;
  e.intra_kind = IntraNodeKind::kPcie;
  e.pcie_gen = 4;
  e.nvlink_links_per_gpu = 0;
  e.nics_per_node = 4;
  e.nic_bytes_per_s = 25 * kGB;  // 200 Gb/s
  e.link_source =
      "NVIDIA L40S datasheet: PCIe 4.0 x16 (64 GB/s bidirectional), no NVLink; NICs assumed: a "
      "typical 8-GPU PCIe server with 4x 200 Gb/s";
  e.power.tdp_w = 350;
  e.power.tdp_source = "NVIDIA L40S datasheet: max power consumption 350 W";
  return e;
}

// [SECTION] Blackwell ----------------------------------------------------------------------------

// NVLink 5: 18 links x 50 GB/s per direction = 1.8 TB/s bidirectional per GPU.
void nvlink5(GpuCatalogEntry& e) {
  e.intra_kind = IntraNodeKind::kNvswitch;
  e.pcie_gen = 5;
  e.nvlink_links_per_gpu = 18;
  e.nvlink_bytes_per_s_per_link = 50 * kGB;
  e.nvswitch_bytes_per_s = 900 * kGB;
}

GpuCatalogEntry b200(const GpuCatalogEntry& h100_sxm) {
  GpuCatalogEntry e = h100_sxm;
  GpuSpec& g = e.gpu;
  g.name = "B200-180GB";
  g.memory_bytes = 180 * kGiB;               // DGX B200: 1,440 GB HBM3e / 8 GPUs
  g.peak_fp32_flops_per_s = 75 * kTflops;    // HGX B200: 600 TFLOPS / 8
  g.peak_tf32_flops_per_s = 1100 * kTflops;  // 2.2 PFLOPS per GPU is 2:4 sparse
  g.peak_fp16_flops_per_s = 2250 * kTflops;  // 4.5 PFLOPS per GPU is 2:4 sparse
  g.peak_bf16_flops_per_s = 2250 * kTflops;  //
  g.peak_fp8_flops_per_s = 4500 * kTflops;   // DGX B200 72 PFLOPS sparse / 8 = 9 -> dense 4.5
  g.mem_bw_bytes_per_s = 8000 * kGB;         // DGX B200: 64 TB/s / 8
  g.sm_count = 148;
  g.nccl_sms = 24;  // assumed as H100 (not calibrated)
  g.compute_capability = 100;
  reuse_curves(g, h100_sxm.gpu, "nearest documented prior: Hopper; no Blackwell compute case");
  g.source =
      "NVIDIA DGX B200 datasheet (8 GPUs: 72 PFLOPS fp8 training with sparsity, 1,440 GB HBM3e, "
      "64 TB/s) and HGX B200 specifications (per GPU: fp32 75 TFLOPS, tf32 2.2, fp16/bf16 4.5, "
      "fp8 9 PFLOPS with sparsity): per-GPU shares of system figures, sparse halved -> dense "
      "tf32 1.1, bf16 2.25, fp8 4.5 PFLOPS; 180 GB, 8 TB/s; 148 SMs, sm_100";
  e.aliases = {"b200", "b200sxm", "b200180gb", "hgxb200", "dgxb200"};
  e.reserve_source = "as Hopper (estimate): " + h100_sxm.reserve_source;
  nvlink5(e);
  e.nics_per_node = 8;
  e.nic_bytes_per_s = 50 * kGB;  // 400 Gb/s ConnectX-7
  e.link_source =
      "NVIDIA DGX B200 datasheet: fifth-generation NVLink, 1.8 TB/s bidirectional per GPU (18 "
      "links, 900 GB/s per direction) through 2 NVSwitch chips (14.4 TB/s aggregate); PCIe 5.0 "
      "host (Xeon Platinum 8570); 8x 400 Gb/s ConnectX-7";
  e.power.tdp_w = 1000;
  e.power.tdp_source = "NVIDIA HGX B200 specifications: B200 max TDP 1,000 W per GPU";
  return e;
}

GpuCatalogEntry gb200(const GpuCatalogEntry& h100_sxm) {
  GpuCatalogEntry e = h100_sxm;
  GpuSpec& g = e.gpu;
  g.name = "GB200-186GB";
  g.memory_bytes = 186 * kGiB;               // GB200 NVL72: 13.4 TB HBM3e / 72 GPUs
  g.peak_fp32_flops_per_s = 80 * kTflops;    // 5,760 TFLOPS / 72
  g.peak_tf32_flops_per_s = 1250 * kTflops;  // 180 PFLOPS sparse / 72 = 2.5 -> dense 1.25
  g.peak_fp16_flops_per_s = 2500 * kTflops;  // 360 PFLOPS sparse / 72 = 5 -> dense 2.5
  g.peak_bf16_flops_per_s = 2500 * kTflops;  //
  g.peak_fp8_flops_per_s = 5000 * kTflops;   // 720 PFLOPS sparse / 72 = 10 -> dense 5
  g.mem_bw_bytes_per_s = 8000 * kGB;         // 576 TB/s / 72
  g.sm_count = 148;
  g.nccl_sms = 24;  // assumed as H100 (not calibrated)
  g.compute_capability = 100;
  reuse_curves(g, h100_sxm.gpu, "nearest documented prior: Hopper; no Blackwell compute case");
  g.source =
      "NVIDIA GB200 NVL72 specifications (72 GPUs: fp32 5,760 TFLOPS; tf32 180, fp16/bf16 360, "
      "fp8 720 PFLOPS with sparsity; up to 13.4 TB HBM3e, 576 TB/s): per-GPU shares (/72), "
      "sparse halved -> dense tf32 1.25, bf16 2.5, fp8 5 PFLOPS; 186 GB, 8 TB/s; 148 SMs and "
      "sm_100 as B200";
  e.aliases = {"gb200", "gb200nvl72", "gb200186gb"};
  e.reserve_source = "as Hopper (estimate): " + h100_sxm.reserve_source;
  nvlink5(e);
  e.nics_per_node = 4;
  e.nic_bytes_per_s = 50 * kGB;  // 400 Gb/s ConnectX-7, one per GPU
  e.link_source =
      "NVIDIA GB200 NVL72 specifications: fifth-generation NVLink, 130 TB/s over 72 GPUs = 1.8 "
      "TB/s bidirectional per GPU (900 GB/s per direction) through NVLink switch trays; 72 "
      "single-port 400 Gb/s ConnectX-7, one per GPU; a node here is a 4-GPU compute tray (the "
      "NVLink domain beyond it is not a default topology)";
  // The GB200 datasheet states the superchip's power (one Grace, two B200), not a per-GPU TDP.
  e.power.tdp_w = 0;
  e.power.tdp_source =
      "none: NVIDIA's GB200 NVL72 datasheet gives the superchip's power (Grace + "
      "2 B200), not a per-GPU figure; a power cap cannot be given for this GPU";
  return e;
}

}  // namespace

std::vector<GpuCatalogEntry> modern_gpu_entries(const GpuCatalogEntry& h100_sxm,
                                                const GpuCatalogEntry& a100_80) {
  std::vector<GpuCatalogEntry> c;
  c.push_back(h100_pcie(h100_sxm));
  c.push_back(h800(h100_sxm));
  c.push_back(l40s(a100_80));
  c.push_back(b200(h100_sxm));
  c.push_back(gb200(h100_sxm));
  return c;
}

}  // namespace csim::core
