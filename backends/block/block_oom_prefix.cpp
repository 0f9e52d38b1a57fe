// docs/block-eval.md, "Out of memory before the last forward": a pipeline that runs out of memory
// before its shortest stage has started its last forward runs out at the same allocation with
// more micro-batches, up to the input batch, the one allocation whose bytes grow with them.
#include <cmath>
#include <cstdint>

#include "backends/block/schedule.hpp"

namespace csim::block::detail {

TimeNs Schedule::last_forward_start() const {
  // Per GPU, the latest start of a chain of the first step on its compute stream that holds a
  // forward op: no later than the start of the GPU's last forward kernel of that step (every op
  // of a chain starts at or after the chain), after which the two Programs part.
  std::vector<TimeNs> last(static_cast<std::size_t>(program_.world_gpus), -1);
  for (const Unit& u : units_) {
    if (u.start_ns < 0 || u.step != 1 || u.kind != UnitKind::kChain ||
        u.stream != compute_stream_of_gpu_[static_cast<std::size_t>(u.gpu)])
      continue;
    const StreamSlots& st = streams_[static_cast<std::size_t>(u.stream)];
    for (int k = u.first; k < u.end; ++k)
      if (program_.ops[static_cast<std::size_t>(st.op[static_cast<std::size_t>(k)])].phase ==
          core::Phase::kForward) {
        TimeNs& l = last[static_cast<std::size_t>(u.gpu)];
        l = std::max(l, u.start_ns);
        break;
      }
  }
  TimeNs first = -1;
  for (TimeNs l : last)
    if (l >= 0) first = first < 0 ? l : std::min(first, l);
  return first;
}

namespace {

// The input batch of n micro-batches as core::DataFeed::next_batch sizes it
// (core/lowering/program_builder.cpp): llround(samples x input_bytes_per_sample).
Bytes input_batch_bytes(const core::Scenario& s, std::int64_t n) {
  const double samples = static_cast<double>(n * s.strategy.parallel.micro_batch_size);
  return static_cast<Bytes>(std::llround(samples * s.model.input_bytes_per_sample));
}

}  // namespace

std::optional<Oom> prefix_verdict(const core::Scenario& s, const core::Program& short_program,
                                  std::int64_t m_short, const Schedule& x,
                                  const std::vector<GpuPeak>& peaks, std::string* why) {
  const std::optional<MemVerdict>& v = x.verdict();
  if (!v) {
    *why = "the shorter pipeline fits";
    return std::nullopt;
  }
  if (v->oom.steady_state) {
    *why = "its verdict is the steady state's";
    return std::nullopt;
  }
  // What the whole Program's input batch holds above the short one's, per GPU of the figures.
  const std::int64_t m = s.strategy.parallel.micro_batches;
  std::vector<int> index(static_cast<std::size_t>(short_program.world_gpus), -1);
  for (std::size_t k = 0; k < peaks.size(); ++k)
    index[static_cast<std::size_t>(peaks[k].gpu)] = static_cast<int>(k);
  std::vector<Bytes> more(peaks.size(), 0);
  for (const core::Op& op : short_program.ops) {
    // The first step's: the verdict comes before its last forward (checked below).
    if (op.kind != core::OpKind::kAlloc || op.step != 1) continue;
    if (short_program.name_of(op) != "input batch") continue;
    if (input_batch_bytes(s, m_short) != op.bytes) {
      *why = "an input batch is not one batch of the step's samples";
      return std::nullopt;
    }
    const int k = index[static_cast<std::size_t>(op.gpu)];
    if (k >= 0) more[static_cast<std::size_t>(k)] += input_batch_bytes(s, m) - op.bytes;
  }
  // The same allocation first over capacity with and without that growth, before any GPU's
  // last forward: the whole Program's verdict.
  const std::optional<MemVerdict> hi = x.verdict_with_less(more);
  if (!hi || hi->oom.op != v->oom.op) {
    *why = "the first allocation over capacity depends on the micro-batches";
    return std::nullopt;
  }
  const TimeNs last = x.last_forward_start();
  if (last < 0 || v->t >= last) {
    *why = "the first allocation over capacity is not before the last forward";
    return std::nullopt;
  }
  Oom r = v->oom;
  r.op = core::kNoOp;
  return r;
}

}  // namespace csim::block::detail
