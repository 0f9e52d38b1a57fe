// A progress line on stderr for one long run (simrun): the code doing the work names each phase
// with the units it counts and publishes how many are done (core/progress.hpp); a reporter thread
// prints "simrun: simulating 37 % (3,512,071 of 9,492,224 op issues and ends, 3.2 s)". On a
// terminal the line is redrawn in place about 4 times a second; on a pipe or file (`--progress`) a
// new line is written every second, so a log or a test can follow it. Nothing is printed for runs
// shorter than the first report, nor under -q without --progress. The phases and their units:
// docs/limits.md, "Progress".
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "core/progress.hpp"

namespace csim::app {

enum class ProgressMode { kOff, kTerminal, kLines };

// Asked for (--progress, which wins over -q): kTerminal on a terminal, else kLines. Otherwise
// kTerminal when stderr is a terminal and not quiet, else off.
ProgressMode progress_mode(bool quiet, bool forced);

// "simulating 37 % (3,512,071 of 9,492,224 op issues and ends, 3.2 s)": the text of one report;
// with total 0, "analysing memory (3.2 s)". The percentage is rounded down and at most 100.
std::string progress_text(const std::string& phase, std::int64_t done, std::int64_t total,
                          const std::string& unit, double elapsed_s);

class RunProgress final : public core::Progress {
 public:
  // Reports from now until stop() or destruction; the phase starts as `phase`, not counted, until
  // the work begins one with a total.
  RunProgress(std::ostream& err, ProgressMode mode, std::string phase);
  ~RunProgress() override;
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;
  // Stops reporting (a terminal line is ended), e.g. while the summary table is printed; resume()
  // starts again, the elapsed time still counted from the construction.
  void stop();
  void resume();

 protected:
  void on_phase(const std::string& phase, std::int64_t total, const std::string& unit) override;

 private:
  void report_loop();

  std::ostream& err_;
  ProgressMode mode_;
  std::string phase_;       // under mu_
  std::int64_t total_ = 0;  // under mu_
  std::string unit_;        // under mu_
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool drawn_ = false;  // a terminal line is on screen and needs its newline
  std::thread thread_;
};

}  // namespace csim::app
