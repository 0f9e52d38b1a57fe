// NCCL's channels (docs/cost-model.md, "Channels"): how many channels NCCL's topology search gives
// a ring over a group, the bandwidth of each, how many of them a collective of a given size runs
// on, and the per-protocol bandwidth limits of NCCL's tuning model. Constants from NCCL 2.2x
// sources (src/graph/search.cc, src/graph/connect.cc, src/graph/tuning.cc, src/enqueue.cc,
// src/include/comm.h, src/include/device.h), read, not copied.
#pragma once

#include <vector>

#include "core/hardware/topology.hpp"
#include "core/program/program.hpp"

namespace csim::core {

// tuning.cc's compute-capability index (Volta, Ampere, Hopper, Blackwell).
enum class NcclArch : std::uint8_t { kVolta, kAmpere, kHopper, kBlackwell };
NcclArch nccl_arch(int compute_capability);

// The ring graph NCCL's search finds for a group (search.cc ncclTopoCompute and
// ncclTopoDupChannels; connect.cc ncclTopoPostset doubles the channels for the communicator).
struct NcclRingGraph {
  int graph_channels = 1;           // graph->nChannels after duplication
  double graph_bw_bytes_per_s = 0;  // graph->bwIntra (= bwInter): the speed of each graph channel
  int comm_channels = 2;            // comm->nChannels = min(64, 2 x graph channels)
  int nodes = 1;                    // nodes the group spans
  // bw of one communicator channel: graph_channels x graph_bw / comm_channels.
  double channel_bytes_per_s() const;
};

// `total_bytes_per_s`: the bandwidth NCCL's search can spread channels over (one node: a GPU's
// slowest ring hop; across nodes: the NICs the rings use, `nic_bytes_per_s` each on `rails`
// NICs); `inter`: the group spans nodes (speedArrayInter, one channel per NIC and speed).
NcclRingGraph nccl_ring_graph(int compute_capability, bool inter, double total_bytes_per_s,
                              double nic_bytes_per_s, int rails, int nodes);
// The same for `gpus` on `topo` (rings from Topology::rings, NICs from the cluster).
NcclRingGraph nccl_ring_graph(const Topology& topo, const std::vector<int>& gpus);

// enqueue.cc (topoGetAlgoInfo, "Ring/Tree channel tuning"): the channels a ring or tree collective
// of `bytes` runs on: start from comm_channels, drop one while bytes < channels x threads x
// threshold (comm.h: LL 8 x nranks for rings, LL128 8, Simple 64 bytes per thread; device.h: 512,
// 640, 512 threads).
int nccl_channels_for(const NcclRingGraph& g, CollectiveAlgo algo, NcclProto proto, int nranks,
                      double bytes);

// tuning.cc's per-protocol busbw limits (payload bytes/s) on `channels` communicator channels of
// `g`: Simple channels x bw; LL128 channels x min(bw x 120/128, perChMaxRingLL128Bw / dup);
// LL min(channels x bw / 2, llMaxBw). `tree`: perChMaxTreeBw and perChMaxTreeLL128Bw instead.
double nccl_busbw_cap(const NcclRingGraph& g, NcclArch arch, NcclProto proto, bool tree,
                      int channels);

// NCCL's tuning tables, for bench/bench_nccl_tuning.cpp and the caps above (tuning.cc,
// ncclTunerConstantsDefaults); [arch][min(nodes,3)-1] in GB/s.
double nccl_ll_max_bw_gbps(NcclArch arch, int nodes);
double nccl_per_ch_ring_ll128_gbps(NcclArch arch, int nodes);
double nccl_per_ch_tree_gbps(NcclArch arch, int nodes);
double nccl_per_ch_tree_ll128_gbps(NcclArch arch, int nodes);
double nccl_per_ch_nvls_tree_gbps(NcclArch arch, int nodes);  // perChMaxNVLSTreeBws

}  // namespace csim::core
