// The real executor on the CPU stand-in device (docs/real-execution.md): the host side (issuing
// threads, emulated GIL, host and stream waits, collectives' rendezvous, cancellation, errors) runs
// for real, so its ordering guarantees are checked on measured times, not on a model. These tests
// also run under ThreadSanitizer (the tsan preset).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include <csignal>
#include <cstdlib>

#include "backends/real/process_launcher.hpp"
#include "backends/real/rank_link.hpp"
#include "backends/real/real_executor.hpp"
#include "backends/real/standin_runtime.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/test_support.hpp"

using namespace csim;
using core::Op;
using core::OpKind;

namespace {

core::Scenario scenario(const std::string& file, std::vector<std::string> sets = {}) {
  return core::parse_scenario_file(test::scenario_path(file), std::move(sets));
}

struct StandinRun {
  core::Program p;
  core::ExecutionResult r;
};

StandinRun run_standin(const core::Scenario& s, real::RealOptions opts = {},
                       const core::RunControl& control = {}) {
  StandinRun out;
  out.p = core::lower(s);
  sim::SimExecutor sim(s);
  const core::ExecutionResult simulated = sim.run(out.p, {});
  real::StandinRuntime rt(real::standin_busy_ns(out.p, simulated), {});
  real::RealExecutor exec(rt, opts);
  out.r = exec.run(out.p, control);
  return out;
}

// The ordering every real run must show, whatever the machine's speed: each op ran; a stream's
// ops ran one at a time; an op started after its stream deps ended and was
// issued after its host deps ended; a collective's members all ended after the last one started.
void check_ordering(const StandinRun& run) {
  const auto& t = run.r.timings;
  std::map<int, std::vector<core::OpId>> by_stream;
  std::map<int, TimeNs> last_start_of_instance;
  for (const Op& op : run.p.ops) {
    INFO("op " << op.id << " '" << run.p.name_of(op) << "'");
    REQUIRE(t[op.id].end_ns >= t[op.id].start_ns);
    REQUIRE(t[op.id].start_ns >= 0);
    CHECK(t[op.id].issue_end_ns >= t[op.id].ready_ns);
    if (op.stream >= 0) {
      by_stream[op.stream].push_back(op.id);
      // Enqueued before it could run (a kernel may start before the launch call has returned,
      // so issue_end_ns is no bound).
      CHECK(t[op.id].start_ns >= t[op.id].ready_ns);
    }
    for (const core::Dep& d : op.deps) {
      if (d.kind == core::DepKind::kHostWaits || op.stream < 0 || run.p.ops[d.op].stream < 0)
        CHECK(t[op.id].ready_ns >= t[d.op].end_ns);
      else
        CHECK(t[op.id].start_ns >= t[d.op].end_ns);
    }
    if (op.kind == OpKind::kCollective) {
      auto& ls = last_start_of_instance[op.instance];
      ls = std::max(ls, t[op.id].start_ns);
    }
  }
  // A stream runs one op at a time (its FIFO is enqueue order, which across issuing threads is
  // not op-id order): sorted by start, each op starts after the previous one ended.
  for (auto& [stream, ids] : by_stream) {
    std::sort(ids.begin(), ids.end(),
              [&](core::OpId a, core::OpId b) { return t[a].start_ns < t[b].start_ns; });
    for (std::size_t i = 1; i < ids.size(); ++i) {
      INFO("stream " << stream << ": '" << run.p.name_of(ids[i - 1]) << "' then '"
                     << run.p.name_of(ids[i]) << "'");
      CHECK(t[ids[i]].start_ns >= t[ids[i - 1]].end_ns);
    }
  }
  for (const Op& op : run.p.ops) {
    if (op.kind == OpKind::kCollective)
      CHECK(t[op.id].end_ns >= last_start_of_instance[op.instance]);
  }
}

}  // namespace

TEST_CASE("stand-in: DataParallel threads run every op in a valid order", "[real][standin]") {
  const StandinRun run = run_standin(scenario("linear_5x2_dp4.json"));
  CHECK(run.r.backend == "cpu-standin");
  CHECK_FALSE(run.r.measured);  // never presented as a GPU measurement
  CHECK(run.r.complete);
  check_ordering(run);
}

TEST_CASE("stand-in: DDP processes with bucketed all-reduces on streams", "[real][standin]") {
  const StandinRun run = run_standin(scenario("linear_5x2_dp2.json", {"strategy.kind=ddp"}));
  CHECK(run.r.complete);
  check_ordering(run);
}

TEST_CASE("stand-in: the emulated GIL serialises one process's Python time", "[real][standin]") {
  // DataParallel: the replica threads of one Python process take turns holding the GIL. Each op's
  // GIL hold starts at ready + gil_wait and lasts at least python_ns; two holds of one process
  // never overlap, so sorted by start each begins after the previous one's start + python_ns.
  const StandinRun run = run_standin(scenario("linear_5x2_dp4.json"));
  std::map<int, std::vector<std::pair<TimeNs, TimeNs>>> holds;  // by process
  for (const Op& op : run.p.ops) {
    const auto& thr = run.p.threads[static_cast<std::size_t>(op.thread)];
    if (op.python_ns <= 0 || !run.p.processes[static_cast<std::size_t>(thr.process)].has_gil)
      continue;
    const auto& tm = run.r.timings[op.id];
    holds[thr.process].push_back({tm.ready_ns + tm.gil_wait_ns, op.python_ns});
  }
  REQUIRE_FALSE(holds.empty());
  std::size_t threads_seen = 0;
  for (auto& [process, h] : holds) {
    std::sort(h.begin(), h.end());
    for (std::size_t i = 1; i < h.size(); ++i)
      CHECK(h[i].first >= h[i - 1].first + h[i - 1].second);
    threads_seen += h.size();
  }
  CHECK(threads_seen > 10);
}

namespace {
// A stand-in whose host wait, once the op it waited for has finished, cancels the run: the
// cancel then follows an observable event (a device op done, its interval recorded) instead of a
// delay, so the run is cancelled with something finished however fast or slow the machine is.
class CancelAfterHostWait : public real::StandinRuntime {
 public:
  CancelAfterHostWait(std::vector<TimeNs> busy, std::atomic<bool>& cancel)
      : StandinRuntime(std::move(busy), {1000.0}), cancel_(cancel) {}
  void host_wait(core::OpId op) override {
    StandinRuntime::host_wait(op);  // returns once `op` is done (or throws when aborted)
    cancel_ = true;
  }

 private:
  std::atomic<bool>& cancel_;
};
}  // namespace

TEST_CASE("stand-in: a cancelled run stops, keeps what finished and says incomplete",
          "[real][standin]") {
  // The cancel is set by the first host wait for a device op (CancelAfterHostWait), on the
  // issuing thread itself, right before it checks RunControl::cancel for its next op. So when
  // run() returns: the waited-for op finished (ran > 0), and that thread issued none of its later
  // ops — the first such wait is in step 2 of 20, so that thread's later steps never ran
  // (ran < all ops).
  const core::Scenario s = scenario("linear_5x2_dp4.json", {"training.steps=20"});
  core::Program p = core::lower(s);
  // The executor host-waits for a device op of its own rank when the dep is kHostWaits or the
  // waiting op is host work (real_executor.cpp): find the first. It is in step 2 (index 1): the
  // main thread's "wait pageable copy", which waits for that step's input H2D copy from
  // pageable memory.
  int first_wait_step = -1;
  for (const Op& op : p.ops) {
    for (const core::Dep& d : op.deps) {
      const bool device_dep = p.ops[static_cast<std::size_t>(d.op)].stream >= 0;
      if (device_dep && (d.kind == core::DepKind::kHostWaits || op.stream < 0)) {
        first_wait_step = op.step;
        break;
      }
    }
    if (first_wait_step >= 0) break;
  }
  REQUIRE(first_wait_step == 1);
  sim::SimExecutor sim(s);
  std::atomic<bool> cancel{false};
  CancelAfterHostWait rt(real::standin_busy_ns(p, sim.run(p, {})), cancel);
  real::RealExecutor exec(rt, {});
  core::RunControl control;
  control.cancel = &cancel;
  const core::ExecutionResult r = exec.run(p, control);
  CHECK(cancel.load());
  CHECK_FALSE(r.complete);
  std::size_t ran = 0;
  for (const auto& t : r.timings) {
    if (t.end_ns < 0) continue;
    ++ran;
    CHECK(t.start_ns >= 0);
    CHECK(t.end_ns >= t.start_ns);
  }
  CHECK(ran > 0);
  CHECK(ran < p.ops.size());
}

namespace {
// A runtime whose enqueue of one op (`fail_at`, named `name`) fails, as a CUDA error would.
class FailingRuntime : public real::StandinRuntime {
 public:
  FailingRuntime(std::vector<TimeNs> busy, core::OpId fail_at, std::string name)
      : StandinRuntime(std::move(busy), {}), fail_at_(fail_at), name_(std::move(name)) {}
  void enqueue(const core::Op& op, const std::vector<core::OpId>& deps) override {
    if (op.id == fail_at_) throw real::DeviceError("injected failure at '" + name_ + "'");
    StandinRuntime::enqueue(op, deps);
  }

 private:
  core::OpId fail_at_;
  std::string name_;
};
}  // namespace

TEST_CASE("stand-in: a failing op stops every thread and names the op", "[real][standin]") {
  // Replica 1's forward fails; the other replicas wait in collectives and host waits that would
  // never finish: the failure must wake them, and run() must throw the first error, not hang.
  const core::Scenario s = scenario("linear_5x2_dp4.json");
  core::Program p = core::lower(s);
  std::string victim;
  core::OpId victim_id = core::kNoOp;
  for (const Op& op : p.ops) {
    if (op.gpu == 1 && op.kind == OpKind::kCompute) {
      victim = p.name_of(op);
      victim_id = op.id;
      break;
    }
  }
  REQUIRE_FALSE(victim.empty());
  sim::SimExecutor sim(s);
  FailingRuntime rt(real::standin_busy_ns(p, sim.run(p, {})), victim_id, victim);
  real::RealExecutor exec(rt, {});
  // A hang is caught by the test's CTest timeout, not a clock here (no test depends on speed).
  CHECK_THROWS_WITH(exec.run(p, {}), Catch::Contains(victim));
}

namespace {
// As FailingRuntime, and its finish() after an abort throws as the CUDA runtime's does.
class AbortReportingRuntime : public FailingRuntime {
 public:
  using FailingRuntime::FailingRuntime;
  void abort() override {
    aborted_ = true;
    FailingRuntime::abort();
  }
  void finish() override {
    FailingRuntime::finish();
    if (aborted_) throw real::DeviceError("the run was aborted");
  }

 private:
  std::atomic<bool> aborted_{false};
};
}  // namespace

TEST_CASE("stand-in: the first enqueue error is thrown, not finish()'s \"aborted\"",
          "[real][standin]") {
  // The failed enqueue aborts the runtime, whose finish() then says it was aborted: run() must
  // throw the enqueue's error, the cause.
  const core::Scenario s = scenario("single_gpu_linear.json");
  core::Program p = core::lower(s);
  std::string victim;
  core::OpId victim_id = core::kNoOp;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCompute) victim = p.name_of(op), victim_id = op.id;  // the last one
  }
  REQUIRE_FALSE(victim.empty());
  sim::SimExecutor sim(s);
  AbortReportingRuntime rt(real::standin_busy_ns(p, sim.run(p, {})), victim_id, victim);
  real::RealExecutor exec(rt, {});
  std::string message;
  try {
    exec.run(p, {});
  } catch (const real::DeviceError& e) {
    message = e.what();
  }
  CHECK(message == "injected failure at '" + victim + "'");
}

// [SECTION] Launch mode processes --------------------------------------------------------------

namespace {

struct ProcRun {
  core::Program p;
  core::ExecutionResult r;
  real::LaunchReport report;
};

ProcRun run_processes(const core::Scenario& s, double time_scale, real::LaunchOptions launch,
                      const core::RunControl& control = {}) {
  ProcRun out;
  out.p = core::lower(s);
  sim::SimExecutor sim(s);
  real::RankSetup setup;  // the stand-in, as simrun --backend standin --launch processes
  setup.standin_busy_ns = real::standin_busy_ns(out.p, sim.run(out.p, {}));
  setup.time_scale = time_scale;
  launch.rank_exe = CSIM_RANK_EXE;  // this build's csim-rank (tests/CMakeLists.txt)
  out.r = real::launch_processes(out.p, setup, control, launch, &out.report);
  return out;
}

}  // namespace

namespace {

// A run stopped because rank 1 was killed (SIGKILL): incomplete, and the failure names the rank
// and the signal.
void check_stopped_by_killed_rank_1(const ProcRun& run) {
  CHECK_FALSE(run.r.complete);
  CHECK(run.report.failed_rank == 1);
  CHECK_THAT(run.report.failure, Catch::Contains("rank 1") && Catch::Contains("signal 9"));
}

}  // namespace

TEST_CASE("processes: DDP ranks as processes, merged into one valid timeline",
          "[real][processes]") {
  // One forked process per DDP rank; their bucket all-reduces meet through the coordinator. The
  // merged timings obey the same ordering rules as a threads run, on the launcher's clock.
  ProcRun run = run_processes(scenario("linear_5x2_dp2.json", {"strategy.kind=ddp"}), 1.0, {});
  REQUIRE(run.report.failure.empty());
  CHECK(run.r.complete);
  CHECK(run.report.ranks == static_cast<int>(run.p.processes.size()));
  // One clock measurement per rank; on one host the ranks share CLOCK_MONOTONIC, so the measured
  // offset is within its own uncertainty (half the best round trip) plus a little.
  REQUIRE(run.report.clocks.size() == run.p.processes.size());
  for (const real::ClockSync& c : run.report.clocks)
    CHECK(std::llabs(c.offset_ns) <= c.uncertainty_ns + 100'000);
  check_ordering(StandinRun{run.p, run.r});
}

TEST_CASE("processes: every rank is an exec of csim-rank, not a fork of the launcher",
          "[real][processes]") {
  // posix_spawn returns once the child has exec'd (glibc's vfork waits for the exec), so when
  // on_started sees a rank its /proc/PID/exe is already the program it runs: csim-rank, not
  // this test binary, which a bare fork would have left.
  std::error_code ec;
  const std::string want = std::filesystem::canonical(CSIM_RANK_EXE, ec).string();
  std::vector<std::string> exes;
  real::LaunchOptions launch;
  launch.on_started = [&exes](int, pid_t pid) {
    std::error_code e;
    exes.push_back(std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", e));
  };
  ProcRun run = run_processes(scenario("linear_5x2_dp2.json", {"strategy.kind=ddp"}), 1.0, launch);
  REQUIRE(run.report.failure.empty());
  CHECK(run.r.complete);
  CHECK(exes == std::vector<std::string>{want, want});  // DDP on 2 GPUs: 2 ranks
}

TEST_CASE("processes: a rank executable that cannot run is BackendUnavailable",
          "[real][processes]") {
  const core::Scenario s = scenario("linear_5x2_dp2.json", {"strategy.kind=ddp"});
  const core::Program p = core::lower(s);
  real::RankSetup setup;
  setup.standin_busy_ns.assign(p.ops.size(), 1000);
  real::LaunchOptions launch;
  launch.rank_exe = "/nonexistent/csim-rank";
  CHECK_THROWS_AS(real::launch_processes(p, setup, {}, launch, nullptr), BackendUnavailable);
}

TEST_CASE("processes: a killed rank stops the others within seconds, naming it",
          "[real][processes][faults]") {
  // Rank 1 is killed when rank 0 arrives at its first bucket all-reduce (step 1 of 10). A
  // stand-in op starts only once its stream's earlier ops and its deps have finished, so rank 0
  // has finished ops by then (the backward kernels the all-reduce waits for). Rank 0 then waits
  // in an all-reduce of a later step that can never complete: the coordinator sees rank 1's
  // connection drop, aborts rank 0, and the launch returns with what finished. "Within seconds"
  // is checked through the mechanism, not a clock: the heartbeat timeout is set far beyond the
  // test's CTest timeout, so only the dropped connection can have stopped the run (a run that
  // waited for heartbeats would be killed by CTest and fail).
  real::LaunchOptions launch;
  launch.heartbeat_timeout_ms = 3'600'000;
  pid_t pids[2] = {-1, -1};
  launch.on_started = [&pids](int rank, pid_t pid) { pids[rank] = pid; };
  bool killed = false;
  launch.on_message = [&](int rank, real::MsgType type) {
    if (rank == 0 && type == real::MsgType::kArrive && !killed && pids[1] > 0)
      killed = ::kill(pids[1], SIGKILL) == 0;
  };
  ProcRun run = run_processes(
      scenario("linear_5x2_dp2.json", {"strategy.kind=ddp", "training.steps=10"}), 500.0, launch);
  REQUIRE(killed);
  check_stopped_by_killed_rank_1(run);
  std::size_t kept = 0;
  for (const Op& op : run.p.ops) {
    if (run.p.threads[static_cast<std::size_t>(op.thread)].process == 0 &&
        run.r.timings[op.id].end_ns >= 0)
      ++kept;
  }
  CHECK(kept > 0);  // rank 0's completed ops are kept
}

TEST_CASE("processes: a rank killed as it starts stops the run at once, naming it",
          "[real][processes][faults]") {
  // Rank 1 is killed as soon as it is forked. If it had not connected to the coordinator yet,
  // there is no connection to drop: its exit itself, reaped by the coordinator, must end the run
  // ("before connecting"); if it had (its hello can be sent within microseconds of the fork),
  // the dropped connection does ("before finishing"). Which one is the machine's timing: on a
  // loaded machine the first happened, and the run then waited for the heartbeat timeout. Here
  // that timeout is far beyond CTest's, so a run that waited for it fails by timing out.
  real::LaunchOptions launch;
  launch.heartbeat_timeout_ms = 3'600'000;
  bool killed = false;
  launch.on_started = [&killed](int rank, pid_t pid) {
    if (rank == 1) killed = ::kill(pid, SIGKILL) == 0;
  };
  ProcRun run = run_processes(
      scenario("linear_5x2_dp2.json", {"strategy.kind=ddp", "training.steps=10"}), 1.0, launch);
  REQUIRE(killed);
  check_stopped_by_killed_rank_1(run);
}

TEST_CASE("processes: a hung rank is detected by its missing heartbeats",
          "[real][processes][faults]") {
  // SIGSTOP freezes rank 1 (alive, connection open, silent) when it arrives at its first bucket
  // all-reduce (step 1 of 10): it has connected by then (its hello came first on the same
  // connection), so after 1 s without heartbeats the coordinator kills it for silence, not for
  // never connecting, and stops rank 0.
  real::LaunchOptions launch;
  launch.heartbeat_timeout_ms = 1000;
  pid_t pids[2] = {-1, -1};
  launch.on_started = [&pids](int rank, pid_t pid) { pids[rank] = pid; };
  bool frozen = false;
  launch.on_message = [&](int rank, real::MsgType type) {
    if (rank == 1 && type == real::MsgType::kArrive && !frozen && pids[1] > 0)
      frozen = ::kill(pids[1], SIGSTOP) == 0;
  };
  ProcRun run = run_processes(
      scenario("linear_5x2_dp2.json", {"strategy.kind=ddp", "training.steps=10"}), 500.0, launch);
  REQUIRE(frozen);
  CHECK_FALSE(run.r.complete);
  CHECK(run.report.failed_rank == 1);
  CHECK_THAT(run.report.failure, Catch::Contains("heartbeats"));
}

TEST_CASE("processes: a cancelled run stops every rank", "[real][processes]") {
  // Ctrl-C reaches the launcher as RunControl::cancel, set here when rank 0 arrives at its first
  // bucket all-reduce (step 1 of 10), so the run is cancelled mid-way however fast the machine.
  std::atomic<bool> cancel{false};
  core::RunControl control;
  control.cancel = &cancel;
  real::LaunchOptions launch;
  launch.heartbeat_timeout_ms = 3'600'000;  // only the cancel can stop it (as above)
  launch.on_message = [&cancel](int rank, real::MsgType type) {
    if (rank == 0 && type == real::MsgType::kArrive) cancel = true;
  };
  ProcRun run =
      run_processes(scenario("linear_5x2_dp2.json", {"strategy.kind=ddp", "training.steps=10"}),
                    500.0, launch, control);
  CHECK_FALSE(run.r.complete);
  CHECK(run.report.failure.empty());  // nobody failed: it was interrupted
}
