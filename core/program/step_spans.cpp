// docs/summary.md, "Steps".
#include "core/program/step_spans.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace csim::core {

std::vector<int> loop_thread_of_gpu(const Program& p) {
  int max_gpu = -1;
  for (const ThreadDesc& t : p.threads) max_gpu = std::max(max_gpu, t.gpu);
  std::vector<int> first(static_cast<std::size_t>(max_gpu + 1), -1);
  for (const ThreadDesc& t : p.threads)
    if (t.gpu >= 0 && first[static_cast<std::size_t>(t.gpu)] < 0)
      first[static_cast<std::size_t>(t.gpu)] = t.id;
  return first;
}

std::vector<StepSpan> step_spans(const Program& p, const std::vector<OpTiming>& timing,
                                 ProgressCount* count) {
  const std::vector<int> loop = loop_thread_of_gpu(p);
  std::map<std::pair<int, int>, std::pair<TimeNs, TimeNs>> span;  // (gpu, step) -> [start, end]
  constexpr TimeNs kUnset = std::numeric_limits<TimeNs>::max();
  // (gpu, step) -> the earliest host activity a trace draws for the step on the loop thread: the
  // ops that issue GPU work or run on the host (allocations, frees and markers draw nothing).
  std::map<std::pair<int, int>, TimeNs> drawn_begin;
  // Consecutive ops mostly share their (gpu, step): the last entry found is tried first.
  using SpanIt = decltype(span)::iterator;
  using DrawnIt = decltype(drawn_begin)::iterator;
  SpanIt last_span = span.end();
  DrawnIt last_drawn = drawn_begin.end();
  for (const Op& op : p.ops) {
    if (count) count->add();
    const OpTiming& t = timing[static_cast<std::size_t>(op.id)];
    if (op.step <= 0 || t.end_ns < 0) continue;
    const int thread_gpu = p.threads[static_cast<std::size_t>(op.thread)].gpu;
    const int gpu =
        op.stream >= 0 ? p.streams[static_cast<std::size_t>(op.stream)].gpu : thread_gpu;
    const bool loop_thread = thread_gpu == gpu && thread_gpu >= 0 &&
                             op.thread == loop[static_cast<std::size_t>(thread_gpu)];
    const TimeNs begin = !loop_thread      ? kUnset
                         : t.ready_ns >= 0 ? std::min(t.ready_ns, t.start_ns)
                                           : t.start_ns;
    if (begin != kUnset && op.kind != OpKind::kAlloc && op.kind != OpKind::kFree &&
        op.kind != OpKind::kMarker) {
      const std::pair<int, int> key{gpu, op.step};
      if (last_drawn != drawn_begin.end() && last_drawn->first == key) {
        last_drawn->second = std::min(last_drawn->second, begin);
      } else {
        auto [d, fresh_d] = drawn_begin.try_emplace(key, begin);
        if (!fresh_d) d->second = std::min(d->second, begin);
        last_drawn = d;
      }
    }
    const std::pair<int, int> key{gpu, op.step};
    if (last_span != span.end() && last_span->first == key) {
      last_span->second.first = std::min(last_span->second.first, begin);
      last_span->second.second = std::max(last_span->second.second, t.end_ns);
      continue;
    }
    auto [it, fresh] = span.try_emplace(key, begin, t.end_ns);
    if (!fresh) {
      it->second.first = std::min(it->second.first, begin);
      it->second.second = std::max(it->second.second, t.end_ns);
    }
    last_span = it;
  }
  for (const Op& op : p.ops) {
    const OpTiming& t = timing[static_cast<std::size_t>(op.id)];
    if (op.step <= 0 || t.end_ns < 0 || op.stream < 0) continue;
    const std::pair<int, int> key{p.streams[static_cast<std::size_t>(op.stream)].gpu, op.step};
    if (last_span == span.end() || last_span->first != key) last_span = span.find(key);
    if (last_span != span.end() && last_span->second.first == kUnset)
      last_span->second.first = t.start_ns;
  }
  // Steps tile each GPU's lane: a step starts no earlier than the previous step on that GPU ended.
  // A thread reaching its next step's first op early (DataParallel's replica threads, free as soon
  // as their forward is issued, reach the next step's allocations long before its replicate) would
  // otherwise open step N+1 inside step N. Only starts move, and a step's time is measured from the
  // previous step's end (step_time_s), so step times do not change.
  // When the loop thread itself runs ahead (it issues step N+1's work while step N's last GPU op
  // still runs), the boundary is the host's, as profiler.step() draws it: step N ends where the
  // thread's step N+1 activity begins, so that activity nests in ProfilerStep#N+1.
  std::vector<StepSpan> out;
  out.reserve(span.size());
  for (const auto& [key, se] : span) {
    StepSpan ss{key.first, key.second, se.first == kUnset ? se.second : se.first, se.second};
    if (!out.empty() && out.back().gpu == ss.gpu) {
      StepSpan& prev = out.back();
      const auto d = drawn_begin.find(key);
      if (d != drawn_begin.end() && d->second < prev.end_ns && prev.step + 1 == ss.step) {
        prev.end_ns = std::max(prev.start_ns, d->second);
      }
      ss.start_ns = std::max(ss.start_ns, prev.end_ns);
      ss.end_ns = std::max(ss.end_ns, ss.start_ns);
    }
    out.push_back(ss);
  }
  return out;
}

double step_time_s(const std::vector<StepSpan>& spans) {
  std::map<int, std::pair<TimeNs, TimeNs>> by_step;
  for (const StepSpan& s : spans) {
    auto [it, fresh] = by_step.try_emplace(s.step, s.start_ns, s.end_ns);
    if (!fresh) {
      it->second.first = std::min(it->second.first, s.start_ns);
      it->second.second = std::max(it->second.second, s.end_ns);
    }
  }
  std::vector<TimeNs> times;
  int prev_n = 0;
  TimeNs prev_end = 0;
  for (const auto& [n, se] : by_step) {
    const bool chained = !times.empty() && n == prev_n + 1;
    times.push_back(se.second - (chained ? prev_end : se.first));
    prev_n = n;
    prev_end = se.second;
  }
  if (times.empty()) return 0;
  if (times.size() == 1) return static_cast<double>(times[0]) * 1e-9;
  std::vector<TimeNs> rest(times.begin() + 1, times.end());
  std::sort(rest.begin(), rest.end());
  const std::size_t m = rest.size() / 2;
  if (rest.size() % 2 == 1) return static_cast<double>(rest[m]) * 1e-9;
  return (static_cast<double>(rest[m - 1]) * 1e-9 + static_cast<double>(rest[m]) * 1e-9) / 2.0;
}

}  // namespace csim::core
