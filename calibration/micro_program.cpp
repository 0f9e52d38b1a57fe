// Micro-Programs of the calibration (docs/calibration.md, "Micro-Programs").
#include "calibration/micro_program.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace csim::calibration {

using core::Op;
using core::OpId;
using core::OpKind;

MicroProgram build_micro_program(const MicroSpec& spec, int gpus_in_node) {
  CSIM_ASSERT(gpus_in_node >= 1 && spec.warmup >= 0 && spec.repeats >= 1);
  const Op& tmpl = spec.op;
  CSIM_ASSERT_MSG(tmpl.kind == OpKind::kCompute || tmpl.kind == OpKind::kCopy ||
                      tmpl.kind == OpKind::kCollective,
                  "a micro-Program repeats a compute, copy or collective op");
  // GPUs the op runs on; each gets one stream.
  std::vector<int> gpus;
  if (tmpl.kind == OpKind::kCollective) {
    CSIM_ASSERT_MSG(spec.group.size() >= 2, "a collective needs a group of 2 or more GPUs");
    gpus = spec.group;
  } else {
    gpus = {tmpl.gpu};
  }
  std::vector<int> active = gpus;
  if (tmpl.kind == OpKind::kCopy && tmpl.peer_gpu >= 0) active.push_back(tmpl.peer_gpu);
  std::sort(active.begin(), active.end());
  active.erase(std::unique(active.begin(), active.end()), active.end());
  for (int g : active) CSIM_ASSERT_MSG(g >= 0 && g < gpus_in_node, "GPU outside the node");

  MicroProgram mp;
  core::Program& p = mp.program;
  p.strategy_label = "calibration: " + spec.label;
  p.world_gpus = gpus_in_node;
  p.gpus_per_node = gpus_in_node;
  p.active_gpus = active;
  p.steps = 1;
  p.processes.push_back({0, 0, "simrun calibrate", /*has_gil=*/false});
  p.threads.push_back({0, 0, gpus.front(), "main"});
  const core::StreamRole role = tmpl.kind == OpKind::kCompute ? core::StreamRole::kCompute
                                : tmpl.kind == OpKind::kCopy  ? core::StreamRole::kCopy
                                                              : core::StreamRole::kComm;
  std::vector<int> stream_of_gpu(static_cast<std::size_t>(gpus_in_node), -1);
  for (int g : gpus) {
    stream_of_gpu[static_cast<std::size_t>(g)] = static_cast<int>(p.streams.size());
    p.streams.push_back({static_cast<int>(p.streams.size()), g, role, core::to_string(role)});
  }
  if (tmpl.kind == OpKind::kCollective) p.groups.push_back({0, spec.group, "node"});

  if (spec.lead_bytes > 0) {
    for (int g : gpus) {
      Op lead;
      lead.id = static_cast<OpId>(p.ops.size());
      lead.kind = OpKind::kCompute;
      lead.compute_kind = core::ComputeKind::kElementwise;
      lead.dtype = core::Dtype::kFp32;  // no FLOPs: the dtype only has to exist on every GPU
      lead.flops = 0;
      lead.bytes = spec.lead_bytes;
      lead.name = p.names.intern_cat({spec.label, " lead"});
      lead.thread = 0;
      lead.gpu = g;
      lead.stream = stream_of_gpu[static_cast<std::size_t>(g)];
      lead.step = 1;
      lead.phase = core::Phase::kCalibration;
      p.ops.push_back(std::move(lead));
    }
  }
  OpId previous = core::kNoOp;  // last op of the previous repetition (idle_between)
  for (int r = 0; r < spec.warmup + spec.repeats; ++r) {
    const bool timed = r >= spec.warmup;
    const std::string name = spec.label + (timed ? " #" + std::to_string(r - spec.warmup)
                                                 : " warm-up " + std::to_string(r));
    std::vector<OpId> ids;
    for (int g : gpus) {
      Op op = tmpl;
      op.id = static_cast<OpId>(p.ops.size());
      op.name = p.names.intern(name);
      op.thread = 0;
      op.gpu = g;
      op.stream = stream_of_gpu[static_cast<std::size_t>(g)];
      op.step = 1;
      op.python_ns = 0;
      op.dispatch_ns = 0;
      op.deps.clear();
      op.phase = core::Phase::kCalibration;
      if (tmpl.kind == OpKind::kCollective) {
        op.group = 0;
        op.instance = r;
        op.root = -1;
      }
      if (spec.idle_between && previous != core::kNoOp)
        op.deps.push_back({previous, core::DepKind::kHostWaits});
      ids.push_back(op.id);
      p.ops.push_back(std::move(op));
    }
    previous = ids.back();
    if (timed) mp.timed.push_back(std::move(ids));
  }
  if (tmpl.kind == OpKind::kCollective) p.collective_instances = spec.warmup + spec.repeats;
  const std::string problem = core::validate_program(p);
  CSIM_ASSERT_MSG(problem.empty(), problem.c_str());
  return mp;
}

}  // namespace csim::calibration
