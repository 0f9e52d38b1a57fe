// docs/block-eval.md, "Transfers".
#include "backends/block/schedule.hpp"

#include <algorithm>
#include <set>

#include "core/cost/hbm_traffic.hpp"
#include "core/engine/flow_network.hpp"

namespace csim::block::detail {

// [SECTION] Transfers ----------------------------------------------------------------------------

// docs/block-eval.md, "Transfers": a transfer alone on the topology, its mirror images included
// (the op-level simulator's plan, backends/sim/sim_executor.cpp), timed once per plan key.
TransferTime Schedule::transfer_of(const Op& op) {
  PlanKey key;
  if (op.kind == OpKind::kCopy) {
    key = {0, static_cast<int>(op.copy_kind), op.gpu, op.peer_gpu, 0, op.bytes};
  } else {
    key = {1,       static_cast<int>(op.collective), static_cast<int>(op.algo), op.group, op.root,
           op.bytes};
  }
  // A memo in front of the map: the same few transfers recur every layer and micro-batch.
  const std::size_t h = (static_cast<std::size_t>(std::get<1>(key)) * 31u +
                         static_cast<std::size_t>(std::get<3>(key)) * 131u +
                         static_cast<std::size_t>(std::get<2>(key)) * 7u +
                         static_cast<std::size_t>(std::get<5>(key)) * 2654435761u +
                         static_cast<std::size_t>(std::get<0>(key))) &
                        (transfer_memo_.size() - 1);
  if (std::get<5>(transfer_memo_[h].first) == op.bytes && transfer_memo_[h].first == key)
    return transfer_memo_[h].second;
  const auto it = transfer_ns_.find(key);
  if (it != transfer_ns_.end()) {
    transfer_memo_[h] = {key, it->second};
    return it->second;
  }
  // Timed by the previous Schedule of this configuration (TransferTable).
  TransferTable::Key shared_key;
  if (shared_ != nullptr) {
    if (op.kind == OpKind::kCopy) {
      shared_key = {0, static_cast<int>(op.copy_kind), 0, 0, op.bytes, {op.gpu, op.peer_gpu}};
    } else {
      shared_key = {1,
                    static_cast<int>(op.collective),
                    static_cast<int>(op.algo),
                    op.root,
                    op.bytes,
                    program_.groups[static_cast<std::size_t>(op.group)].gpus};
    }
    const auto sh = shared_->times.find(shared_key);
    if (sh != shared_->times.end()) {
      transfer_ns_.emplace(key, sh->second);
      transfer_memo_[h] = {key, sh->second};
      return sh->second;
    }
  }
  core::TransferPlan plan;
  std::vector<int> ends;
  if (op.kind == OpKind::kCopy) {
    const int node = op.gpu / scenario_.cluster.gpus_per_node;
    core::Endpoint src = core::Endpoint::host(node), dst = core::Endpoint::gpu(op.gpu);
    if (op.copy_kind == core::CopyKind::kPeer) src = core::Endpoint::gpu(op.peer_gpu);
    if (op.copy_kind == core::CopyKind::kD2H) std::swap(src, dst);
    plan = core::plan_copy(topo_, comm_, op.copy_kind, src, dst, static_cast<double>(op.bytes));
    ends.push_back(op.gpu);
    if (op.copy_kind == core::CopyKind::kPeer) ends.push_back(op.peer_gpu);
  } else {
    const core::CommGroup& g = program_.groups[static_cast<std::size_t>(op.group)];
    ends = g.gpus;
    plan = core::plan_collective(topo_, comm_, op.collective, op.algo, ends, op.root,
                                 static_cast<double>(op.bytes), &g.a2a_shares);
  }
  // docs/cost-model.md, "Resource sharing": the HBM traffic the op-level simulator declares.
  double hbm = 0;
  if (plan.predicted_ns > 0) {
    const double moved =
        op.kind == OpKind::kCopy
            ? static_cast<double>(op.bytes)
            : core::nccl_hbm_bytes(op.collective, plan.algo, static_cast<int>(ends.size()),
                                   static_cast<double>(op.bytes));
    hbm = moved / static_cast<double>(plan.predicted_ns);
  }
  const TransferTime d{time_plan(std::move(plan), ends), hbm};
  transfer_ns_.emplace(key, d);
  if (shared_ != nullptr) shared_->times.emplace(std::move(shared_key), d);
  transfer_memo_[h] = {key, d};
  return d;
}

// The mirrors whose images of `gpus` differ from the set and from each other (as the op-level
// simulator's distinct_mirrors, docs/cost-model.md "Rank symmetry").
const std::vector<int>& Schedule::mirrors_of(const std::vector<int>& gpus) {
  auto it = mirrors_.find(gpus);
  if (it != mirrors_.end()) return it->second;
  std::vector<int> out;
  std::set<std::vector<int>> seen;
  for (std::size_t m = 0; m < program_.symmetry.images.size(); ++m) {
    std::vector<int> key;
    for (int g : gpus) key.push_back(program_.symmetry.images[m][static_cast<std::size_t>(g)]);
    std::sort(key.begin(), key.end());
    if (!seen.insert(key).second) continue;
    if (m > 0) out.push_back(static_cast<int>(m));
  }
  return mirrors_.emplace(gpus, std::move(out)).first->second;
}

void Schedule::add_mirror_flows(core::TransferPlan& plan, const std::vector<int>& mirrors) const {
  for (core::TransferPlan& st : plan.then) add_mirror_flows(st, mirrors);
  const std::size_t own = plan.flows.size();
  const int per_node = scenario_.cluster.gpus_per_node;
  for (int m : mirrors) {
    const std::vector<int>& img = program_.symmetry.images[static_cast<std::size_t>(m)];
    for (std::size_t i = 0; i < own; ++i) {
      core::FlowSpec f = plan.flows[i];
      const bool src_gpu = f.src.kind == core::Endpoint::Kind::kGpu;
      const bool dst_gpu = f.dst.kind == core::Endpoint::Kind::kGpu;
      if (src_gpu) f.src.index = img[static_cast<std::size_t>(f.src.index)];
      if (dst_gpu) f.dst.index = img[static_cast<std::size_t>(f.dst.index)];
      if (!src_gpu && dst_gpu) f.src.index = f.dst.index / per_node;
      if (src_gpu && !dst_gpu) f.dst.index = f.src.index / per_node;
      plan.flows.push_back(f);
    }
  }
}

// docs/block-eval.md, "Transfers": the mirror images of a transfer cross links of their own when
// every link belongs to one GPU (NVSwitch ports, PCIe, a NIC per GPU, one non-blocking switch
// between nodes), the plan moves data between GPUs only, and the images' GPU sets are pairwise
// equal or disjoint; then the transfer alone takes as long as with its images.
bool Schedule::images_disjoint(const core::TransferPlan& plan, const std::vector<int>& gpus) {
  const core::ClusterSpec& c = scenario_.cluster;
  const bool per_gpu_links =
      (c.gpus_per_node == 1 || c.intra.kind == core::IntraNodeKind::kNvswitch) &&
      (c.nodes == 1 || (c.nics_per_node >= c.gpus_per_node && c.fabric.nodes_per_leaf <= 0));
  if (!per_gpu_links) return false;
  std::vector<const core::TransferPlan*> stages{&plan};
  for (const core::TransferPlan& st : plan.then) stages.push_back(&st);
  for (const core::TransferPlan* st : stages)
    for (const core::FlowSpec& f : st->flows)
      if (f.src.kind != core::Endpoint::Kind::kGpu || f.dst.kind != core::Endpoint::Kind::kGpu)
        return false;
  if (stamp_.empty()) stamp_.assign(static_cast<std::size_t>(program_.world_gpus), -1);
  bool ok = true;
  for (std::size_t m = 0; m < program_.symmetry.images.size() && ok; ++m) {
    const std::vector<int>& img = program_.symmetry.images[m];
    const int first = stamp_[static_cast<std::size_t>(img[static_cast<std::size_t>(gpus[0])])];
    if (first >= 0) {  // the same set as an earlier image's, or overlapping it
      for (int g : gpus)
        ok = ok && stamp_[static_cast<std::size_t>(img[static_cast<std::size_t>(g)])] == first;
      continue;
    }
    for (int g : gpus) {
      int& st = stamp_[static_cast<std::size_t>(img[static_cast<std::size_t>(g)])];
      ok = ok && st < 0;
      st = static_cast<int>(m);
    }
  }
  for (const std::vector<int>& img : program_.symmetry.images)
    for (int g : gpus) stamp_[static_cast<std::size_t>(img[static_cast<std::size_t>(g)])] = -1;
  return ok;
}

// Each stage after its latency: its flows (mirror images included) alone on a flow network of
// just the links they cross, so that the cost grows with the transfer, not with the cluster.
TimeNs Schedule::time_plan(core::TransferPlan plan, const std::vector<int>& mirror_gpus) {
  if (program_.symmetry.enabled() && !images_disjoint(plan, mirror_gpus))
    add_mirror_flows(plan, mirrors_of(mirror_gpus));
  std::vector<core::TransferPlan> stages{plan};
  for (core::TransferPlan& st : plan.then) stages.push_back(st);
  const std::vector<core::Link>& all = topo_.links();
  if (local_link_.empty()) local_link_.assign(all.size(), -1);
  TimeNs total = 0;
  std::vector<engine::FlowStart> batch;
  std::vector<core::Link> links;
  std::vector<core::LinkId> used;
  for (const core::TransferPlan& st : stages) {
    total += st.latency_ns;
    batch.clear();
    links.clear();
    for (const core::FlowSpec& f : st.flows) {
      if (f.bytes <= 0) continue;
      engine::FlowStart fs;
      for (const core::LinkId l : topo_.route(f.src, f.dst)) {
        int& k = local_link_[static_cast<std::size_t>(l)];
        if (k < 0) {
          k = static_cast<int>(links.size());
          core::Link c;
          c.id = k;
          c.capacity_bytes_per_s = all[static_cast<std::size_t>(l)].capacity_bytes_per_s;
          links.push_back(c);
          used.push_back(l);
        }
        fs.route.push_back(k);
      }
      fs.bytes = f.bytes;
      fs.rate_cap = f.rate_cap_bytes_per_s;
      batch.push_back(std::move(fs));
    }
    for (const core::LinkId l : used) local_link_[static_cast<std::size_t>(l)] = -1;
    used.clear();
    if (batch.empty()) continue;
    engine::FlowNetwork net(links);
    net.start_batch(0, batch);
    TimeNs t = 0;
    while (net.active() > 0) {
      t = std::max(t, net.next_completion_ns());
      net.advance(t);
    }
    total += t;
  }
  return total;
}

// [SECTION] Shared links -------------------------------------------------------------------------

// docs/block-eval.md, "Transfers": a collective's stages, every mirror image's flows included (as
// the op-level simulator's collective_plan, backends/sim/sim_executor.cpp), registered once per
// plan key on the schedule's flow network of the whole topology.
const std::vector<NetStage>& Schedule::net_plan(const Op& op) {
  const PlanKey key{
      1, static_cast<int>(op.collective), static_cast<int>(op.algo), op.group, op.root, op.bytes};
  const auto it = net_plans_.find(key);
  if (it != net_plans_.end()) return it->second;
  if (!net_) net_ = std::make_unique<engine::FlowNetwork>(topo_.links());
  const core::CommGroup& g = program_.groups[static_cast<std::size_t>(op.group)];
  core::TransferPlan plan =
      core::plan_collective(topo_, comm_, op.collective, op.algo, g.gpus, op.root,
                            static_cast<double>(op.bytes), &g.a2a_shares);
  if (program_.symmetry.enabled()) add_mirror_flows(plan, mirrors_of(g.gpus));
  std::vector<NetStage> out;
  std::vector<engine::FlowStartRef> flows;
  auto add = [&](const core::TransferPlan& st) {
    flows.clear();
    for (const core::FlowSpec& f : st.flows)
      if (f.bytes > 0)
        flows.push_back({topo_.route(f.src, f.dst), f.bytes, f.rate_cap_bytes_per_s});
    out.push_back({st.latency_ns, net_->register_batch(flows), static_cast<int>(flows.size())});
  };
  add(plan);
  for (const core::TransferPlan& st : plan.then) add(st);
  return net_plans_.emplace(key, std::move(out)).first->second;
}

// docs/block-eval.md, "Transfers": the shared network is used where the Program has an
// all-to-all over more than one GPU, and under DeepSpeed ZeRO-3, whose prefetched all-gathers run
// beside the gradients' reduce-scatters on another stream (alone they were 1.9 % short in step
// time and 8.7 % high in peak memory: docs/block-eval.md, "Scope").
bool Schedule::shares_links(const core::Scenario& s, const core::Program& p) {
  if (s.strategy.kind == core::StrategyKind::kZero && s.strategy.parallel.zero_stage == 3)
    return true;
  for (const Op& op : p.ops)
    if (op.kind == core::OpKind::kCollective && op.collective == core::CollectiveKind::kAllToAll &&
        p.groups[static_cast<std::size_t>(op.group)].gpus.size() > 1)
      return true;
  return false;
}

// The instance's data moves: its first stage after its latency.
void Schedule::net_start(int instance, const Op& op) {
  const int tr = static_cast<int>(net_transfers_.size());
  net_transfers_.push_back({instance, &net_plan(op), 0, 0});
  push(now_ + net_transfers_.back().stages->front().latency_ns, Ev::kNetGo, tr);
}

void Schedule::net_go(int tr) {
  net_advance();  // the flows in flight up to now at their old rates
  NetTransfer& x = net_transfers_[static_cast<std::size_t>(tr)];
  const NetStage& st = (*x.stages)[x.stage];
  x.flows_left = st.flows;
  if (x.flows_left == 0) {
    net_stage_done(tr);
    return;
  }
  net_->start_batch(now_, st.batch, tr);
  net_schedule_check();
}

// A stage's flows are done: the next stage after its latency, or the instance's units end.
void Schedule::net_stage_done(int tr) {
  NetTransfer& x = net_transfers_[static_cast<std::size_t>(tr)];
  if (x.stage + 1 < x.stages->size()) {
    ++x.stage;
    push(now_ + (*x.stages)[x.stage].latency_ns, Ev::kNetGo, tr);
    return;
  }
  for (int u : inst_units_[static_cast<std::size_t>(x.instance)]) finish_unit(u, now_);
}

// finish_unit only queues events, so the network's list stays valid while it is read.
void Schedule::net_advance() {
  if (!net_) return;
  for (const engine::FlowNetwork::TagCount& run : net_->advance_counts(now_)) {
    NetTransfer& x = net_transfers_[static_cast<std::size_t>(run.tag)];
    x.flows_left -= run.count;
    if (x.flows_left == 0) net_stage_done(static_cast<int>(run.tag));
  }
}

void Schedule::net_schedule_check() {
  ++net_gen_;
  const TimeNs next = net_->next_completion_ns();
  if (next >= 0) push(std::max(next, now_), Ev::kNetCheck, 0, net_gen_);
}

}  // namespace csim::block::detail
