// docs/block-eval.md: which path runs ("Scope"), and the block path's entry.
#include "backends/block/block_eval.hpp"

#include <algorithm>

#include "backends/block/block_schedule.hpp"

namespace csim::block {

// docs/block-eval.md, "Scope": what the schedule reproduces of the op-level simulator.
std::string block_path_unsupported(const core::Scenario& s, const core::Program& p) {
  if (s.training.steps != 1) return "more than one training step";
  if (p.threads.empty()) return "no host threads";
  // One thread per process (no GIL contention) and per GPU, driving only its GPU's streams.
  std::vector<int> threads_of_process(p.processes.size(), 0), threads_of_gpu(static_cast<std::size_t>(p.world_gpus), 0);
  std::vector<int> threads_of_node(static_cast<std::size_t>(s.cluster.nodes), 0);
  for (const core::ThreadDesc& t : p.threads) {
    if (t.gpu < 0 || t.gpu >= p.world_gpus) return "a host thread without a GPU";
    if (++threads_of_process[static_cast<std::size_t>(t.process)] > 1)
      return "a process with several threads (GIL, data-loader workers)";
    if (++threads_of_gpu[static_cast<std::size_t>(t.gpu)] > 1) return "a GPU driven by several threads";
    ++threads_of_node[static_cast<std::size_t>(p.processes[static_cast<std::size_t>(t.process)].node)];
  }
  // Enough CPU cores that no thread waits for one (the op-level share under rank symmetry:
  // cores x simulated / active GPUs of the node, backends/sim/sim_executor.cpp).
  std::vector<int> active(static_cast<std::size_t>(s.cluster.nodes), 0), simulated(active);
  for (int g : p.active_gpus) {
    ++active[static_cast<std::size_t>(g / s.cluster.gpus_per_node)];
    if (!p.symmetry.enabled() || p.symmetry.weight_of_gpu[static_cast<std::size_t>(g)] > 0)
      ++simulated[static_cast<std::size_t>(g / s.cluster.gpus_per_node)];
  }
  for (std::size_t nd = 0; nd < active.size(); ++nd) {
    int cores = std::max(1, s.host.cpu_cores);
    if (p.symmetry.enabled() && active[nd] > 0 && simulated[nd] > 0)
      cores = std::max(1, static_cast<int>(static_cast<std::int64_t>(s.host.cpu_cores) * simulated[nd] / active[nd]));
    if (threads_of_node[nd] > cores) return "more threads than CPU cores on a node";
  }
  std::vector<int> compute_stream(static_cast<std::size_t>(p.world_gpus), -1);
  bool any_compute = false;
  for (const core::Op& op : p.ops) {
    if (op.gpu != p.threads[static_cast<std::size_t>(op.thread)].gpu) return "a thread issuing for another GPU";
    if (op.stream >= 0 && p.streams[static_cast<std::size_t>(op.stream)].gpu != op.gpu)
      return "an op on another GPU's stream";
    if (op.kind == core::OpKind::kCopy && op.copy_kind == core::CopyKind::kD2D) return "on-device copies";
    if (op.kind != core::OpKind::kCompute) continue;
    any_compute = true;
    int& cs = compute_stream[static_cast<std::size_t>(op.gpu)];
    if (cs < 0) cs = op.stream;
    if (cs != op.stream) return "kernels on several streams of one GPU";
  }
  if (!any_compute) return "no kernels";
  return {};
}

EvalResult evaluate(const core::Scenario& scenario, const core::Program& program) {
  const std::string why = block_path_unsupported(scenario, program);
  if (!why.empty()) {
    EvalResult r = evaluate_op_level(scenario, program);
    r.fallback_reason = why;
    return r;
  }
  return run_block_schedule(scenario, program);
}

}  // namespace csim::block
