// One rank of a Program (docs/real-execution.md, "One rank of a large run").
#include "core/program/program_slice.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace csim::core {

int representative_of(const Program& p, int gpu) {
  if (std::find(p.active_gpus.begin(), p.active_gpus.end(), gpu) == p.active_gpus.end()) return -1;
  if (!p.symmetry.enabled()) return gpu;
  const auto& w = p.symmetry.weight_of_gpu;
  if (w[static_cast<std::size_t>(gpu)] > 0) return gpu;
  // images[m][rep] == gpu for the mirror that maps a representative onto it.
  for (const std::vector<int>& img : p.symmetry.images) {
    for (std::size_t g = 0; g < img.size(); ++g) {
      if (img[g] == gpu && w[g] > 0) return static_cast<int>(g);
    }
  }
  return -1;
}

RankSlice slice_rank(const Program& p, int gpu, const std::vector<OpTiming>& simulated) {
  CSIM_ASSERT_MSG(simulated.size() == p.ops.size(), "the simulation is of another Program");
  RankSlice out;
  out.gpu = gpu;
  Program& s = out.program;
  s.strategy_label = p.strategy_label + " — GPU " + std::to_string(gpu) + " alone";
  s.world_gpus = 1;
  s.gpus_per_node = 1;
  s.active_gpus = {0};
  s.steps = p.steps;
  s.samples_per_step = p.samples_per_step;
  s.names = p.names;  // the ops keep their NameIds
  // This GPU's share of the step's FLOPs, for its MFU.
  const double n = static_cast<double>(std::max<std::size_t>(1, p.active_gpus.size()));
  s.model_flops_per_step = p.model_flops_per_step / n;
  s.hardware_flops_per_step = p.hardware_flops_per_step / n;

  std::vector<int> thread_map(p.threads.size(), -1), process_map(p.processes.size(), -1);
  std::vector<int> stream_map(p.streams.size(), -1);
  for (const ThreadDesc& t : p.threads) {
    if (t.gpu != gpu) continue;
    int& pm = process_map[static_cast<std::size_t>(t.process)];
    if (pm < 0) {
      ProcessDesc pd = p.processes[static_cast<std::size_t>(t.process)];
      pm = pd.id = static_cast<int>(s.processes.size());
      pd.node = 0;
      s.processes.push_back(pd);
    }
    ThreadDesc nt = t;
    thread_map[static_cast<std::size_t>(t.id)] = nt.id = static_cast<int>(s.threads.size());
    nt.process = pm;
    nt.gpu = 0;
    s.threads.push_back(nt);
  }
  for (const StreamDesc& st : p.streams) {
    if (st.gpu != gpu) continue;
    StreamDesc ns = st;
    stream_map[static_cast<std::size_t>(st.id)] = ns.id = static_cast<int>(s.streams.size());
    ns.gpu = 0;
    s.streams.push_back(ns);
  }
  if (s.threads.empty())
    throw InputError("(command line)", "--ranks",
                     "GPU " + std::to_string(gpu) + " has no ops in this program",
                     "pick an active GPU");

  std::vector<OpId> op_map(p.ops.size(), kNoOp);
  for (const Op& op : p.ops) {
    const int t = thread_map[static_cast<std::size_t>(op.thread)];
    if (t < 0) continue;
    Op n2 = op;
    n2.id = static_cast<OpId>(s.ops.size());
    n2.thread = t;
    n2.gpu = 0;
    if (op.stream >= 0) {
      n2.stream = stream_map[static_cast<std::size_t>(op.stream)];
      CSIM_ASSERT_MSG(n2.stream >= 0, "a thread of this GPU issues to another GPU's stream");
    }
    const bool needs_others =
        op.kind == OpKind::kCollective ||
        (op.kind == OpKind::kCopy && op.copy_kind == CopyKind::kPeer && op.peer_gpu != gpu);
    if (needs_others) {
      // What the rest of the cluster did, as simulated: this op's time on its stream.
      const OpTiming& tm = simulated[static_cast<std::size_t>(op.id)];
      n2.fixed_ns = tm.end_ns >= tm.start_ns && tm.start_ns >= 0 ? tm.end_ns - tm.start_ns : 0;
      n2.group = n2.instance = n2.root = n2.peer_gpu = -1;
      n2.name = s.names.intern_cat({p.names.pattern(op.name), " (simulated)"}, op.name.field);
      ++out.replaced;
    }
    n2.deps.clear();
    for (const Dep& d : op.deps) {
      const OpId m = op_map[static_cast<std::size_t>(d.op)];
      if (m != kNoOp) n2.deps.push_back({m, d.kind});
    }
    op_map[static_cast<std::size_t>(op.id)] = n2.id;
    s.ops.push_back(std::move(n2));
  }
  s.warnings.push_back("GPU " + std::to_string(gpu) + " alone: " + std::to_string(out.replaced) +
                       " collectives and peer copies replaced by their simulated durations");
  const std::string problem = validate_program(s);
  CSIM_ASSERT_MSG(problem.empty(), problem.c_str());
  return out;
}

}  // namespace csim::core
