// Host staging (docs/cost-model.md, "Host staging"): with GPU peer-to-peer disabled
// (cluster.p2p false, nccl.p2p_disable, NCCL_P2P_DISABLE=1) NCCL's SHM transport moves every
// intra-node hop through a buffer in host memory: the sender copies a chunk in, the receiver copies
// it out. The topology routes such hops over both copies' links and a host.staging link that makes
// the two copies share the host bridge (core/hardware/topology.cpp); this file has that link's rate
// and the chunk pipeline's fill, which the collective plans add (core/cost/collective_cost.cpp,
// plan_collective).
#pragma once

#include <vector>

#include "core/cost/collective_cost.hpp"
#include "core/hardware/topology.hpp"
#include "core/program/program.hpp"

namespace csim::core {

// The host.staging link's capacity, host_staging_link_bytes_per_s, is the topology's
// (core/hardware/topology.hpp).

// The chunk one SHM step carries, in wire bytes: NCCL's buffer for the protocol / NCCL_STEPS
// (src/init.cc DEFAULT_*BUFFSIZE, src/include/device.h NCCL_STEPS = 8): LL 64 KiB, LL128
// 600 KiB, Simple 512 KiB. kAuto (NCCL point-to-point) uses Simple's.
double shm_step_wire_bytes(NcclProto proto);

// Pipeline fill of one staged hop carrying `wire_bytes`: its first chunk, min(wire_bytes, step),
// must be in host memory before the receiver copies it out, at the rate of the copy in alone
// (the route GPU -> host). Seconds.
double staged_hop_fill_s(const Topology& topo, int src_gpu, int dst_gpu, double wire_bytes,
                         NcclProto proto);

// Steps of a stage's pipeline that run one after another (the hops its latency counts):
// ring all-reduce 2(p-1), tree 2 ceil(log2 p), ring reduce-scatter / all-gather and the
// broadcast / reduce chain p-1, NCCL point-to-point (send/recv, all-to-all) 1; gather / scatter
// (plain copies) 0.
double staging_pipeline_steps(CollectiveKind kind, CollectiveAlgo algo, int p);

// `plan` with every stage's staged hops' fills added to its latency and to predicted_ns:
// extra = steps x (staged flows / flows) x the largest fill of a staged flow. `gpus` is the
// group plan_collective was given. Unchanged when no flow is staged.
TransferPlan add_host_staging(const Topology& topo, TransferPlan plan, CollectiveKind kind,
                              const std::vector<int>& gpus);

}  // namespace csim::core
