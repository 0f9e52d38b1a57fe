// NIC stack catalogue (docs/scenario.md, "cluster.nic").
#include "core/nic_stack.hpp"

#include "core/error.hpp"

namespace csim::core {
namespace {

// The InfiniBand figure is the fitted NIC alpha (nccl_2x8h20_ib_latency: an 8-byte all-reduce over
// 2 x 8 GPUs takes 47.5 us; docs/accuracy.md). No calibration case measures the other stacks: their
// entries say what their default rests on, and the parser warns when one is used without
// cluster.nic.latency_us.
const NicStackInfo kStacks[] = {
    {NicStack::kInfiniband, "infiniband", 9.3, true,
     "fitted: nccl_2x8h20_ib_latency (2 x 8 GPUs, CX-7 NDR, 8 B all_reduce 47.5 us)"},
    {NicStack::kRoce, "roce", 9.3, false,
     "as infiniband: NCCL drives RoCE through the same IB verbs transport (src/transport/net_ib/"
     "connect.cc: an Ethernet link layer only changes the addressing, GID and traffic class); "
     "no RoCE case in the calibration"},
    {NicStack::kGpudirectTcpx, "gpudirect_tcpx", 9.3, false,
     "placeholder, as infiniband: GPUDirect-TCPX (GCP A3) runs NCCL's net plugin over TCP with "
     "GPU receive buffers; no TCPX case in the calibration, give cluster.nic.latency_us"},
    {NicStack::kGpudirectTcpxo, "gpudirect_tcpxo", 9.3, false,
     "placeholder, as infiniband: GPUDirect-TCPXO (GCP A3 Mega) offloads TCPX's transport to the "
     "NIC; no TCPXO case in the calibration, give cluster.nic.latency_us"},
    {NicStack::kEfa, "efa", 9.3, false,
     "placeholder, as infiniband: EFA (AWS, SRD through libfabric and aws-ofi-nccl); no EFA case "
     "in the calibration, give cluster.nic.latency_us"},
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

}  // namespace csim::core
