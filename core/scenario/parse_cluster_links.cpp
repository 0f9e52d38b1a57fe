// cluster.nic and cluster.p2p (docs/scenario.md, "cluster.nic", "cluster.p2p").
#include "core/scenario/parse_cluster_links.hpp"

#include <vector>

#include "core/hardware/nic_stack.hpp"

namespace csim::core::parse {

void parse_cluster_links(Ctx& ctx, const Obj& o, ClusterSpec& c) {
  c.p2p = o.boolean("p2p", true);
  c.nic = NicSpec{};
  c.nic.latency_ns = nic_latency_ns(c.nic);
  c.nic.efficiency = nic_efficiency(c.nic);
  if (!o.has("nic")) return;
  Obj n(ctx, o.raw("nic"), o.at("nic"), {"stack", "latency_us", "efficiency"});
  int count = 0;
  const NicStackInfo* stacks = nic_stacks(&count);
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.emplace_back(stacks[i].name);
  c.nic.stack = stacks[n.choice("stack", names, 0)].stack;
  const NicStackInfo& info = nic_stack_info(c.nic.stack);
  // 0.1 us: below any NIC's hop (an RDMA write alone is ~1 us); 1000 us: far above any stack.
  c.nic.latency_ns = n.number("latency_us", info.latency_us, 0.1, 1000) * 1e3;
  // 0.05: below any working NIC (a twentieth of its line rate); 1: the line rate itself.
  c.nic.efficiency = n.number("efficiency", info.efficiency, 0.05, 1.0);
  // One warning naming every catalogue figure of this stack that no published case measures
  // (core/hardware/nic_stack.cpp), unless the scenario gives it.
  std::string what, values, keys;
  auto missing = [&](const char* figure, const std::string& value, const char* key) {
    const bool first = what.empty();
    what += (first ? "" : " and ") + std::string(figure);
    values += (first ? "" : " and ") + value;
    keys += (first ? "" : " and ") + std::string("cluster.nic.") + key;
  };
  if (!n.has("latency_us") && !info.latency_measured)
    missing("NIC latency", num_text(info.latency_us) + " us", "latency_us");
  if (!n.has("efficiency") && !info.efficiency_measured)
    missing("NIC bandwidth fraction", num_text(info.efficiency), "efficiency");
  if (!what.empty())
    ctx.warn(n.at("stack"), std::string("no published ") + what + " for " + info.name + ": using " +
                                values + " (InfiniBand's); set " + keys);
}

}  // namespace csim::core::parse
