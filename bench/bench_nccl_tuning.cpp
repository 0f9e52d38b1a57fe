// Our collective model next to NCCL's own tuning model (docs/cost-model.md, "Comparison with
// NCCL's tuning model"). NCCL predicts a collective's time as lat + bytes / bw from the tables
// ncclTopoTuneModel fills (src/graph/tuning.cc) for the graphs its search finds
// (src/graph/search.cc); ncclGroupSimulateEnd returns that estimate but needs a live communicator,
// so this bench evaluates the same formulas itself (our code, written from reading tuning.cc and
// enqueue.cc of NCCL 2.2x) on the same topology as our plan_collective, and prints both.
//
//   build/release/bench/bench_nccl_tuning            # markdown table, DGX A100 and DGX H100
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cost/collective_cost.hpp"
#include "core/cost/nccl_channels.hpp"
#include "core/hardware/gpu_catalog.hpp"
#include "core/hardware/topology.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// NCCL's algorithms and protocols, in tuning.cc's order.
enum Algo { kTree, kRing, kCollnetDirect, kCollnetChain, kNvls, kNvlsTree, kPat, kNumAlgos };
enum Proto { kLL, kLL128, kSimple, kNumProtos };
const char* const kAlgoName[] = {"Tree",     "Ring", "CollNetDirect", "CollNetChain", "NVLS",
                                 "NVLSTree", "PAT"};
const char* const kProtoName[] = {"LL", "LL128", "Simple"};

// tuning.cc, ncclTunerConstantsDefaults: baseLatencies [algo][proto] and hwLatencies
// [NVLINK, PCI, NET][algo][proto], microseconds.
const double kBaseLat[kNumAlgos][kNumProtos] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0},
                                                {0, 0, 0},        {0, 0, 0},        {0, 0, 0},
                                                {8.0, 8.0, 8.0}};
const double kHwLat[3][kNumAlgos][kNumProtos] = {
    {{0.6, 1.25, 4.0},
     {0.6, 1.9, 3.4},
     {0, 0, 3.7},
     {0, 0, 2.8},
     {0, 0, 25},
     {0, 0, 25},
     {0, 0, 4.0}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
    {{5.0, 8.5, 14},
     {2.7, 4.0, 14.0},
     {0, 0, 31},
     {0, 0, 30},
     {0, 0, 18},
     {0, 0, 20.9},
     {0, 0, 14}}};
// tuning.cc: nvlsEfficiency by compute-capability index (Volta, Ampere, Hopper, Blackwell).
const double kNvlsEff[4] = {0.0, 0.0, 0.85, 0.74};
// tuning.cc: treeCorrectionFactor [proto][log2(bytes / 64)].
const double kTreeCorr[kNumProtos][24] = {{1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6,  .5,
                                           .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
                                          {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6,  .6,
                                           .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0, 1.0},
                                          {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
                                           .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

struct System {
  std::string name;
  ClusterSpec cluster;
  bool amd_cpu;  // tuning.cc: multi-node LL limit and getNetOverhead by CPU vendor
};

System dgx(const char* gpu, const char* label, int nodes, bool amd, int gpus_per_node = 8) {
  const ClusterSpec c = catalog_cluster(gpu, nodes, gpus_per_node);
  return {std::string(label) + " x" + std::to_string(nodes), c, amd};
}

struct NcclTime {
  double us = -1;  // -1: NCCL would not run it
  int algo = 0, proto = 0;
};

int log2i(long long n) {
  int l = 0;
  while (n >>= 1) ++l;
  return l;
}

// ncclTopoTuneModel + ncclTopoGetAlgoTime for one collective (coll: 0 all-reduce, 1 all-gather,
// 2 reduce-scatter) of `bytes` on `sys`, the fastest algorithm x protocol NCCL enables by default
// (`only` >= 0: that algorithm alone, as NCCL_ALGO forces it).
NcclTime nccl_time(const System& sys, const Topology& topo, int coll, double bytes, int only = -1) {
  const ClusterSpec& c = sys.cluster;
  const int nNodes = c.nodes, nRanks = c.nodes * c.gpus_per_node;
  const double ppn = static_cast<double>(nRanks) / nNodes;
  const int cc = c.gpu.compute_capability;
  const NcclArch arch = nccl_arch(cc);
  std::vector<int> all(nRanks);
  for (int i = 0; i < nRanks; ++i) all[i] = i;
  const NcclRingGraph ring = nccl_ring_graph(topo, all);  // tree graph: the same channels
  const bool nvls_ok = c.intra.kind == IntraNodeKind::kNvswitch && cc >= 90;
  // NVLS graph: one channel per GPU (search.cc forces min = max channels on one node), at the
  // fastest intra speed with channels x speed <= the GPU's bandwidth x g / (g - 1).
  const NcclRingGraph one =
      nccl_ring_graph(topo, std::vector<int>(all.begin(), all.begin() + c.gpus_per_node));
  const double gpu_bw = one.graph_channels * one.graph_bw_bytes_per_s / 1e9;
  const int nvls_ch = c.gpus_per_node;
  double nvls_bw = 0;
  for (double s : {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0})
    if (s * nvls_ch <= gpu_bw * nvls_ch / (nvls_ch - 1)) {
      nvls_bw = s;
      break;
    }
  // Across nodes each NVLS channel's head GPU uses a NIC: the fastest sm90 inter speed
  // (search.cc sm90SpeedArrayInter) that the NIC carries.
  double nic_speed = 0;
  for (double s : {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0})
    if (s <= c.nic_bytes_per_s / 1e9) {
      nic_speed = s;
      break;
    }
  const double nvls_inter = nNodes > 1 ? std::min(nvls_bw, nic_speed) : nvls_bw;
  const int idx2 = nNodes <= 2 ? nNodes - 1 : 2;
  const int idx1 = nNodes == 1 ? static_cast<int>(arch) : (sys.amd_cpu ? 1 : 0);
  const double llMax[4][3] = {
      {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
  const double llMaxBw = llMax[idx1][idx2];
  const double perChTree = nccl_per_ch_tree_gbps(arch, nNodes);
  const double perChRingLL128 = nccl_per_ch_ring_ll128_gbps(arch, nNodes);
  const double perChTreeLL128 = nccl_per_ch_tree_ll128_gbps(arch, nNodes);
  const double perChNvlsTree[4][3] = {
      {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
  const int nsteps = coll == 0 ? 2 * (nRanks - 1) : nRanks - 1;
  const int intraHw = 0;  // NVLink (graph typeIntra LINK_NVL)
  NcclTime best;
  for (int a = 0; a < kNumAlgos; ++a) {
    if (only >= 0 && a != only) continue;
    if (coll != 0 && a != kPat && a != kRing && a != kNvls && a != kCollnetDirect) continue;
    if (coll == 0 && a == kPat) continue;
    if (a == kCollnetDirect || a == kCollnetChain) continue;  // no CollNet plugin (default off)
    if ((a == kNvls || a == kNvlsTree) && (!nvls_ok || c.gpus_per_node < 2)) continue;
    if (a == kNvls && nNodes > 1) continue;       // multi-node NVLS needs CollNet
    if (a == kNvlsTree && nNodes == 1) continue;  // disabled on one node
    if (a == kNvls && coll != 0 && nNodes > 1) continue;
    if (a == kPat && nNodes != nRanks) continue;  // ncclPatEnable: one GPU per node
    for (int p = 0; p < kNumProtos; ++p) {
      if ((a == kNvls || a == kNvlsTree || a == kPat) && p != kSimple) continue;
      const bool nvls = a == kNvls || a == kNvlsTree;
      const int nCh = nvls ? nvls_ch : ring.graph_channels;
      double bw = ring.graph_bw_bytes_per_s / 1e9;  // bwIntra (nNodes <= 2) or bwInter: equal
      if (nvls) {
        double intraBw = nvls_bw * kNvlsEff[static_cast<int>(arch)] * (nCh - 1) / nCh;
        intraBw *= coll == 0 ? 2.0 : (ppn - 1) / ppn;
        const double interBw = nvls_inter * ((nNodes <= 2 && a == kNvlsTree) ? 2 : 1);
        bw = std::min(intraBw, interBw);
        if (a == kNvlsTree) bw = std::min(bw, perChNvlsTree[static_cast<int>(arch)][idx2]);
      }
      double busBw = nCh * bw;
      if (a == kRing && p == kLL) busBw = std::min(llMaxBw, busBw * .5);
      if (a == kRing && p == kLL128) busBw = std::min(busBw * 0.92, nCh * perChRingLL128);
      if (a == kTree && coll == 0) busBw = std::min(busBw * .92, nCh * perChTree);
      if (a == kTree && p == kLL) busBw = std::min(busBw * 1.0 / 3.8, llMaxBw);
      if (a == kTree && p == kLL128)
        busBw = std::min(busBw * (nNodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nCh * perChTreeLL128);
      if (a == kPat) busBw *= .75;
      if (!(a != kRing && coll != 0)) {
        double ratio = 1.0;
        if (a == kRing || nvls)
          ratio *= static_cast<double>(nRanks) / nsteps;
        else
          ratio *= .5;
        busBw *= ratio;
      }
      // Latency.
      double lat = kBaseLat[a][p];
      double intraLat = kHwLat[intraHw][a][p];
      double interLat = ppn == 1 ? kHwLat[2][kTree][p] : kHwLat[2][a][p];
      if (a == kRing) {
        double netOverhead = 0;
        if (nNodes > 1) netOverhead = (sys.amd_cpu ? 2.0 : 1.0) * (p == kSimple ? 3 : 1);
        intraLat = std::max(intraLat, netOverhead);
        const int nInter = nNodes == 1 ? 0 : coll == 0 ? 2 * (nNodes - 1) : nNodes - 1;
        lat += (nsteps - nInter) * intraLat + nInter * interLat;
      } else if (a == kTree) {
        lat += 2 * ((nRanks / nNodes - 1) * intraLat + log2i(nNodes) * interLat);
      } else if (a == kNvls) {
        lat = intraLat + (nNodes > 1 ? interLat : 0);
      } else if (a == kNvlsTree) {
        lat += intraLat + 2 * log2i(nNodes) * interLat;
      } else if (a == kPat) {
        lat += log2i(nNodes) * (interLat / 3.5) + nRanks * 2.8;
      }
      // ncclTopoGetAlgoTime.
      double b = busBw;
      const int logSize = log2i(static_cast<long long>(bytes) >> 6);
      if (a == kTree && coll == 0 && logSize >= 0 && logSize < 23) b *= kTreeCorr[p][logSize];
      if (a == kRing && p == kSimple && nNodes > 1 && coll == 0 &&
          bytes / (ring.comm_channels * nRanks) >= 64)
        lat *= cc < 80 ? 1.9 : 1.4;
      if (!(b > 0)) continue;
      const double t = lat + bytes / (1000 * b);
      if (best.us < 0 || t < best.us) best = {t, a, p};
    }
  }
  return best;
}

const char* our_algo(CollectiveAlgo a) {
  return to_string(a);
}

// One row: ours (plan_collective, `algo` forced or auto) next to NCCL's model (`nccl_algo` forced,
// or its own choice).
void print_row(const System& sys, int k, double mib, CollectiveAlgo algo, int nccl_algo) {
  static const CollectiveKind kinds[] = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                                         CollectiveKind::kReduceScatter};
  static const char* const kind_name[] = {"all_reduce", "all_gather", "reduce_scatter"};
  const Topology topo(sys.cluster);
  const int p = sys.cluster.nodes * sys.cluster.gpus_per_node;
  std::vector<int> all(p);
  for (int i = 0; i < p; ++i) all[i] = i;
  const double bytes = mib * 1048576.0;
  const TransferPlan plan = plan_collective(topo, CommParams{}, kinds[k], algo, all, -1, bytes);
  const double ours_us = static_cast<double>(plan.predicted_ns) * 1e-3;
  const double f = busbw_factor(kinds[k], p);
  const NcclTime n = nccl_time(sys, topo, k, bytes, nccl_algo);
  char size[32];
  std::snprintf(size, sizeof size, mib >= 1024 ? "%.0f GiB" : "%.0f MiB",
                mib >= 1024 ? mib / 1024 : mib);
  std::printf("| %s | %s | %s | %.1f | %.1f | %s/%s | %.1f | %.1f | %s/%s | %.2f |\n",
              sys.name.c_str(), kind_name[k], size, ours_us, bytes / (ours_us * 1e3) * f,
              our_algo(plan.algo), to_string(plan.proto), n.us, bytes / (n.us * 1e3) * f,
              kAlgoName[n.algo], kProtoName[n.proto], ours_us / n.us);
}

}  // namespace

int main() {
  std::vector<System> systems;
  for (int nodes : {1, 2, 8}) {
    systems.push_back(dgx("A100-SXM4-80GB", "DGX A100", nodes, true));   // AMD EPYC 7742
    systems.push_back(dgx("H100-SXM5-80GB", "DGX H100", nodes, false));  // Intel Xeon 8480C
  }
  const char* const header =
      "| system | collective | size | ours: time (us) | ours: busbw (GB/s) | ours: algo/proto | "
      "NCCL model: time (us) | NCCL model: busbw (GB/s) | NCCL: algo/proto | ours / NCCL time |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  const double sizes[] = {1.0, 16.0, 256.0, 1024.0, 8192.0};
  // Table 1: both automatic choices.
  std::printf("%s", header);
  for (const System& sys : systems)
    for (int k = 0; k < 3; ++k)
      for (double mib : sizes) print_row(sys, k, mib, CollectiveAlgo::kAuto, -1);
  // Table 2: NVLS all-gather / reduce-scatter on one H100 node, forced on both sides (NCCL_ALGO;
  // ours nccl.algo).
  std::printf("\n%s", header);
  const System h1 = dgx("H100-SXM5-80GB", "DGX H100", 1, false);
  for (int k = 1; k < 3; ++k)
    for (double mib : sizes) print_row(h1, k, mib, CollectiveAlgo::kNvls, kNvls);
  // Table 3: the automatic choices on nodes of one GPU, where PAT competes with the ring.
  std::printf("\n%s", header);
  for (int nodes : {8, 64}) {
    System one = dgx("H100-SXM5-80GB", "H100, 1 GPU per node,", nodes, false, 1);
    for (int k = 1; k < 3; ++k)
      for (double mib : sizes) print_row(one, k, mib, CollectiveAlgo::kAuto, -1);
  }
  // Table 4: NVLSTree all-reduce forced on both sides (NCCL_ALGO=NVLSTree; ours nccl.algo) on 2
  // and 8 DGX H100 nodes.
  std::printf("\n%s", header);
  for (int nodes : {2, 8}) {
    const System h = dgx("H100-SXM5-80GB", "DGX H100", nodes, false);
    for (double mib : sizes) print_row(h, 0, mib, CollectiveAlgo::kNvlsTree, kNvlsTree);
  }
  // Table 5: PAT forced on both sides on nodes of one GPU (all-gather; the reduce-scatter is the
  // same in both models).
  std::printf("\n%s", header);
  for (int nodes : {8, 64}) {
    const System one = dgx("H100-SXM5-80GB", "H100, 1 GPU per node,", nodes, false, 1);
    for (double mib : sizes) print_row(one, 1, mib, CollectiveAlgo::kPat, kPat);
  }
  return 0;
}
