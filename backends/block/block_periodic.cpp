// docs/block-eval.md, "Periodic steady state": a pipeline of many micro-batches evaluated from two
// short pipelines of the same configuration. Past its warm-up, a 1F1B or interleaved 1F1B
// schedule repeats every p micro-batches (the interleaved schedule's group: p micro-batches times
// v chunks), so the step time, the exposed communication and the memory peaks (the input batch is
// held for the whole step) grow by the same amount per p micro-batches; GPipe grows by one forward,
// one backward and one micro-batch's activations per micro-batch; the warm-up, the flush, the last
// micro-batch's gradient reduction and the optimizer are simulated, not modelled. A layout that
// runs out of memory gets the whole Program's verdict from the two ("Out of memory"; GPipe: "Out of
// memory before the last forward", block_oom_prefix.cpp).
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

// docs/block-eval.md, "Out of memory": the whole Program's OOM verdict from the two short
// pipelines (a's verdict, b's schedule), where the argument there holds (else nullopt, *why says
// which part fails). `more`: per GPU (index in the figures' peaks), the extended peak less the
// longer pipeline's.
std::optional<Oom> whole_verdict(const std::optional<detail::MemVerdict>& va,
                                 const detail::Schedule& xb, const std::vector<Bytes>& more,
                                 std::string* why) {
  const std::optional<detail::MemVerdict>& vb = xb.verdict();
  if (!vb) {
    *why = "only when extended";
    return std::nullopt;
  }
  // Bounded below by b and above by b with `more` added to every allocation of the step: the
  // same allocation first over capacity at both bounds is the whole Program's.
  const std::optional<detail::MemVerdict> hi = xb.verdict_with_less(more);
  if (!hi || hi->oom.op != vb->oom.op || hi->oom.steady_state != vb->oom.steady_state) {
    *why = "the first allocation over capacity depends on the micro-batches";
    return std::nullopt;
  }
  // That allocation is named alike in the whole Program where the shorter pipeline runs out at
  // the allocation of the same name, as many allocations and frees from its stream's start or
  // end.
  const bool same = va && va->oom.gpu == vb->oom.gpu &&
                    va->oom.steady_state == vb->oom.steady_state &&
                    va->oom.op_name == vb->oom.op_name &&
                    (va->nth == vb->nth || va->of - va->nth == vb->of - vb->nth);
  if (!same) {
    *why = "the two pipelines' verdicts differ";
    return std::nullopt;
  }
  Oom r = vb->oom;
  r.op = core::kNoOp;
  return r;
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
  // DualPipeV's steady phase has m - 2p + r + 1 rounds on rank r (pipeline_dualpipev.cpp): its
  // linearity in m between 2p and 3p micro-batches is not established (docs/block-eval.md).
  if (ps.schedule == core::PipelineSchedule::kDualPipeV) return "DualPipeV schedule";
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
  // The two pipelines move the same transfers: each is timed once (detail::TransferTable). The
  // first Schedule is gone before the second is built, which reuses its memory (holding both was
  // measured 8 % slower on GPT-3 175B at batch 1,536); the second is kept for its verdict.
  detail::TransferTable transfers;
  EvalResult a;
  std::optional<detail::MemVerdict> va;
  {
    detail::Schedule xa(sa, pa, &transfers);
    if (std::string w = xa.build(); !w.empty()) return no(w);
    a = xa.run();
    va = xa.verdict();
  }
  detail::Schedule xb(sb, pb, &transfers);
  if (std::string w = xb.build(); !w.empty()) return no(w);
  const EvalResult b = xb.run();
  if (a.peaks.size() != b.peaks.size()) return no("different GPUs simulated");
  // One period adds time and holds at least as much memory; anything else is not a steady state.
  if (b.step_time_ns <= a.step_time_ns || b.exposed_comm_ns < a.exposed_comm_ns)
    return no("no steady state between " + std::to_string(ma) + " and " + std::to_string(mb));
  const std::int64_t k = (m - ma) / p;
  EvalResult r = b;
  r.step_time_ns = extend(a.step_time_ns, b.step_time_ns, k);
  r.exposed_comm_ns = extend(a.exposed_comm_ns, b.exposed_comm_ns, k);
  // What the whole Program holds above the longer pipeline, per GPU (docs/block-eval.md, "Out of
  // memory"): the extended peak less b's.
  std::vector<Bytes> more(r.peaks.size(), 0);
  bool over = false;
  for (std::size_t i = 0; i < r.peaks.size(); ++i) {
    const GpuPeak& x = a.peaks[i];
    GpuPeak& y = r.peaks[i];
    if (x.gpu != y.gpu || y.peak_bytes < x.peak_bytes) return no("memory peaks not periodic");
    y.peak_bytes = extend(x.peak_bytes, y.peak_bytes, k);
    more[i] = y.peak_bytes - b.peaks[i].peak_bytes;
    over = over || y.peak_bytes > y.capacity_bytes;
  }
  if (a.oom || b.oom || over) {
    // GPipe holds every micro-batch's activations until the backward, so the whole Program is
    // not b with periods inserted at its cool-down: its verdict must come before b's last
    // forward ("Out of memory before the last forward").
    std::string reason;
    std::optional<Oom> oom = s.strategy.parallel.schedule == core::PipelineSchedule::kGpipe
                                 ? detail::prefix_verdict(s, pb, mb, xb, b.peaks, &reason)
                                 : whole_verdict(va, xb, more, &reason);
    if (!oom) return no("out of memory: " + reason);
    r.oom = std::move(oom);
  }
  r.units = a.units + b.units;
  r.chains = a.chains + b.chains;
  r.chained_ops = a.chained_ops + b.chained_ops;
  r.transfers_timed = a.transfers_timed + b.transfers_timed;
  r.periodic_micro_batches = {static_cast<int>(ma), static_cast<int>(mb)};
  return r;
}

EvalResult evaluate_scenario_verdict(const core::Scenario& s, core::Program* program) {
  std::string why;
  if (std::optional<EvalResult> r = evaluate_periodic(s, &why)) return *r;
  const std::int64_t p = s.strategy.parallel.pp, m = s.strategy.parallel.micro_batches;
  const std::int64_t ms = kPeriodicFirst * p;
  // docs/block-eval.md, "A verdict alone": m = 3p, whose two short pipelines would cost more
  // than the whole one; the other reasons periodic_unsupported gives hold for any pipeline.
  if (why == "too few micro-batches to gain" && m > ms && m % p == 0) {
    const core::Scenario ss = with_micro_batches(s, ms);
    try {
      const core::Program ps = lower_short(ss);
      detail::Schedule x(ss, ps);
      if (x.build().empty()) {
        EvalResult r = x.run();
        std::string reason;
        if (std::optional<Oom> oom = detail::prefix_verdict(s, ps, ms, x, r.peaks, &reason)) {
          r.oom = std::move(oom);
          r.verdict_only = true;
          r.periodic_micro_batches = {static_cast<int>(ms), 0};
          return r;
        }
      }
    } catch (const InputError&) {  // the whole Program is lowered below, and says
    }
  }
  core::Program full = core::lower(s);
  EvalResult r = evaluate(s, full);
  r.periodic_reason = why;
  if (program) *program = std::move(full);
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
