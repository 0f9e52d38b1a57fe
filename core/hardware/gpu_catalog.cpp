// Built-in GPU catalog (docs/scenario.md, "GPU catalog"). Every figure set carries its source.
// The GPUs added with FP8 training (H100 PCIe, H800, L40S, B200, GB200) are in
// gpu_catalog_modern.cpp.
//
// Index: [SECTION] Helpers, [SECTION] Entries, [SECTION] Lookup, [SECTION] Topology presets
//
// Peaks are DENSE datasheet figures. NVIDIA's Hopper datasheets headline 2:4-sparse tensor figures
// (H100 SXM "1,979 TFLOPS bf16", "989 TFLOPS tf32"); the dense ones stored here are half of those.
//
// Efficiency curves: efficiency(F) = max_efficiency * F / (F + half_flops) (docs/cost-model.md).
//   max_efficiency for gemm is fitted to published-measurements.json where a case exists:
//     * V100: megatron19_1p2B_1gpu (1.2B GPT, 39 TFLOP/s = 30 % of 125 end to end); derivation in
//       docs/scenario.md, "Fitting the V100 gemm curve";
//     * A100: korthikanti_t4_22B_layer_baseline_no_recompute (22B layer, TP=8, fwd 7.7 ms);
//       derivation in docs/scenario.md, "Fitting the A100 gemm curve".
//   Where no case exists (GTX 1080 Ti, Hopper, and the conv/attention/elementwise kinds) the
//   constant is an estimate and its source string says so. half_flops (stated at the GPU's highest
//   dense peak, scaled to other dtypes by compute_cost): the kernel size whose ideal duration at
//   that peak is ~2 us, so a tiny kernel costs ~2 us / max_efficiency more than its FLOPs: wave
//   quantisation and ramp-up/tail. Estimate, not fitted.
#include "core/hardware/gpu_catalog.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "core/hardware/gpu_catalog_modern.hpp"
#include "core/json_diagnostics.hpp"

namespace csim::core {

// [SECTION] Helpers ------------------------------------------------------------------------------

namespace {

constexpr double kTflops = 1e12;

// A datasheet TDP with no published measurement of clocks under a lower cap (docs/cost-model.md,
// "Power limit"): a cap below it is accepted and recorded, and not modelled (factor 1).
PowerProfile tdp_only(double watts, std::string source) {
  PowerProfile p;
  p.tdp_w = watts;
  p.tdp_source = std::move(source);
  p.clock_source =
      "none: no published sustained-clock (or throughput) measurement of this GPU under a board "
      "power cap was found; a cap below the TDP is not modelled (placeholder factor 1)";
  return p;
}

// H100 SXM5 under a cap: MLPerf Inference v4.0, NVIDIA's closed-division DGX-H100 (8x
// H100-SXM-80GB) submissions, MaxQ (the board power capped by `nvidia-smi -pl` to the config's
// power_limit) over MaxP (700 W), Offline samples per second, same hardware and software stack
// (github.com/mlcommons/inference_results_v4.0, closed/NVIDIA/results/DGX-H100_H100-SXM-80GBx8_TRT
// and ..._TRT_MaxQ, <benchmark>/Offline/performance/run_1/mlperf_log_summary.txt):
//   400 W: BERT-99 (FP8 GEMMs, compute-bound) 53,726.9 / 70,116.2 = 0.766
//   350 W: GPT-J-99 178.896 / 239.895 = 0.746
// Whole-application throughput ratios of GEMM-dominated inference, used as the compute-throughput
// factor (docs/cost-model.md, "Power limit").
PowerProfile h100_sxm_power(std::string tdp_source) {
  PowerProfile p;
  p.tdp_w = 700;
  p.tdp_source = std::move(tdp_source);
  p.clock = {{350, 0.746}, {400, 0.766}};
  p.clock_source =
      "MLPerf Inference v4.0, NVIDIA DGX-H100 (8x H100-SXM-80GB), MaxQ over MaxP Offline "
      "throughput, same stack: BERT-99 at a 400 W cap 53,726.9 / 70,116.2 samples/s = 0.766, "
      "GPT-J-99 at 350 W 178.896 / 239.895 = 0.746; between 400 W and the 700 W TDP linear";
  return p;
}

EfficiencyCurve curve(double max_eff, double half_flops, std::string source) {
  EfficiencyCurve c;
  c.max_efficiency = max_eff;
  c.half_flops = half_flops;
  c.source = std::move(source);
  return c;
}

MemoryReserve reserve_mib(Bytes context, Bytes nccl, Bytes workspace) {
  MemoryReserve r;
  r.cuda_context_bytes = context * kMiB;
  r.nccl_buffers_bytes = nccl * kMiB;
  r.workspace_bytes = workspace * kMiB;
  return r;
}

const char* const kReserveSource =
    "estimate: CUDA context = a PyTorch process's nvidia-smi usage after CUDA init with its "
    "kernel images loaded (300-600 MiB, growing with the GPU generation's kernel count); NCCL = "
    "channels x 2 ring peers x ~8 MiB (NCCL_BUFFSIZE 4 MiB Simple + LL128 + LL buffers); "
    "workspace = cuBLAS per-stream workspace (8 MiB, 32 MiB on Hopper) + ~120 MiB cuDNN/conv "
    "workspace allowance";

// [SECTION] Entries ------------------------------------------------------------------------------

GpuCatalogEntry gtx_1080_ti() {
  GpuCatalogEntry e;
  GpuSpec& g = e.gpu;
  g.name = "GTX-1080-Ti";
  g.memory_bytes = 11 * kGiB;                      // 11 x 1 GiB GDDR5X
  g.peak_fp32_flops_per_s = 11.34 * kTflops;       // 3584 cores x 2 x 1582 MHz boost
  g.peak_tf32_flops_per_s = 0;                     // no tensor cores
  g.peak_fp16_flops_per_s = 11.34 * kTflops / 64;  // GP102 fp16 runs at 1/64 of fp32
  g.peak_bf16_flops_per_s = 0;                     // no bf16
  g.mem_bw_bytes_per_s = 484 * kGB;                // 352-bit GDDR5X at 11 Gb/s
  g.sm_count = 28;
  g.nccl_sms = 2;  // assumed: NCCL's 2 channels over PCIe (docs/cost-model.md, interference)
  g.compute_capability = 61;
  g.kernel_overhead_ns = 2500;
  g.mem_bw_efficiency = 0.80;
  const std::string est = "estimate (no GTX 1080 Ti case in published-measurements.json): ";
  g.efficiency[static_cast<int>(ComputeKind::kGemm)] = curve(
      0.80, 2.5e7, est + "cuBLAS SGEMM on Pascal reaches ~80-90 % of fp32 peak for large shapes");
  g.efficiency[static_cast<int>(ComputeKind::kElementwise)] =
      curve(0.50, 2.5e7, est + "elementwise kernels are memory-bound; the FLOP term rarely binds");
  g.efficiency[static_cast<int>(ComputeKind::kConv)] =
      curve(0.65, 2.5e7,
            est + "cuDNN fp32 convolutions run below SGEMM efficiency (im2col/winograd mix)");
  g.efficiency[static_cast<int>(ComputeKind::kAttention)] =
      curve(0.50, 2.5e7, est + "batched small GEMMs + softmax, unfused");
  g.source =
      "NVIDIA GeForce GTX 1080 Ti specifications (3584 CUDA cores, 1582 MHz boost, 11 GB GDDR5X, "
      "484 GB/s); fp16 rate 1/64 of fp32 per the Pascal GP102 tuning guide / CUDA C Programming "
      "Guide arithmetic-instruction throughput table (cc 6.1: 2 fp16x2 results/clk/SM vs 128 fp32)";
  e.aliases = {"1080ti", "gtx1080ti", "geforcegtx1080ti", "nvidiageforcegtx1080ti"};
  e.reserve = reserve_mib(300, 64, 64);
  e.reserve_source = kReserveSource;
  e.intra_kind = IntraNodeKind::kPcie;
  e.pcie_gen = 3;
  e.nics_per_node = 1;
  e.nic_bytes_per_s = 1.25 * kGB;  // 10 GbE, a typical workstation / small server
  e.link_source = "PCIe 3.0 x16 per GPU (no NVLink on GeForce Pascal); 10 GbE NIC";
  e.power = tdp_only(250, "NVIDIA GeForce GTX 1080 Ti specifications: graphics card power 250 W");
  return e;
}

GpuCatalogEntry v100(int gib) {
  GpuCatalogEntry e;
  GpuSpec& g = e.gpu;
  g.name = gib == 16 ? "V100-SXM2-16GB" : "V100-SXM2-32GB";
  g.memory_bytes = gib * kGiB;  // 4 HBM2 stacks
  g.peak_fp32_flops_per_s = 15.7 * kTflops;
  g.peak_tf32_flops_per_s = 0;              // tf32 arrived with Ampere
  g.peak_fp16_flops_per_s = 125 * kTflops;  // tensor cores, dense
  g.peak_bf16_flops_per_s = 0;              // bf16 arrived with Ampere
  g.mem_bw_bytes_per_s = 900 * kGB;
  g.sm_count = 80;
  g.nccl_sms = 12;  // assumed: 6 NVLink rings x 2 channels on a DGX-1 (not calibrated)
  g.compute_capability = 70;
  g.kernel_overhead_ns = 2000;
  g.mem_bw_efficiency = 0.85;
  g.efficiency[static_cast<int>(ComputeKind::kGemm)] =
      curve(0.38, 2.5e8,
            "fitted: published-measurements.json case megatron19_1p2B_1gpu (1.2B GPT, batch 8, "
            "one V100: 39 TFLOP/s = 30 % of 125 end to end; with this catalog's memory-bound "
            "kernels, kernel overheads and Adam, gemm 0.38 gives 39 TFLOP/s); docs/scenario.md");
  // Shaped GEMMs (docs/cost-model.md, "GEMM shape"): fitted on the same case with the shape
  // model: 0.38 gives 36.4 TFLOP/s, 0.42 gives 39.1; the step T = A + B / e through the two
  // reaches 39 at 0.4185 -> 0.42 (bench_accuracy; docs/scenario.md, "Efficiency curves").
  g.gemm_tile_efficiency = 0.42;
  g.efficiency[static_cast<int>(ComputeKind::kElementwise)] = curve(
      0.50, 2.5e8, "estimate: elementwise kernels are memory-bound; the FLOP term rarely binds");
  g.efficiency[static_cast<int>(ComputeKind::kConv)] = curve(
      0.50, 2.5e8,
      "estimate: cuDNN convolutions below the fitted gemm on tensor cores, above it in fp32; no "
      "conv case in published-measurements.json");
  g.efficiency[static_cast<int>(ComputeKind::kAttention)] =
      curve(0.25, 2.5e8,
            "estimate: 2/3 of the fitted gemm (megatron19_1p2B_1gpu): batched per-head GEMMs with "
            "head_dim 64-128 run far from peak");
  g.source =
      "NVIDIA Tesla V100 datasheet (SXM2: 15.7 TFLOPS fp32, 125 TFLOPS tensor, 900 GB/s HBM2, "
      "16/32 GB); Volta whitepaper (80 SMs, sm_70)";
  if (gib == 16) {
    e.aliases = {"v100", "v10016gb", "v100sxm216gb", "teslav100", "teslav100sxm216gb", "v100sxm2"};
  } else {
    e.aliases = {"v10032gb", "v100sxm232gb", "teslav100sxm232gb"};
  }
  e.reserve = reserve_mib(400, 128, 128);
  e.reserve_source = kReserveSource;
  e.intra_kind = IntraNodeKind::kNvlinkMesh;
  e.pcie_gen = 3;
  e.nvlink_links_per_gpu = 6;
  e.nvlink_bytes_per_s_per_link = 25 * kGB;
  e.nics_per_node = 4;
  e.nic_bytes_per_s = 12.5 * kGB;  // 100 Gb/s EDR InfiniBand
  e.link_source =
      "NVIDIA DGX-1 (Volta) system architecture white paper: 6 NVLink2 links per V100 at 25 GB/s "
      "per direction, hybrid cube-mesh, PCIe 3.0 x16 to the host, 4x 100 Gb/s EDR InfiniBand";
  e.power = tdp_only(300, "NVIDIA Tesla V100 datasheet: V100 SXM2 max power consumption 300 W");
  return e;
}

GpuCatalogEntry a100(int gib) {
  GpuCatalogEntry e;
  GpuSpec& g = e.gpu;
  g.name = gib == 40 ? "A100-SXM4-40GB" : "A100-SXM4-80GB";
  g.memory_bytes = gib * kGiB;  // 5 active HBM2(e) stacks
  g.peak_fp32_flops_per_s = 19.5 * kTflops;
  g.peak_tf32_flops_per_s = 156 * kTflops;  // dense (312 with 2:4 sparsity)
  g.peak_fp16_flops_per_s = 312 * kTflops;  // dense (624 sparse)
  g.peak_bf16_flops_per_s = 312 * kTflops;  // dense (624 sparse)
  g.mem_bw_bytes_per_s = (gib == 40 ? 1555 : 2039) * kGB;
  g.sm_count = 108;
  g.nccl_sms = 16;  // assumed: 16 collective channels on NVSwitch (not calibrated)
  g.compute_capability = 80;
  g.kernel_overhead_ns = 1500;
  g.mem_bw_efficiency = 0.85;
  g.efficiency[static_cast<int>(ComputeKind::kGemm)] = curve(
      0.68, 6e8,
      "fitted: published-measurements.json case korthikanti_t4_22B_layer_baseline_no_recompute "
      "(22B layer, TP=8, microbatch 4, DGX A100: forward 7.7 ms; 2 TP all-reduces at 230 GB/s "
      "busbw (nccl_a100x8_allreduce_peak) take 1.5 ms; gemm 0.68 puts the rest at 6.1 ms); "
      "docs/scenario.md");
  // Fitted on the same case with the GEMM shape model (docs/cost-model.md, "GEMM shape"): 0.73
  // puts the forward's four GEMMs (M 8192; N x K 2304 x 6144, 6144 x 768, 3072 x 6144,
  // 6144 x 3072) at the 4.38 ms the curve above gives them, so the 7.7 ms forward stays fitted.
  g.gemm_tile_efficiency = 0.73;
  g.efficiency[static_cast<int>(ComputeKind::kElementwise)] = curve(
      0.50, 6e8, "estimate: elementwise kernels are memory-bound; the FLOP term rarely binds");
  g.efficiency[static_cast<int>(ComputeKind::kConv)] = curve(
      0.55, 6e8,
      "estimate: cuDNN convolutions below the fitted gemm (korthikanti_t4_22B_layer_*); no conv "
      "case in published-measurements.json");
  g.efficiency[static_cast<int>(ComputeKind::kAttention)] = curve(
      0.45, 6e8,
      "estimate: 2/3 of the fitted gemm (korthikanti_t4_22B_layer_baseline_no_recompute): unfused "
      "batched per-head GEMMs");
  g.source =
      "NVIDIA A100 Tensor Core GPU datasheet (SXM4: 19.5 TFLOPS fp32, 156 tf32, 312 fp16/bf16 "
      "dense; 1,555 GB/s for 40 GB, 2,039 GB/s for 80 GB); Ampere GA100 whitepaper (108 SMs, "
      "sm_80)";
  if (gib == 40) {
    e.aliases = {"a10040gb", "a100sxm440gb", "a100sxm40gb"};
  } else {
    e.aliases = {"a100", "a10080gb", "a100sxm480gb", "a100sxm80gb", "a100sxm4"};
  }
  e.reserve = reserve_mib(500, 256, 128);
  e.reserve_source = kReserveSource;
  e.intra_kind = IntraNodeKind::kNvswitch;
  e.pcie_gen = 4;
  e.nvlink_links_per_gpu = 12;
  e.nvlink_bytes_per_s_per_link = 25 * kGB;
  e.nvswitch_bytes_per_s = 300 * kGB;  // 12 NVLink3 links x 25 GB/s per direction
  e.nics_per_node = 8;
  e.nic_bytes_per_s = 25 * kGB;  // 200 Gb/s HDR InfiniBand
  e.link_source =
      "NVIDIA DGX A100 user guide / A100 datasheet: NVLink3 12 links, 600 GB/s bidirectional "
      "(300 GB/s per direction) through 6 NVSwitches; PCIe 4.0 x16; 8x 200 Gb/s HDR InfiniBand";
  e.power = tdp_only(400, "NVIDIA A100 Tensor Core GPU datasheet: A100 SXM max TDP 400 W");
  return e;
}

// docs/fp8.md, "FP8 GEMM efficiency": fitted on mbridge2509_llama3_8b_h100_8gpu (with the GEMM
// shape model, docs/cost-model.md, "GEMM shape", and HBM sharing, "Resource sharing"; 0.632
// before the shape model, 0.671 before HBM sharing).
constexpr double kHopperFp8GemmMaxEfficiency = 0.700;
// FP8 grouped GEMMs reach this fraction of a single FP8 GEMM's tile efficiency: FITTED on
// mbridge2509_qwen3_30b_a3b_h100_16gpu (Megatron-Bridge 25.09, Qwen3-30B-A3B on 16 H100, ep 8,
// FP8, 10,494 tokens/s per GPU): 0.31 gives 10,530.8 (0.32: 10,622.3; 1.0: 13,003.6). It stands for
// everything of the experts' path the model does not break out (Transformer Engine's
// GroupedLinear quantises every expert's input on its own, splits it and runs the GEMMs on several
// streams), so it is not a kernel measurement; bf16 grouped GEMMs are not scaled (no case).
constexpr double kHopperFp8GroupedGemmEfficiency = 0.31;

GpuCatalogEntry hopper(bool h200) {
  GpuCatalogEntry e;
  GpuSpec& g = e.gpu;
  g.name = h200 ? "H200-SXM-141GB" : "H100-SXM5-80GB";
  // H100: 5 active 16 GiB HBM3 stacks. H200: 143,771 MiB as nvidia-smi reports (141 GB marketed).
  g.memory_bytes = h200 ? 143771 * kMiB : 80 * kGiB;
  g.peak_fp32_flops_per_s = 67 * kTflops;
  g.peak_tf32_flops_per_s = 494.5 * kTflops;  // datasheet 989 TFLOPS is 2:4 sparse
  g.peak_fp16_flops_per_s = 989.5 * kTflops;  // datasheet 1,979 TFLOPS is 2:4 sparse
  g.peak_bf16_flops_per_s = 989.5 * kTflops;  //
  g.peak_fp8_flops_per_s = 1979 * kTflops;    // datasheet 3,958 TFLOPS is 2:4 sparse
  g.mem_bw_bytes_per_s = (h200 ? 4800 : 3350) * kGB;
  g.sm_count = 132;
  g.nccl_sms = 24;  // assumed: 24 collective channels on NVSwitch (not calibrated)
  g.compute_capability = 90;
  g.kernel_overhead_ns = 1200;
  g.mem_bw_efficiency = 0.85;
  const std::string est = "estimate (no Hopper compute case in published-measurements.json): ";
  g.efficiency[static_cast<int>(ComputeKind::kGemm)] = curve(
      0.62, 2e9,
      est +
          "PyTorch eager GEMMs reach a smaller share of Hopper's 3.2x larger dense peak than the "
          "A100 fit (0.68, korthikanti_t4_22B_layer_baseline_no_recompute)");
  g.efficiency[static_cast<int>(ComputeKind::kElementwise)] =
      curve(0.50, 2e9, est + "elementwise kernels are memory-bound; the FLOP term rarely binds");
  g.efficiency[static_cast<int>(ComputeKind::kConv)] =
      curve(0.50, 2e9, est + "cuDNN convolutions below the gemm curve");
  g.efficiency[static_cast<int>(ComputeKind::kAttention)] =
      curve(0.40, 2e9, est + "2/3 of the gemm curve: unfused batched per-head GEMMs");
  // FP8 GEMMs (docs/fp8.md, "FP8 GEMM efficiency"): max_efficiency FITTED on the case
  // mbridge2509_llama3_8b_h100_8gpu (published-measurements-modern.json; the fit's arithmetic in
  // docs/accuracy.md), the one constant that case sets; half_flops as the gemm curve's. H200 has
  // the same Hopper tensor cores and takes the same figure.
  g.fp8_gemm_efficiency = curve(
      kHopperFp8GemmMaxEfficiency, 2e9,
      "fitted on mbridge2509_llama3_8b_h100_8gpu (Megatron-Bridge 25.09, Llama 3 8B on 8 H100, "
      "FP8, 14,079 tokens/s per GPU; docs/accuracy.md); prior 0.5425 = gemm 0.62 x 1.75/2");
  // FP8 grouped GEMMs (a mixture of experts' experts; docs/cost-model.md, "GEMM shape"): FITTED on
  // mbridge2509_qwen3_30b_a3b_h100_16gpu, the one constant that case sets (docs/accuracy.md).
  g.fp8_grouped_gemm_efficiency = kHopperFp8GroupedGemmEfficiency;
  g.source = h200 ? "NVIDIA H200 Tensor Core GPU datasheet (SXM: 67 TFLOPS fp32; 989 tf32, "
                    "1,979 fp16/bf16 and 3,958 fp8 TFLOPS with sparsity -> dense 494.5 / 989.5 / "
                    "1,979; 141 GB HBM3e, 4.8 TB/s); 132 SMs, sm_90 as H100 SXM"
                  : "NVIDIA H100 Tensor Core GPU datasheet (SXM: 67 TFLOPS fp32; 989 tf32, "
                    "1,979 fp16/bf16 and 3,958 fp8 TFLOPS with sparsity -> dense 494.5 / 989.5 / "
                    "1,979; 80 GB HBM3, 3.35 TB/s); Hopper whitepaper (132 SMs on SXM5, sm_90)";
  if (h200) {
    e.aliases = {"h200", "h200sxm", "h200141gb", "h200sxm141gb"};
  } else {
    e.aliases = {"h100", "h100sxm", "h100sxm5", "h10080gb", "h100sxm80gb", "h100sxm580gb"};
  }
  e.reserve = reserve_mib(600, 384, 160);
  e.reserve_source = kReserveSource;
  e.intra_kind = IntraNodeKind::kNvswitch;
  e.pcie_gen = 5;
  e.nvlink_links_per_gpu = 18;
  e.nvlink_bytes_per_s_per_link = 25 * kGB;
  e.nvswitch_bytes_per_s = 450 * kGB;  // 18 NVLink4 links x 25 GB/s per direction
  e.nics_per_node = 8;
  e.nic_bytes_per_s = 50 * kGB;  // 400 Gb/s NDR InfiniBand (nccl_ndr_nic_peak measures 48.5)
  e.link_source =
      "NVIDIA DGX H100/H200 user guide: NVLink4 18 links, 900 GB/s bidirectional (450 GB/s per "
      "direction) through 4 NVSwitches; PCIe 5.0 x16; 8x 400 Gb/s NDR InfiniBand";
  // H200: no published measurement under a cap (its HBM3e takes a different share of the board's
  // power), so the H100's points are not reused.
  e.power = h200 ? tdp_only(700,
                            "NVIDIA H200 Tensor Core GPU datasheet: H200 SXM max TDP up to "
                            "700 W (configurable)")
                 : h100_sxm_power(
                       "NVIDIA H100 Tensor Core GPU datasheet: H100 SXM max TDP up to "
                       "700 W (configurable)");
  return e;
}

std::vector<GpuCatalogEntry> build_catalog() {
  std::vector<GpuCatalogEntry> c;
  c.push_back(gtx_1080_ti());
  c.push_back(v100(16));
  c.push_back(v100(32));
  c.push_back(a100(40));
  c.push_back(a100(80));
  c.push_back(hopper(false));
  c.push_back(hopper(true));
  // H100 PCIe, H800, L40S, B200, GB200 (core/hardware/gpu_catalog_modern.cpp), after the GPUs above
  // so that their order (and every hint listing them) stays as it was.
  for (GpuCatalogEntry& e : modern_gpu_entries(c[5], c[4])) c.push_back(std::move(e));
  return c;
}

}  // namespace

// [SECTION] Lookup -------------------------------------------------------------------------------

const std::vector<GpuCatalogEntry>& gpu_catalog() {
  static const std::vector<GpuCatalogEntry> kCatalog = build_catalog();
  return kCatalog;
}

std::string normalize_gpu_name(std::string_view name) {
  std::string out;
  for (char ch : name) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (std::isalnum(u)) out.push_back(static_cast<char>(std::tolower(u)));
  }
  return out;
}

const GpuCatalogEntry* find_gpu(std::string_view name) {
  const std::string key = normalize_gpu_name(name);
  if (key.empty()) return nullptr;
  for (const GpuCatalogEntry& e : gpu_catalog()) {
    if (normalize_gpu_name(e.gpu.name) == key) return &e;
    for (const std::string& a : e.aliases) {
      if (a == key) return &e;
    }
  }
  return nullptr;
}

std::vector<std::string> gpu_names() {
  std::vector<std::string> names;
  for (const GpuCatalogEntry& e : gpu_catalog()) names.push_back(e.gpu.name);
  return names;
}

std::string gpu_name_hint(std::string_view unknown) {
  std::vector<std::string> candidates;
  for (const GpuCatalogEntry& e : gpu_catalog()) {
    candidates.push_back(normalize_gpu_name(e.gpu.name));
    for (const std::string& a : e.aliases) candidates.push_back(a);
  }
  std::string hint;
  const std::string near = nearest_candidate(normalize_gpu_name(unknown), candidates);
  if (!near.empty()) {
    const GpuCatalogEntry* e = find_gpu(near);
    hint = "did you mean " + e->gpu.name + "? ";
  }
  hint += "valid: ";
  const std::vector<std::string> names = gpu_names();
  for (std::size_t i = 0; i < names.size(); ++i) hint += (i ? ", " : "") + names[i];
  hint += ", or an inline object";
  return hint;
}

// [SECTION] Topology presets ---------------------------------------------------------------------

// DGX-1V hybrid cube-mesh, as `nvidia-smi topo -m` prints it (NV1 = 1 link, NV2 = 2 links):
//   GPU0: 1 NV1, 2 NV1, 3 NV2, 4 NV2      GPU4: 0 NV2, 5 NV1, 6 NV1, 7 NV2
//   GPU1: 0 NV1, 2 NV2, 3 NV1, 5 NV2      GPU5: 1 NV2, 4 NV1, 6 NV2, 7 NV1
//   GPU2: 0 NV1, 1 NV2, 3 NV2, 6 NV1      GPU6: 2 NV1, 4 NV1, 5 NV2, 7 NV2
//   GPU3: 0 NV2, 1 NV1, 2 NV2, 7 NV1      GPU7: 3 NV1, 4 NV2, 5 NV1, 6 NV2
// Each GPU uses all 6 of its links; 16 pairs (the 12 cube edges plus the diagonals of two faces,
// {0,1,2,3} and {4,5,6,7}), 24 links in all.
std::vector<NvlinkPair> dgx1_nvlink_pairs() {
  return {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1}, {1, 5, 2}, {2, 3, 2},
          {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
}

IntraNodeSpec default_intra(const GpuCatalogEntry& e, int gpus_per_node) {
  IntraNodeSpec s;
  s.pcie_gen = e.pcie_gen;
  s.pcie_lanes = 16;
  s.host_bridge_bytes_per_s = 0;  // derived by the topology: one x16 link of the same generation
  s.nvlink_bytes_per_s_per_link = e.nvlink_bytes_per_s_per_link;
  s.nvswitch_bytes_per_s = e.nvswitch_bytes_per_s;
  if (e.intra_kind == IntraNodeKind::kNvswitch) {
    s.kind = IntraNodeKind::kNvswitch;
  } else if (e.intra_kind == IntraNodeKind::kNvlinkMesh && gpus_per_node == 8) {
    s.kind = IntraNodeKind::kNvlinkMesh;
    s.nvlink_pairs = dgx1_nvlink_pairs();
  } else {
    s.kind = IntraNodeKind::kPcie;
  }
  return s;
}

ClusterSpec catalog_cluster(const std::string& gpu, int nodes, int gpus_per_node) {
  const GpuCatalogEntry* e = find_gpu(gpu);
  if (e == nullptr) throw std::invalid_argument("no catalogue GPU " + gpu);
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.gpu = e->gpu;
  c.reserve = e->reserve;
  c.intra = default_intra(*e, gpus_per_node);
  c.nics_per_node = e->nics_per_node;
  c.nic_bytes_per_s = e->nic_bytes_per_s;
  return c;
}

}  // namespace csim::core
