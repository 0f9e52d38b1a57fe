// Built-in GPU catalog: dense datasheet peaks per dtype, memory, bandwidth, efficiency curves,
// default memory reserve and default intra/inter-node link figures per GPU (docs/scenario.md, "GPU
// catalog", lists every figure with its source).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/hardware/power_limit.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

struct GpuCatalogEntry {
  GpuSpec gpu;                             // figures, efficiency curves, sources
  std::vector<std::string> aliases;        // accepted names, compared after normalize_gpu_name()
  MemoryReserve reserve;                   // default cluster.reserve for this GPU
  std::string reserve_source;              // why those reserve figures
  IntraNodeKind intra_kind;                // typical intra-node fabric of servers with this GPU
  int pcie_gen = 3;                        // host link generation (x16)
  int nvlink_links_per_gpu = 0;            // NVLink ports per GPU (0 = none)
  double nvlink_bytes_per_s_per_link = 0;  // per link per direction
  double nvswitch_bytes_per_s = 0;         // per GPU per direction through NVSwitch (0 = none)
  int nics_per_node = 1;                   // typical server's compute NICs
  double nic_bytes_per_s = 0;              // per NIC per direction
  std::string link_source;                 // datasheet / system guide for the link figures
  PowerProfile power;  // datasheet TDP and published clocks under a power cap (power_limit.hpp)
};

// All entries, in a fixed order: GTX 1080 Ti to H200 oldest first, then H100 PCIe, H800, L40S,
// B200 and GB200 (core/hardware/gpu_catalog_modern.cpp).
const std::vector<GpuCatalogEntry>& gpu_catalog();

// Lower-case alphanumerics only: "A100-SXM4-80GB" -> "a100sxm480gb", "a100_80gb" -> "a10080gb".
std::string normalize_gpu_name(std::string_view name);

// The entry whose name or an alias matches `name` after normalisation; nullptr when none does.
const GpuCatalogEntry* find_gpu(std::string_view name);

// Canonical names of all entries ("GTX-1080-Ti", "V100-SXM2-16GB", ...), for error hints.
std::vector<std::string> gpu_names();

// "did you mean X? valid: A, B, C" for an unknown GPU name.
std::string gpu_name_hint(std::string_view unknown);

// The DGX-1 (Volta) hybrid cube-mesh: 8 V100, 6 NVLink2 ports each, 16 GPU pairs, 24 links
// (NVIDIA DGX-1 System Architecture white paper, Fig. 3; nvidia-smi topo -m on a DGX-1V).
std::vector<NvlinkPair> dgx1_nvlink_pairs();

// Default intra-node spec for `gpus_per_node` GPUs of this kind: NVSwitch GPUs -> nvswitch;
// V100 with exactly 8 GPUs per node -> the DGX-1 NVLink mesh; otherwise PCIe of the GPU's
// generation.
IntraNodeSpec default_intra(const GpuCatalogEntry& e, int gpus_per_node);

// A cluster of `nodes` x `gpus_per_node` catalogue GPUs `gpu` (find_gpu's names) with the entry's
// memory reserve, default_intra's interconnect and the entry's NICs, as the scenario parser
// builds one from "cluster": {"gpu": ...}. Throws std::invalid_argument for an unknown GPU.
ClusterSpec catalog_cluster(const std::string& gpu, int nodes, int gpus_per_node);

}  // namespace csim::core
