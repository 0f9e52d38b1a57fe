// NCCL's channels (docs/cost-model.md, "Channels").
//
// Index: [SECTION] Tables, [SECTION] Graph search, [SECTION] Channels by size and caps
#include "core/cost/nccl_channels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"

namespace csim::core {

// [SECTION] Tables -------------------------------------------------------------------------------

namespace {

constexpr double kGB = 1e9;

// src/graph/search.cc: speedArrayIntra / sm90SpeedArrayIntra / sm100SpeedArrayIntra and the
// Inter arrays, GB/s per channel, tried from the fastest down.
const std::vector<double> kSpeedIntra{40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0,
                                      9.0,  7.0,  6.0,  5.0,  4.0,  3.0};
const std::vector<double> kSpeedInter{48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                      7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
const std::vector<double> kSpeedIntraSm90{60.0, 50.0, 40.0, 30.0, 24.0, 20.0,
                                          15.0, 12.0, 11.0, 6.0,  3.0};
const std::vector<double> kSpeedInterSm90{48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                          15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
const std::vector<double> kSpeedIntraSm100{90.0, 80.0, 70.0, 60.0, 50.0, 45.0,
                                           40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
const std::vector<double> kSpeedInterSm100{96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0,
                                           30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0,
                                           6.0,  3.0,  2.4,  1.2,  0.24, 0.12};

// src/include/device.h: MAXCHANNELS 64; the search's maxChannels is MAXCHANNELS / 2.
constexpr int kMaxChannels = 64;
// src/include/device.h: NCCL_LL_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640,
// NCCL_SIMPLE_MAX_NTHREADS 512; src/include/comm.h: NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD 8, 8,
// 64; tuning.cc multiplies the ring LL threshold by nRanks and uses 256 Simple threads where the
// ring's bandwidth is at most PCI_BW (src/graph/topo.h: 12 GB/s).
constexpr int kLlThreads = 512, kLl128Threads = 640, kSimpleThreads = 512;
constexpr int kLlThreshold = 8, kLl128Threshold = 8, kSimpleThreshold = 64;
constexpr double kPciBwGbps = 12.0;

int row(int nodes) {
  return nodes <= 1 ? 0 : nodes == 2 ? 1 : 2;
}
int col(NcclArch a) {
  return static_cast<int>(a);
}

}  // namespace

NcclArch nccl_arch(int cc) {
  return cc >= 100  ? NcclArch::kBlackwell
         : cc >= 90 ? NcclArch::kHopper
         : cc >= 80 ? NcclArch::kAmpere
                    : NcclArch::kVolta;
}

// src/graph/tuning.cc, ncclTunerConstantsDefaults: llMaxBws, perChMaxRingLL128Bws,
// perChMaxTreeBws, perChMaxTreeLL128Bws (GB/s; rows Volta/Ampere/Hopper/Blackwell, columns one
// node / two nodes / more). Multi-node LL rows are indexed by CPU vendor in NCCL (Intel row 0);
// we take the Intel row.
double nccl_ll_max_bw_gbps(NcclArch a, int nodes) {
  static const double t[4][3] = {
      {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
  return nodes <= 1 ? t[col(a)][0] : t[0][row(nodes)];
}
double nccl_per_ch_ring_ll128_gbps(NcclArch a, int nodes) {
  static const double t[4][3] = {
      {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}};
  return t[col(a)][row(nodes)];
}
double nccl_per_ch_tree_gbps(NcclArch a, int nodes) {
  static const double t[4][3] = {
      {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
  return t[col(a)][row(nodes)];
}
double nccl_per_ch_tree_ll128_gbps(NcclArch a, int nodes) {
  static const double t[4][3] = {
      {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
  return t[col(a)][row(nodes)];
}
// perChMaxNVLSTreeBws (same file, table and layout; the one-node column is 0 on Hopper and
// Blackwell: NVLSTree is disabled on one node).
double nccl_per_ch_nvls_tree_gbps(NcclArch a, int nodes) {
  static const double t[4][3] = {
      {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
  return t[col(a)][row(nodes)];
}

// [SECTION] Graph search -------------------------------------------------------------------------

double NcclRingGraph::channel_bytes_per_s() const {
  return graph_channels * graph_bw_bytes_per_s / comm_channels;
}

// docs/cost-model.md, "Channels": search.cc ncclTopoCompute, reduced to rings of equal channels.
// Pass 1: from the fastest speed s that fits, a solution has n(s) channels (one node: floor(T/s)
// with T the GPU's ring bandwidth; across nodes: floor(nic/s) per NIC on `rails` NICs, at most
// floor(T/s)); lower speeds are tried while s / best > 0.49 and kept when n(s) * s is strictly
// larger. ncclTopoDupChannels doubles the channels (halving s) when s >= 25 GB/s, except on
// sm > 80 when s < 50 and more than 4 channels. Pass 2 raises s again while n * s still fits.
// connect.cc ncclTopoPostset: the communicator runs 2 x the graph's channels (at most 64).
NcclRingGraph nccl_ring_graph(int cc, bool inter, double total_bytes_per_s, double nic_bytes_per_s,
                              int rails, int nodes) {
  const std::vector<double>& speeds = cc >= 100  ? (inter ? kSpeedInterSm100 : kSpeedIntraSm100)
                                      : cc >= 90 ? (inter ? kSpeedInterSm90 : kSpeedIntraSm90)
                                                 : (inter ? kSpeedInter : kSpeedIntra);
  const double total = total_bytes_per_s / kGB;
  const double nic = nic_bytes_per_s / kGB;
  const double max_bw = inter ? std::min(nic, total) : total;
  auto channels_at = [&](double s) {
    int n = static_cast<int>(std::floor(total / s + 1e-9));
    if (inter) n = std::min(n, rails * static_cast<int>(std::floor(nic / s + 1e-9)));
    return std::min(n, kMaxChannels / 2);
  };
  NcclRingGraph g;
  g.nodes = nodes;
  std::size_t i = 0;
  while (i + 1 < speeds.size() && (speeds[i] > max_bw || channels_at(speeds[i]) < 1)) ++i;
  int best_n = std::max(1, channels_at(speeds[i]));
  double best_s = channels_at(speeds[i]) >= 1 ? speeds[i] : std::max(0.1, max_bw);
  for (std::size_t j = i + 1; j < speeds.size() && speeds[j] / best_s > 0.49; ++j) {
    const int n = channels_at(speeds[j]);
    if (n * speeds[j] > best_n * best_s + 1e-9) {
      best_n = n;
      best_s = speeds[j];
    }
  }
  // ncclTopoDupChannels.
  if (best_s >= 25.0 && !(cc > 80 && best_s < 50.0 && best_n > 4)) {
    const int dup = std::min(best_n * 2, kMaxChannels / 2);
    best_s /= (dup + best_n - 1) / best_n;
    best_n = dup;
  }
  // Pass 2: a faster speed with the same channels, if it still fits.
  for (std::size_t j = 0; j < speeds.size(); ++j) {
    if (speeds[j] > best_s && channels_at(speeds[j]) >= best_n) {
      best_s = speeds[j];
      break;
    }
  }
  g.graph_channels = best_n;
  g.graph_bw_bytes_per_s = best_s * kGB;
  g.comm_channels = std::min(kMaxChannels, 2 * best_n);
  return g;
}

NcclRingGraph nccl_ring_graph(const Topology& topo, const std::vector<int>& gpus) {
  CSIM_ASSERT(!gpus.empty());
  // The GPU's ring bandwidth: the slowest hop of the first ring inside a node, times the rings
  // (an NVLink mesh's channels spread over its links); PCIe or NVSwitch: the hop itself.
  const std::vector<std::vector<int>> rings = topo.rings(gpus);
  double hop = std::numeric_limits<double>::infinity();
  const std::vector<int>& r = rings.front();
  for (std::size_t k = 0; r.size() > 1 && k < r.size(); ++k) {
    const int a = r[k], b = r[(k + 1) % r.size()];
    if (topo.node_of(a) == topo.node_of(b))
      hop = std::min(hop, topo.route_bandwidth(Endpoint::gpu(a), Endpoint::gpu(b)));
  }
  int first_node = topo.node_of(gpus.front()), nodes = 1;
  std::vector<char> seen(static_cast<std::size_t>(topo.nodes()), 0);
  seen[first_node] = 1;
  int per_node = 0;
  for (int gpu : gpus) {
    if (!seen[topo.node_of(gpu)]) {
      seen[topo.node_of(gpu)] = 1;
      ++nodes;
    }
    if (topo.node_of(gpu) == first_node) ++per_node;
  }
  const int cc = topo.gpu_spec().compute_capability;
  if (nodes == 1) {
    const double total = std::isfinite(hop) ? hop * static_cast<double>(rings.size()) : 1e12;
    return nccl_ring_graph(cc, false, total, 0, 0, 1);
  }
  // Across nodes the channels use the NICs of the GPUs in the group (one rail per GPU, at most
  // nics_per_node); a node of one GPU feeds its own NIC only.
  const int rails = std::max(1, std::min(per_node, topo.nics_per_node()));
  const double nic = topo.nic_line_rate_bytes_per_s();
  const double total = std::isfinite(hop) ? hop : nic * rails;
  return nccl_ring_graph(cc, true, total, nic, rails, nodes);
}

// [SECTION] Channels by size and caps ------------------------------------------------------------

// docs/cost-model.md, "Channels", "Channels by size" (enqueue.cc, topoGetAlgoInfo).
int nccl_channels_for(const NcclRingGraph& g, CollectiveAlgo algo, NcclProto proto, int nranks,
                      double bytes) {
  const bool ring_graph_on_pcie =
      g.graph_channels * g.graph_bw_bytes_per_s / kGB <= kPciBwGbps;  // tuning.cc, Simple threads
  const int nt = proto == NcclProto::kLL                                 ? kLlThreads
                 : proto == NcclProto::kLL128                            ? kLl128Threads
                 : (algo == CollectiveAlgo::kRing && ring_graph_on_pcie) ? 256
                                                                         : kSimpleThreads;
  double threshold = proto == NcclProto::kLL      ? kLlThreshold
                     : proto == NcclProto::kLL128 ? kLl128Threshold
                                                  : kSimpleThreshold;
  if (proto == NcclProto::kLL && algo != CollectiveAlgo::kTree) threshold *= nranks;
  int nc = g.comm_channels;
  while (nc >= 2 && bytes < static_cast<double>(nc) * nt * threshold) --nc;
  return nc;
}

// docs/cost-model.md, "Channels", "Per-channel limits" (tuning.cc, ncclTopoTuneModel).
double nccl_busbw_cap(const NcclRingGraph& g, NcclArch arch, NcclProto proto, bool tree,
                      int channels) {
  const double c = channels, b = g.channel_bytes_per_s();
  const double dup = static_cast<double>(g.comm_channels) / g.graph_channels;
  switch (proto) {
    case NcclProto::kLL: {
      const double lim = nccl_ll_max_bw_gbps(arch, g.nodes) * kGB;
      return std::min(c * b * (tree ? 1.0 / 3.8 : 0.5), lim);
    }
    case NcclProto::kLL128: {
      const double per = (tree ? nccl_per_ch_tree_ll128_gbps(arch, g.nodes)
                               : nccl_per_ch_ring_ll128_gbps(arch, g.nodes)) *
                         kGB / dup;
      return c * std::min(b * 120.0 / 128.0, per);
    }
    case NcclProto::kSimple:
    case NcclProto::kAuto:
      break;
  }
  if (tree) return c * std::min(b, nccl_per_ch_tree_gbps(arch, g.nodes) * kGB / dup);
  return c * b;
}

}  // namespace csim::core
