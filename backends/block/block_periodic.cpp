// docs/block-eval.md, "Periodic steady state": a pipeline of many micro-batches evaluated from two
// short pipelines of the same configuration. Past its warm-up, a 1F1B or interleaved 1F1B
// schedule repeats every p micro-batches (the interleaved schedule's group: p micro-batches times
// v chunks), so the step time, the exposed communication and the memory peaks (the input batch is
// held for the whole step) grow by the same amount per p micro-batches; the warm-up, the flush,
// the last micro-batch's gradient reduction and the optimizer are simulated, not modelled.
#include <algorithm>
#include <cstdint>

#include "backends/block/block_eval.hpp"
#include "backends/block/schedule.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"

namespace csim::block {

namespace {

// The scenario with m micro-batches per pipeline (the global batch that gives them).
core::Scenario with_micro_batches(const core::Scenario& s, std::int64_t m) {
  core::Scenario r = s;
  core::ParallelSpec& ps = r.strategy.parallel;
  ps.micro_batches = m;
  r.training.global_batch = m * ps.dp * ps.micro_batch_size;
  if (r.training.gradient_accumulation == s.strategy.parallel.micro_batches)
    r.training.gradient_accumulation = static_cast<int>(m);
  return r;
}

// A short pipeline lowered by its strategy without core::lower's validate_program, an assertion
// over every op (8 % of the lowering's time here): the same lowering code at the scenario's own m
// is validated by every lowering of the whole Program, and the tests lower these short ones
// through core::lower too. The kinds are periodic_unsupported's.
core::Program lower_short(const core::Scenario& s) {
  switch (s.strategy.kind) {
    case core::StrategyKind::kPipeline:
      return core::lower_pipeline(s);
    case core::StrategyKind::kTensorParallel:
      return core::lower_tensor_parallel(s);
    case core::StrategyKind::k3d:
      return core::lower_3d(s);
    case core::StrategyKind::kZero:
      return core::lower_zero(s);
    case core::StrategyKind::kFsdp:
      return core::lower_fsdp(s);
    default:
      return core::lower(s);
  }
}

// a + k (b - a), exactly in integers (nanoseconds or bytes).
std::int64_t extend(std::int64_t a, std::int64_t b, std::int64_t k) {
  return a + k * (b - a);
}

}  // namespace

std::string periodic_unsupported(const core::Scenario& s) {
  const core::ParallelSpec& ps = s.strategy.parallel;
  switch (s.strategy.kind) {
    case core::StrategyKind::kPipeline:
    case core::StrategyKind::k3d:
    case core::StrategyKind::kZero:
    case core::StrategyKind::kFsdp:
    case core::StrategyKind::kTensorParallel:
      break;
    default:
      return "not a pipeline of the 3D lowering";
  }
  if (ps.pp < 2) return "one pipeline stage";
  // GPipe holds every micro-batch's activations until the backward: its peaks are not periodic.
  if (ps.schedule == core::PipelineSchedule::kGpipe) return "GPipe schedule";
  const std::int64_t p = ps.pp;
  if (ps.micro_batches < kPeriodicFirst * p + 2 * p) return "too few micro-batches to gain";
  if (ps.micro_batches % p != 0) return "micro-batches not a multiple of the stages";
  // A last, shorter batch (training.dataset_size) breaks the repetition across steps.
  if (s.training.dataset_size > 0) return "training.dataset_size set";
  // keep_outputs keeps every micro-batch's evaluation outputs (docs/memory.md).
  if (s.training.leak_keep_outputs) return "training.leaks.keep_outputs";
  return {};
}

std::optional<EvalResult> evaluate_periodic(const core::Scenario& s, std::string* why) {
  auto no = [&](std::string reason) -> std::optional<EvalResult> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  if (std::string r = periodic_unsupported(s); !r.empty()) return no(r);
  const std::int64_t p = s.strategy.parallel.pp, m = s.strategy.parallel.micro_batches;
  const std::int64_t ma = kPeriodicFirst * p, mb = ma + p;
  const core::Scenario sa = with_micro_batches(s, ma), sb = with_micro_batches(s, mb);
  // A rule the lowering checks on the short pipelines only is not the scenario's error: the whole
  // Program is lowered instead, and says whether it is.
  core::Program pa, pb;
  try {
    pa = lower_short(sa);
    pb = lower_short(sb);
  } catch (const InputError& e) {
    return no(std::string("a short pipeline does not lower: ") + e.what());
  }
  // The two pipelines move the same transfers: each is timed once (detail::TransferTable).
  detail::TransferTable transfers;
  std::string wa;
  std::optional<EvalResult> a = detail::evaluate_block_shared(sa, pa, &wa, &transfers);
  if (!a) return no(wa);
  if (a->oom) return no("out of memory at " + std::to_string(ma) + " micro-batches");
  std::string wb;
  std::optional<EvalResult> b = detail::evaluate_block_shared(sb, pb, &wb, &transfers);
  if (!b) return no(wb);
  if (b->oom) return no("out of memory at " + std::to_string(mb) + " micro-batches");
  if (a->peaks.size() != b->peaks.size()) return no("different GPUs simulated");
  // One period adds time and holds at least as much memory; anything else is not a steady state.
  if (b->step_time_ns <= a->step_time_ns || b->exposed_comm_ns < a->exposed_comm_ns)
    return no("no steady state between " + std::to_string(ma) + " and " + std::to_string(mb));
  const std::int64_t k = (m - ma) / p;
  EvalResult r = *b;
  r.step_time_ns = extend(a->step_time_ns, b->step_time_ns, k);
  r.exposed_comm_ns = extend(a->exposed_comm_ns, b->exposed_comm_ns, k);
  for (std::size_t i = 0; i < r.peaks.size(); ++i) {
    const GpuPeak& x = a->peaks[i];
    GpuPeak& y = r.peaks[i];
    if (x.gpu != y.gpu || y.peak_bytes < x.peak_bytes) return no("memory peaks not periodic");
    y.peak_bytes = extend(x.peak_bytes, y.peak_bytes, k);
    // The verdict needs the allocation of the full Program that crosses the capacity.
    if (y.peak_bytes > y.capacity_bytes) return no("out of memory when extended");
  }
  r.units = a->units + b->units;
  r.chains = a->chains + b->chains;
  r.chained_ops = a->chained_ops + b->chained_ops;
  r.transfers_timed = a->transfers_timed + b->transfers_timed;
  r.periodic_micro_batches = {static_cast<int>(ma), static_cast<int>(mb)};
  return r;
}

EvalResult evaluate_scenario(const core::Scenario& s, core::Program* program) {
  std::string why;
  if (std::optional<EvalResult> r = evaluate_periodic(s, &why)) return *r;
  core::Program full = core::lower(s);
  EvalResult r = evaluate(s, full);
  r.periodic_reason = why;
  if (program) *program = std::move(full);
  return r;
}

}  // namespace csim::block
