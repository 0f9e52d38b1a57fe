// A progress line on stderr for one long run (simrun): the executor counts the ops it finished
// (core::RunControl::ops_done) and a reporter thread prints "simrun: simulating 37 % (45,056 of
// 121,344 ops, 3.2 s)". On a terminal the line is redrawn in place about 4 times a second; on a
// pipe or file (`--progress`) a new line is written every second, so a log or a test can follow it.
// Nothing is printed for runs shorter than the first report, nor under -q without --progress.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

#include "run/run.hpp"

namespace csim::app {

enum class ProgressMode { kOff, kTerminal, kLines };

// Asked for (--progress, which wins over -q): kTerminal on a terminal, else kLines. Otherwise
// kTerminal when stderr is a terminal and not quiet, else off.
ProgressMode progress_mode(bool quiet, bool forced);

// "simulating 37 % (45,056 of 121,344 ops, 3.2 s)": the text of one report; with total 0,
// "lowering (3.2 s)".
std::string progress_text(const std::string& phase, std::int64_t done, std::int64_t total,
                          double elapsed_s);

class RunProgress final : public run::ProgressSink {
 public:
  // Reports `counter` until stop() or destruction; the phase starts as `phase` with no total
  // ("simrun: lowering (1.0 s)") until set_phase gives one.
  RunProgress(std::ostream& err, ProgressMode mode, std::string phase,
              std::atomic<std::int64_t>* counter);
  ~RunProgress() override;
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;
  void stop();
  // A new phase, e.g. ("simulating", ops in the Program); total 0: no count shown.
  void set_phase(std::string phase, std::int64_t total) override;

 private:
  void report_loop();

  std::ostream& err_;
  ProgressMode mode_;
  std::string phase_;       // under mu_
  std::int64_t total_ = 0;  // under mu_
  std::atomic<std::int64_t>* counter_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool drawn_ = false;  // a terminal line is on screen and needs its newline
  std::thread thread_;
};

}  // namespace csim::app
