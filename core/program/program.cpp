#include "core/program/program.hpp"

#include <algorithm>
#include <string>

namespace csim::core {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::kCompute:
      return "compute";
    case OpKind::kCopy:
      return "copy";
    case OpKind::kCollective:
      return "collective";
    case OpKind::kHostWork:
      return "host_work";
    case OpKind::kMarker:
      return "marker";
    case OpKind::kAlloc:
      return "alloc";
    case OpKind::kFree:
      return "free";
  }
  return "?";
}

const char* to_string(CopyKind k) {
  switch (k) {
    case CopyKind::kH2DPinned:
      return "h2d_pinned";
    case CopyKind::kH2DPageable:
      return "h2d_pageable";
    case CopyKind::kD2H:
      return "d2h";
    case CopyKind::kD2D:
      return "d2d";
    case CopyKind::kPeer:
      return "peer";
  }
  return "?";
}

int comm_kernel_sms(const GpuSpec& gpu, const CommGroup* group, const Op& op) {
  const int n = group && group->comm_sms >= 0 ? group->comm_sms : gpu.nccl_sms;
  return op.collective == CollectiveKind::kSendRecv ? std::min(2, n) : n;
}

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kReduce:
      return "reduce";
    case CollectiveKind::kScatter:
      return "scatter";
    case CollectiveKind::kGather:
      return "gather";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kSendRecv:
      return "send_recv";
  }
  return "?";
}

namespace {
// The one spelling table of Phase, indexed by the enum.
constexpr const char* kPhaseNames[kNumPhases] = {
    "",          "setup",       "data",   "forward", "backward",  "recompute",      "loss",
    "optimizer", "sync",        "memory", "scatter", "replicate", "parallel_apply", "gather",
    "reduce",    "calibration",
};
static_assert(static_cast<int>(Phase::kCalibration) + 1 == kNumPhases);
}  // namespace

const char* to_string(Phase p) {
  return kPhaseNames[static_cast<int>(p)];
}

bool parse_phase(std::string_view s, Phase* out) {
  for (int i = 0; i < kNumPhases; ++i) {
    if (s == kPhaseNames[i]) {
      *out = static_cast<Phase>(i);
      return true;
    }
  }
  return false;
}

const char* to_string(MemCategory c) {
  switch (c) {
    case MemCategory::kParams:
      return "params";
    case MemCategory::kGrads:
      return "grads";
    case MemCategory::kOptimizer:
      return "optimizer";
    case MemCategory::kActivations:
      return "activations";
    case MemCategory::kBuffers:
      return "buffers";
    case MemCategory::kGatheredOutputs:
      return "gathered_outputs";
    case MemCategory::kCommBuffers:
      return "comm_buffers";
    case MemCategory::kWorkspace:
      return "workspace";
    case MemCategory::kAutogradGraph:
      return "autograd_graph";
  }
  return "?";
}

const char* to_string(StreamRole r) {
  switch (r) {
    case StreamRole::kCompute:
      return "compute";
    case StreamRole::kComm:
      return "comm";
    case StreamRole::kCopy:
      return "copy";
  }
  return "?";
}

std::string validate_program(const Program& p) {
  const auto n_ops = static_cast<OpId>(p.ops.size());
  const auto n_threads = static_cast<int>(p.threads.size());
  const auto n_streams = static_cast<int>(p.streams.size());
  // Collective members by instance, in op order (instances are numbered densely from 0; a larger
  // id only grows the table). The check runs on every lowering, so it builds no string per op:
  // the op's description is made only for the first problem.
  std::vector<std::vector<const Op*>> instances(
      static_cast<std::size_t>(std::max(p.collective_instances, 0)));
  if (p.symmetry.enabled()) {
    const std::size_t world = static_cast<std::size_t>(p.world_gpus);
    if (p.symmetry.weight_of_gpu.size() != world) return "symmetry: weight_of_gpu is not per GPU";
    for (const std::vector<int>& img : p.symmetry.images) {
      if (img.size() != world) return "symmetry: an image map is not per GPU";
    }
  }
  // Each op's thread in one array: the dependency check reads it for every edge.
  std::vector<int> thread_of(p.ops.size());
  for (std::size_t i = 0; i < p.ops.size(); ++i) thread_of[i] = p.ops[i].thread;
  for (OpId i = 0; i < n_ops; ++i) {
    const Op& op = p.ops[i];
    const auto where = [&] { return "op " + std::to_string(i) + " '" + p.name_of(op) + "'"; };
    if (op.id != i) return where() + ": id does not match its index";
    if (op.thread < 0 || op.thread >= n_threads) return where() + ": no such thread";
    const bool host_only = op.kind == OpKind::kHostWork || op.kind == OpKind::kMarker;
    if (host_only != (op.stream < 0))
      return where() + ": host ops have no stream, GPU ops need one";
    if (op.stream >= n_streams) return where() + ": no such stream";
    if (op.stream >= 0 && p.streams[op.stream].gpu != op.gpu)
      return where() + ": stream is on another GPU";
    for (const Dep& d : op.deps) {
      if (d.op < 0 || d.op >= n_ops || d.op == i) return where() + ": dependency out of range";
      // A dependency on a later op of the same thread can never be met.
      if (d.op > i && thread_of[static_cast<std::size_t>(d.op)] == op.thread)
        return where() + ": depends on a later op of its thread";
    }
    if (op.kind == OpKind::kCollective && op.fixed_ns < 0) {
      if (op.group < 0 || op.group >= static_cast<int>(p.groups.size()))
        return where() + ": no such group";
      if (op.instance < 0) return where() + ": collective without instance";
      const auto slot = static_cast<std::size_t>(op.instance);
      if (slot >= instances.size()) instances.resize(slot + 1);
      instances[slot].push_back(&op);
    }
    if ((op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) && op.bytes < 0)
      return where() + ": negative bytes";
  }
  // GPUs seen in the current instance: a mark per GPU, cleared through the list after each one.
  std::vector<char> mark(static_cast<std::size_t>(std::max(p.world_gpus, 0)), 0);
  std::vector<int> seen;
  for (std::size_t inst = 0; inst < instances.size(); ++inst) {
    const std::vector<const Op*>& ops = instances[inst];
    if (ops.empty()) continue;
    const CommGroup& g = p.groups[ops.front()->group];
    seen.clear();
    for (const Op* op : ops) {
      if (op->group != ops.front()->group)
        return "collective instance " + std::to_string(inst) + ": mixed groups";
      const auto gpu = static_cast<std::size_t>(op->gpu);
      if (gpu >= mark.size()) mark.resize(gpu + 1, 0);
      if (mark[gpu]) return "collective instance " + std::to_string(inst) + ": GPU twice";
      mark[gpu] = 1;
      seen.push_back(op->gpu);
    }
    for (int gpu : seen) mark[static_cast<std::size_t>(gpu)] = 0;
    // Under rank symmetry only the group's representative GPUs issue the collective.
    std::size_t expected = g.gpus.size();
    if (p.symmetry.enabled()) {
      expected = 0;
      for (int gpu : g.gpus) expected += p.symmetry.weight_of_gpu[gpu] > 0 ? 1 : 0;
    }
    if (seen.size() != expected) {
      return "collective instance " + std::to_string(inst) + " ('" + p.name_of(*ops.front()) +
             "'): " + std::to_string(seen.size()) + " of " + std::to_string(expected) +
             " GPUs take part";
    }
  }
  return {};
}

}  // namespace csim::core
