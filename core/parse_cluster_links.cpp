// cluster.nic and cluster.p2p (docs/scenario.md, "cluster.nic", "cluster.p2p").
#include "core/parse_cluster_links.hpp"

#include <vector>

#include "core/nic_stack.hpp"

namespace csim::core::parse {

void parse_cluster_links(Ctx& ctx, const Obj& o, ClusterSpec& c) {
  c.p2p = o.boolean("p2p", true);
  c.nic = NicSpec{};
  c.nic.latency_ns = nic_latency_ns(c.nic);
  if (!o.has("nic")) return;
  Obj n(ctx, o.raw("nic"), o.at("nic"), {"stack", "latency_us"});
  int count = 0;
  const NicStackInfo* stacks = nic_stacks(&count);
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.emplace_back(stacks[i].name);
  c.nic.stack = stacks[n.choice("stack", names, 0)].stack;
  const NicStackInfo& info = nic_stack_info(c.nic.stack);
  if (n.has("latency_us")) {
    // 0.1 us: below any NIC's hop (an RDMA write alone is ~1 us); 1000 us: far above any stack.
    c.nic.latency_ns = n.number("latency_us", 0, 0.1, 1000) * 1e3;
  } else {
    c.nic.latency_ns = info.latency_us * 1e3;
    if (!info.measured)
      ctx.warn(n.at("stack"), std::string("no calibrated NIC latency for ") + info.name +
                                  ": using " + num_text(info.latency_us) +
                                  " us (InfiniBand's); set cluster.nic.latency_us");
  }
}

}  // namespace csim::core::parse
