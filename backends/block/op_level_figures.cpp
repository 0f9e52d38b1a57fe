// The op-level path (docs/block-eval.md, "Figures"): the simulator's op timings turned into the
// summary's step time, memory peaks and exposed communication without building a trace.
#include <algorithm>

#include "backends/block/block_eval.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/program/step_spans.hpp"

namespace csim::block {
namespace {

struct Edge {
  TimeNs t;
  int kind;  // 0 compute, 1 communication
  int delta;
};

// docs/block-eval.md, "Exposed communication": |comm \ compute| within the window, per GPU, the
// sweep of docs/summary.md's "Time split" restricted to the two classes it needs.
TimeNs exposed_in(std::vector<Edge>& edges, const std::vector<std::pair<TimeNs, TimeNs>>& window) {
  for (const auto& [a, b] : window) {
    if (b <= a) continue;
    edges.push_back({a, 2, +1});
    edges.push_back({b, 2, -1});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& x, const Edge& y) { return x.t < y.t; });
  int active[3] = {0, 0, 0};
  TimeNs out = 0;
  for (std::size_t i = 0; i < edges.size();) {
    const TimeNs now = edges[i].t;
    while (i < edges.size() && edges[i].t == now) {
      active[edges[i].kind] += edges[i].delta;
      ++i;
    }
    if (i == edges.size()) break;
    if (active[2] > 0 && active[0] == 0 && active[1] > 0) out += edges[i].t - now;
  }
  return out;
}

}  // namespace

const char* to_string(EvalPath p) {
  return p == EvalPath::kBlock ? "block" : "op-level";
}

Bytes EvalResult::max_peak_bytes() const {
  Bytes m = 0;
  for (const GpuPeak& g : peaks) m = std::max(m, g.peak_bytes);
  return m;
}

EvalResult evaluate_op_level(const core::Scenario& scenario, const core::Program& program) {
  sim::SimExecutor exec(scenario);
  const core::ExecutionResult res = exec.run(program, {});
  return figures_from_timings(program, res,
                              core::memory_timeline(program, res.timings, scenario.cluster));
}

EvalResult figures_from_timings(const core::Program& program, const core::ExecutionResult& res,
                                const core::MemoryReport& mem) {
  EvalResult r;
  r.path = EvalPath::kOpLevel;
  const std::vector<core::StepSpan> spans = core::step_spans(program, res.timings);
  r.step_time_ns = static_cast<TimeNs>(std::llround(core::step_time_s(spans) * 1e9));
  for (const core::GpuMemory& g : mem.gpus)
    r.peaks.push_back({g.gpu, std::max(g.peak_bytes, g.steady_peak_bytes), g.capacity_bytes});
  // Allocated bytes only, as the block path judges them: the caching allocator's own verdict
  // (fragmentation) is simrun's (docs/memory.md, "OOM verdict").
  if (mem.oom && !mem.oom->allocator)
    r.oom = Oom{mem.oom->gpu, mem.oom->op, mem.oom->steady_state, mem.oom->op_name};
  // The window (docs/summary.md, "Window"): steps merged over GPUs; [end_{N-1}, end_N] for N >= 2,
  // or [start_1, end_1] with one step.
  std::vector<std::pair<int, std::pair<TimeNs, TimeNs>>> steps;
  for (const core::StepSpan& s : spans) {
    auto it =
        std::find_if(steps.begin(), steps.end(), [&](const auto& e) { return e.first == s.step; });
    if (it == steps.end()) {
      steps.push_back({s.step, {s.start_ns, s.end_ns}});
    } else {
      it->second.first = std::min(it->second.first, s.start_ns);
      it->second.second = std::max(it->second.second, s.end_ns);
    }
  }
  std::sort(steps.begin(), steps.end());
  std::vector<std::pair<TimeNs, TimeNs>> window;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const bool chained = k > 0 && steps[k].first == steps[k - 1].first + 1;
    const TimeNs from = chained ? steps[k - 1].second.second : steps[k].second.first;
    if (steps.size() == 1 || k > 0) window.push_back({from, steps[k].second.second});
  }
  if (window.empty()) return r;
  std::vector<std::vector<Edge>> edges(static_cast<std::size_t>(program.world_gpus));
  for (const core::Op& op : program.ops) {
    if (op.stream < 0) continue;
    const bool compute = op.kind == core::OpKind::kCompute;
    if (!compute && op.kind != core::OpKind::kCollective) continue;
    const core::OpTiming& t = res.timings[static_cast<std::size_t>(op.id)];
    if (t.end_ns - t.start_ns <= 0) continue;
    auto& e =
        edges[static_cast<std::size_t>(program.streams[static_cast<std::size_t>(op.stream)].gpu)];
    e.push_back({t.start_ns, compute ? 0 : 1, +1});
    e.push_back({t.end_ns, compute ? 0 : 1, -1});
  }
  TimeNs total = 0;
  for (const int g : program.active_gpus) {
    const int weight = program.symmetry.enabled()
                           ? program.symmetry.weight_of_gpu[static_cast<std::size_t>(g)]
                           : 1;
    if (weight == 0) continue;
    total += weight * exposed_in(edges[static_cast<std::size_t>(g)], window);
  }
  r.exposed_comm_ns = total / static_cast<TimeNs>(window.size());
  return r;
}

}  // namespace csim::block
