// docs/scenario.md, "nccl"; docs/cost-model.md, "Algorithm gates".
#include "core/scenario/parse_nccl.hpp"

namespace csim::core::parse {

// NCCL 2.2x: src/graph/search.cc builds no NVLS graph without an NVSwitch or below sm_90;
// src/graph/tuning.cc disables NVLS across nodes unless CollNet is enabled, and CollNet without
// a CollNet (SHARP) network.
std::string nccl_algo_gate(CollectiveAlgo algo, const ClusterSpec& c) {
  const bool nvswitch = c.intra.kind == IntraNodeKind::kNvswitch;
  if (algo == CollectiveAlgo::kNvls) {
    if (!nvswitch || c.gpu.compute_capability < 90)
      return "NVLS (NVLink SHARP) needs Hopper or later GPUs (sm_90+) on an NVSwitch; " +
             c.gpu.name + " (sm_" + std::to_string(c.gpu.compute_capability) + ")" +
             (nvswitch ? "" : " without an NVSwitch") + " has none";
    if (c.nodes > 1 && !c.fabric.sharp)
      return "NVLS across nodes needs CollNet: NCCL disables it on " + std::to_string(c.nodes) +
             " nodes unless the fabric's switches reduce (cluster.fabric.sharp)";
  }
  // NVLSTree (docs/cost-model.md, "NVLSTree"): NVLS inside every node, so NVLS's graph gate
  // (sm_90+, NVSwitch, two or more GPUs: NVLS needs two channels); tuning.cc disables it on one
  // node. It needs no CollNet: the trees run over the ordinary network.
  if (algo == CollectiveAlgo::kNvlsTree) {
    if (!nvswitch || c.gpu.compute_capability < 90)
      return "NVLSTree runs NVLS (NVLink SHARP) inside every node: it needs Hopper or later GPUs "
             "(sm_90+) on an NVSwitch; " +
             c.gpu.name + " (sm_" + std::to_string(c.gpu.compute_capability) + ")" +
             (nvswitch ? "" : " without an NVSwitch") + " has none";
    if (c.nodes < 2) return "NCCL disables NVLSTree on a single node (use \"nvls\" there)";
    if (c.gpus_per_node < 2) return "NVLSTree needs two or more GPUs per node";
  }
  // PAT (docs/cost-model.md, "PAT"): tuning.cc ncclPatEnable: sm_60+ (CUDA atomics) and one GPU
  // per node (nNodes == nRanks).
  if (algo == CollectiveAlgo::kPat) {
    if (c.gpu.compute_capability < 60)
      return "PAT needs sm_60 or later GPUs; " + c.gpu.name + " is sm_" +
             std::to_string(c.gpu.compute_capability);
    if (c.gpus_per_node != 1 || c.nodes < 2)
      return "NCCL runs PAT only with one GPU per node on two or more nodes (nNodes == nRanks); "
             "this cluster has " +
             std::to_string(c.nodes) + " node(s) of " + std::to_string(c.gpus_per_node) + " GPUs";
  }
  if (algo == CollectiveAlgo::kCollnet) {
    if (c.nodes < 2) return "CollNet reduces in the network switches: it needs two or more nodes";
    if (!c.fabric.sharp)
      return "CollNet needs InfiniBand switches with SHARP (cluster.fabric.sharp is false)";
  }
  return {};
}

void check_nccl_algo(Ctx& ctx, const std::string& path, const Scenario& sc) {
  const std::string why = nccl_algo_gate(sc.nccl.algo, sc.cluster);
  if (!why.empty())
    ctx.fail(path, std::string("\"") + to_string(sc.nccl.algo) + "\" cannot run here: " + why,
             sc.nccl.algo == CollectiveAlgo::kNvls || sc.nccl.algo == CollectiveAlgo::kCollnet
                 ? "use \"auto\", \"ring\" or \"tree\", or set cluster.fabric.sharp where the "
                   "switches have SHARP"
                 : "use \"auto\" (NCCL's gates choose), \"ring\" or \"tree\"");
}

}  // namespace csim::core::parse
