// NIC stack catalogue (docs/scenario.md, "cluster.nic"; every figure with its source there).
#include "core/hardware/nic_stack.hpp"

#include "core/error.hpp"

namespace csim::core {
namespace {

// Each latency is the NIC alpha that makes the simulator's own collective model (plan_collective
// with the default CommParams, NCCL's algorithm and protocol choice) reproduce a published
// nccl-tests time; each efficiency the NIC capacity fraction that makes it reproduce a published
// NIC-bound bus bandwidth. The cases are rows of calibration/published/
// nic-stack-measurements.json (gathered for issue 32 item 6; not part of the given
// published-measurements set, calibration/published/README.md); tests/test_collective_cost.cpp
// ("calibration: ...") and bench_accuracy check them.
const NicStackInfo kStacks[] = {
    {NicStack::kInfiniband, "infiniband", 9.3, 0.97, true, true,
     "fitted: nccl_2x8h20_ib_latency (2 x 8 GPUs, CX-7 NDR, 8 B all_reduce 47.5 us)",
     "fitted: nccl_ndr_nic_peak (48.5 of 50 GB/s per CX-7 NDR NIC)"},
    {NicStack::kRoce, "roce", 9.3, 0.97, false, false,
     "as infiniband: NCCL drives RoCE through the same IB verbs transport (src/transport/net_ib/"
     "connect.cc: an Ethernet link layer only changes the addressing, GID and traffic class), and "
     "Meta reports using both its RoCE and its InfiniBand 24K-GPU H100 clusters for GenAI "
     "training \"without any network bottlenecks\" (Meta Engineering, \"Building Meta's GenAI "
     "Infrastructure\", 2024; Gangidi et al., SIGCOMM 2024), a qualitative statement with no "
     "per-hop figure; no published RoCE nccl-tests case in the calibration",
     "as infiniband (same transport, same CX-7 NICs); no published RoCE nccl-tests case in the "
     "calibration"},
    {NicStack::kGpudirectTcpx, "gpudirect_tcpx", 63.1, 0.673, true, true,
     "fitted: nccl_2xa3high_tcpx_allreduce_1M (2 x 8 H100 a3-highgpu-8g, 4 x 200 Gb/s gVNIC, "
     "ring/Simple 1 MiB all_reduce 1478 us)",
     "fitted: nccl_2xa3high_tcpx_allreduce_2G (ring/Simple 2 GiB all_reduce, busbw 65.72 GB/s "
     "on 4 x 25 GB/s)"},
    {NicStack::kGpudirectTcpxo, "gpudirect_tcpxo", 27.2, 0.950, true, true,
     "fitted: nccl_2xa3mega_tcpxo_allgather_8M (2 x 8 H100 a3-megagpu-8g, 8 x 200 Gb/s, 8 MiB "
     "all_gather 166.6 us)",
     "fitted: nccl_2xa3mega_tcpxo_allgather_8G (8 GiB all_gather, busbw 188.54 GB/s on "
     "8 x 25 GB/s)"},
    {NicStack::kEfa, "efa", 21.2, 0.97, true, false,
     "fitted: nccl_2xp5_efa_latency (2 x 8 H100 p5.48xlarge, 32 x 100 Gb/s EFA as 8 x 50 GB/s, "
     "8 B all_reduce 69.12 us, NVLSTree)",
     "as infiniband (not measured): the published p5 all-reduces (nccl_2xp5_efa_allreduce_16G, "
     "nccl_4xp5_efa_allreduce_8G) are bounded in the model by NVLSTree's channel cap, "
     "not by the NICs, so they check the stack but cannot set its NIC fraction"},
};
constexpr int kCount = static_cast<int>(sizeof kStacks / sizeof kStacks[0]);

}  // namespace

const char* to_string(NicStack s) {
  return nic_stack_info(s).name;
}

const NicStackInfo* nic_stacks(int* count) {
  *count = kCount;
  return kStacks;
}

const NicStackInfo& nic_stack_info(NicStack s) {
  for (const NicStackInfo& i : kStacks)
    if (i.stack == s) return i;
  CSIM_ASSERT_MSG(false, "unknown NIC stack");
  return kStacks[0];
}

bool parse_nic_stack(const std::string& name, NicStack* out) {
  for (const NicStackInfo& i : kStacks) {
    if (name == i.name) {
      *out = i.stack;
      return true;
    }
  }
  return false;
}

double nic_latency_ns(const NicSpec& nic) {
  return nic.latency_ns > 0 ? nic.latency_ns : nic_stack_info(nic.stack).latency_us * 1e3;
}

double nic_efficiency(const NicSpec& nic) {
  return nic.efficiency > 0 ? nic.efficiency : nic_stack_info(nic.stack).efficiency;
}

}  // namespace csim::core
