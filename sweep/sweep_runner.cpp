// docs/sweep.md, "Running".
#include "sweep/sweep_runner.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

namespace csim::sweep {

std::string progress_line(const SweepProgress& p) {
  constexpr int kWidth = 24;
  const double f = p.total ? static_cast<double>(p.done) / static_cast<double>(p.total) : 1.0;
  std::string bar(static_cast<std::size_t>(kWidth), '-');
  for (int i = 0; i < static_cast<int>(f * kWidth + 1e-9); ++i)
    bar[static_cast<std::size_t>(i)] = '#';
  const double rate = p.elapsed_s > 0 ? static_cast<double>(p.done) / p.elapsed_s : 0;
  char buf[200];
  // The percentage rounded down, as simrun's progress line (docs/limits.md, "Progress").
  const std::size_t percent = p.total ? 100 * p.done / p.total : 100;
  std::snprintf(buf, sizeof buf, "[%s] %zu %% %zu/%zu  %zu OOM  %zu invalid  %.0f variants/s",
                bar.c_str(), percent, p.done, p.total, p.oom, p.invalid, rate);
  std::string s = buf;
  if (rate > 0 && p.done < p.total) {
    std::snprintf(buf, sizeof buf, "  eta %.1f s", static_cast<double>(p.total - p.done) / rate);
    s += buf;
  }
  return s;
}

SweepRunOutcome run_variants(const nlohmann::json& doc, const std::string& scenario_name,
                             const std::vector<std::string>& base_sets,
                             const std::vector<Knob>& knobs, const std::vector<Variant>& variants,
                             const SweepRunOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  auto cancelled = [&] { return options.cancel && options.cancel->load(); };

  std::vector<std::optional<VariantResult>> slots(variants.size());
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::condition_variable cv;
  std::size_t done = 0, oom = 0, invalid = 0;
  int running = 0;
  core::RunControl control;
  control.cancel = options.cancel;

  auto worker = [&] {
    for (;;) {
      if (cancelled()) break;
      const std::size_t i = next.fetch_add(1);
      if (i >= variants.size()) break;
      std::vector<std::string> sets = base_sets;
      for (std::string& v : variant_sets(knobs, variants[i])) sets.push_back(std::move(v));
      VariantResult r = evaluate_variant(doc, scenario_name, sets, control, options.evaluation);
      if (r.status == VariantStatus::kFailed && r.error == "cancelled") break;  // not a result
      r.index = variants[i].index;
      r.values = variants[i].values;
      {
        std::lock_guard<std::mutex> lock(mu);
        oom += r.status == VariantStatus::kOom;
        invalid += r.status == VariantStatus::kInvalid;
        slots[i] = std::move(r);
        ++done;
        cv.notify_one();
      }
      if (options.on_row) options.on_row(*slots[i]);  // only read from here on: no lock
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_one();
  };

  const int n_threads =
      std::max(1, std::min<int>(options.threads, static_cast<int>(variants.size())));
  std::vector<std::thread> pool;
  running = n_threads;
  for (int t = 0; t < n_threads; ++t) pool.emplace_back(worker);

  auto finished_rows = [&] {  // under mu
    std::vector<VariantResult> rows;
    rows.reserve(done);
    for (const auto& s : slots)
      if (s) rows.push_back(*s);
    return rows;
  };
  double last_report = 0, last_checkpoint = 0;
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(50));
      const double now = elapsed();
      if (options.on_progress && now - last_report >= options.report_every_s) {
        last_report = now;
        const SweepProgress p{done, variants.size(), oom, invalid, now};
        lock.unlock();
        options.on_progress(p);
        lock.lock();
      }
      if (options.on_checkpoint && now - last_checkpoint >= options.checkpoint_every_s &&
          running > 0) {
        last_checkpoint = now;
        const std::vector<VariantResult> rows = finished_rows();
        lock.unlock();
        options.on_checkpoint(rows);
        lock.lock();
      }
    }
  }
  for (std::thread& t : pool) t.join();
  SweepRunOutcome out;
  out.rows = finished_rows();
  out.complete = out.rows.size() == variants.size();
  out.wall_s = elapsed();
  if (options.on_progress) options.on_progress({done, variants.size(), oom, invalid, out.wall_s});
  return out;
}

}  // namespace csim::sweep
