#include "tools/run_progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace csim::app {
namespace {

std::string with_commas(std::int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

}  // namespace

ProgressMode progress_mode(bool quiet, bool forced) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (forced) return tty ? ProgressMode::kTerminal : ProgressMode::kLines;
  if (quiet || !tty) return ProgressMode::kOff;
  return ProgressMode::kTerminal;
}

std::string progress_text(const std::string& phase, std::int64_t done, std::int64_t total,
                          const std::string& unit, double elapsed_s) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f s", elapsed_s);
  if (total <= 0) return phase + " (" + secs + ")";
  const std::int64_t shown = std::min(std::max<std::int64_t>(done, 0), total);
  // Rounded down: 100 % only once every unit is done (counts are far below 2^63 / 100).
  const int percent = static_cast<int>(100 * shown / total);
  return phase + " " + std::to_string(percent) + " % (" + with_commas(shown) + " of " +
         with_commas(total) + " " + unit + ", " + secs + ")";
}

void RunProgress::on_phase(const std::string& phase, std::int64_t total, const std::string& unit) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    phase_ = phase;
    total_ = total;
    unit_ = unit;
  }
}

RunProgress::RunProgress(std::ostream& err, ProgressMode mode, std::string phase)
    : err_(err), mode_(mode), phase_(std::move(phase)), start_(std::chrono::steady_clock::now()) {
  resume();
}

RunProgress::~RunProgress() {
  stop();
}

void RunProgress::resume() {
  if (mode_ == ProgressMode::kOff || thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { report_loop(); });
}

void RunProgress::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (drawn_) {
    err_ << "\n" << std::flush;
    drawn_ = false;
  }
}

// The period of lines on a pipe or file: a second, or CSIM_PROGRESS_PERIOD_MS (1 to 60,000) when
// set, so that a test following the lines sees one early in a run however fast the machine
// (tests/test_interrupt.cpp); anything else there is ignored.
namespace {
std::chrono::milliseconds line_period() {
  if (const char* v = std::getenv("CSIM_PROGRESS_PERIOD_MS")) {
    char* end = nullptr;
    const long ms = std::strtol(v, &end, 10);
    if (end != v && *end == '\0' && ms >= 1 && ms <= 60000) return std::chrono::milliseconds(ms);
  }
  return std::chrono::milliseconds(1000);
}
}  // namespace

void RunProgress::report_loop() {
  const auto period =
      mode_ == ProgressMode::kTerminal ? std::chrono::milliseconds(250) : line_period();
  std::unique_lock<std::mutex> lk(mu_);
  while (!cv_.wait_for(lk, period, [this] { return stopping_; })) {
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string line =
        "simrun: " + progress_text(phase_, total_ > 0 ? done() : 0, total_, unit_, elapsed_s);
    if (mode_ == ProgressMode::kTerminal) {
      err_ << "\r" << line << "\x1b[K" << std::flush;
      drawn_ = true;
    } else {
      err_ << line << "\n" << std::flush;
    }
  }
}

}  // namespace csim::app
