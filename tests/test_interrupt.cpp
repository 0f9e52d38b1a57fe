// Interruption (docs/limits.md, "Interruption"): the built simrun, run as a child process on
// scenarios that take a few seconds, gets SIGINT or SIGTERM at seeded random points. Each time it
// must exit 130; every output it was asked for is either absent or complete, valid JSON marked
// incomplete ("complete": false, whole steps only); no temporary file is left in the output
// directory. Also: a second signal during the run, and a stand-in real run (--backend standin).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_support.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Child {
  pid_t pid = -1;
  int stderr_fd = -1;  // the read end of the child's stderr, when piped
};

// Starts simrun with stdout to /dev/null and stderr to /dev/null, or to a pipe that
// wait_for_line() reads.
Child spawn_simrun(const std::vector<std::string>& args, bool pipe_stderr = false) {
  std::vector<std::string> argv_s = {CSIM_SIMRUN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2] = {-1, -1};
  if (pipe_stderr) REQUIRE(pipe(fds) == 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  if (pipe_stderr) {
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    posix_spawn_file_actions_addclose(&fa, fds[1]);
  } else {
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  }
  Child c;
  const int rc = posix_spawn(&c.pid, CSIM_SIMRUN, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  if (pipe_stderr) {
    close(fds[1]);
    c.stderr_fd = fds[0];
  }
  return c;
}

// Reads the child's stderr line by line until `accept` returns true for a line (returns true)
// or the child closes it (returns false: it ended first). This is the observable event a signal
// is sent on: no sleep decides when a run is "in the middle". Every line read is appended to
// *SEEN when given.
bool wait_for_line(const Child& c, const std::function<bool(const std::string&)>& accept,
                   std::string* seen = nullptr) {
  std::string line;
  char ch = 0;
  while (read(c.stderr_fd, &ch, 1) == 1) {
    if (ch != '\n') {
      line += ch;
      continue;
    }
    if (seen) *seen += line + "\n";
    if (accept(line)) return true;
    line.clear();
  }
  return false;
}

// "simrun: simulating 37 % (3,512,071 of 9,492,224 op issues and ends, 3.2 s)"
// (tools/run_progress.hpp): the percent of a counted phase's line; -1 for another phase or a
// line without a count ("simrun: running (3.2 s)").
int phase_percent(const std::string& phase, const std::string& line) {
  const std::string tag = "simrun: " + phase + " ";
  if (line.rfind(tag, 0) != 0 || line.size() == tag.size() || !std::isdigit(line[tag.size()]))
    return -1;
  return std::stoi(line.substr(tag.size()));
}

// The child's exit code; the rest of its stderr, when piped, is appended to *REST when given.
int wait_exit_code(const Child& c, std::string* rest = nullptr) {
  if (c.stderr_fd >= 0) {  // drain to the end (closing early would kill the child by SIGPIPE)
    char buf[4096];
    ssize_t n = 0;
    while ((n = read(c.stderr_fd, buf, sizeof buf)) > 0)
      if (rest) rest->append(buf, static_cast<std::size_t>(n));
    close(c.stderr_fd);
  }
  int status = 0;
  REQUIRE(waitpid(c.pid, &status, 0) == c.pid);
  if (WIFSIGNALED(status)) return 1000 + WTERMSIG(status);  // killed by the signal: a failure
  return WEXITSTATUS(status);
}

// The output directory holds only the named outputs (no "*.tmp.*" left behind).
void check_no_temporaries(const fs::path& dir) {
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    INFO("left in the output directory: " << name);
    CHECK(name.find(".tmp") == std::string::npos);
    CHECK((name == "trace.json" || name == "summary.json"));
  }
}

// A written trace must be complete JSON; if marked incomplete, it holds whole steps 1..K.
// Returns K (steps in the trace), -1 when absent; *INCOMPLETE (when given) says whether it is
// marked incomplete (the trace is parsed once: it is the test's largest cost).
int check_trace(const fs::path& file, int steps_asked, bool* incomplete = nullptr) {
  if (!fs::exists(file)) return -1;
  std::ifstream in(file);
  json t;
  REQUIRE_NOTHROW(t = json::parse(in));
  const json& md = t.at("clustersim");
  if (incomplete) *incomplete = !md.at("complete").get<bool>();
  std::set<std::string> step_names;
  for (const json& e : t.at("traceEvents")) {
    const std::string name = e.value("name", "");
    if (name.rfind("ProfilerStep#", 0) == 0) step_names.insert(name);
  }
  const int k = static_cast<int>(step_names.size());
  if (md.at("complete").get<bool>()) {
    CHECK(k == steps_asked);
  } else {
    CHECK(md.at("steps_completed").get<int>() == k);
    CHECK(k < steps_asked);
    for (int s = 1; s <= k; ++s) CHECK(step_names.count("ProfilerStep#" + std::to_string(s)) == 1);
  }
  return k;
}

void check_summary(const fs::path& file, bool trace_incomplete) {
  if (!fs::exists(file)) return;
  std::ifstream in(file);
  json s;
  REQUIRE_NOTHROW(s = json::parse(in));
  if (trace_incomplete) CHECK(s.value("complete", true) == false);
}

// What simrun says on stderr when interrupted (tools/signals.hpp, docs/limits.md "Interruption"):
// the signal handler's line as the run stops; before the partial outputs are written, which steps
// go where (a large trace takes seconds); then the closing line. When it exits at once (a second
// signal, here right after the first), one line names what was lost. ERR is the whole stderr, K
// the steps the written trace holds (-1: none written).
void check_interrupt_lines(const std::string& err, int k, int steps, bool incomplete,
                           const std::string& trace, const std::string& summary) {
  auto has = [&](const std::string& s) { return err.find(s) != std::string::npos; };
  const std::string outputs = "-o " + trace + ", --summary " + summary;
  // The handler's line for the first signal: the trial sends it on a progress line under 90 %,
  // so it is handled mid-run.
  const std::string stopping =
      "simrun: interrupted; stopping the run; its completed steps will be "
      "written to " +
      outputs + " (Ctrl-C again exits at once)\n";
  if (has("simrun: interrupted again; exiting at once")) {
    // The second signal was handled on its own (not merged with the first by the kernel): the
    // line says what was lost, which depends on where it landed (run, trace, summary).
    CHECK(has(stopping));
    CHECK((has("exiting at once without writing " + outputs + "\n") ||
           has("exiting at once; removed half-written: -o " + trace + "; not written: --summary " +
               summary + "\n") ||
           has("exiting at once; kept: -o " + trace + "; removed half-written: --summary " +
               summary + "\n")));
    CHECK_FALSE(has("simrun: interrupted after "));
    return;
  }
  // One signal (or two merged into one): the partial outputs are written and announced first.
  REQUIRE(k >= 0);
  if (!incomplete) return;  // the run finished before the signal took effect: complete outputs
  CHECK(has(stopping));
  const std::string counts = std::to_string(k) + " of " + std::to_string(steps) + " steps";
  CHECK(has("simrun: interrupted; writing the partial trace (" + counts + ") to " + trace +
            " and the summary to " + summary + "...\n"));
  CHECK(
      has("simrun: interrupted after " + counts + "; the outputs keep them, marked incomplete\n"));
  // Announced before the closing line.
  CHECK(err.find("writing the partial trace") < err.find("simrun: interrupted after"));
}

struct Trial {
  std::vector<std::string> args;  // scenario and options, without the outputs
  int steps = 0;
  // The signal is sent when the progress line (simrun --progress, one a second unless
  // CSIM_PROGRESS_PERIOD_MS says otherwise) reports the
  // simulation under way for the signal_at_line-th time: an observed point, not a sleep.
  std::string phase = "simulating";
  int signal_at_line = 1;
  int signal = SIGINT;
  bool second_signal = false;  // Ctrl-C twice: a second signal right after the first
};

// A progress line of `phase` that says the run is still under way: for the simulator, under
// 90 % of the ops done (so the signal cannot lose the race against the end of the run).
bool under_way(const std::string& phase, const std::string& line) {
  const int percent = phase_percent(phase, line);
  if (phase == "simulating") return percent >= 0 && percent <= 90;
  // A real run's "running" counts the ops issued (launch mode threads); without a count, its
  // line has the elapsed time only.
  return (percent >= 0 && percent < 100) || line.rfind("simrun: " + phase + " (", 0) == 0;
}

// Returns the steps the trace kept (-1: no trace written), or -2 when the run ended before the
// signal point was seen (too short to interrupt on this machine: the caller lengthens it).
int run_trial(const Trial& t, const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> args = t.args;
  const fs::path trace = dir / "trace.json", summary = dir / "summary.json";
  for (const std::string& a : {std::string("-q"), std::string("--progress"), std::string("-o"),
                               trace.string(), std::string("--summary"), summary.string()})
    args.push_back(a);
  // -q silences the table; --progress after it still asks for the lines (checked below).
  const Child c = spawn_simrun(args, true);
  int seen = 0;
  std::string err;  // the child's whole stderr
  const bool hit = wait_for_line(
      c,
      [&](const std::string& line) {
        return under_way(t.phase, line) && ++seen == t.signal_at_line;
      },
      &err);
  if (!hit) {
    wait_exit_code(c);
    return -2;
  }
  kill(c.pid, t.signal);
  if (t.second_signal) kill(c.pid, t.signal);
  const int code = wait_exit_code(c, &err);
  INFO("signal " << t.signal << " at progress line " << t.signal_at_line << "; exit " << code);
  INFO("stderr:\n" << err);
  if (code == 0) {
    // The run reached its end before the signal was handled (the last ops and the writing of
    // the outputs are after the last check of the flag): it is complete, so the outputs must be
    // too, and the caller lengthens the run. Not a failure: which one wins is the machine's.
    CHECK(check_trace(trace, t.steps) == t.steps);
    check_summary(summary, false);
    check_no_temporaries(dir);
    return -2;
  }
  CHECK(code == 130);
  bool incomplete = false;
  const int k = check_trace(trace, t.steps, &incomplete);
  check_summary(summary, incomplete);
  check_no_temporaries(dir);
  check_interrupt_lines(err, k, t.steps, incomplete, trace.string(), summary.string());
  return k;
}

// Runs the trial, lengthening the run (2x the steps, up to 3 times) while it ends before the
// signal point: a fast machine gets a longer run, a slow one the same checks. Doubling, not more:
// a run signalled mid-simulation writes only its completed steps, but simrun refuses up front a
// run whose whole trace would exceed limits.max_trace_events (llama3_70b at 192 steps).
int run_trial_long_enough(Trial t, const fs::path& dir, const std::string& steps_key) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<std::string> args = t.args;
    args.push_back("--set");
    args.push_back(steps_key + "=" + std::to_string(t.steps));
    Trial sized = t;
    sized.args = args;
    const int k = run_trial(sized, dir);
    if (k != -2) return k;
    t.steps *= 2;
  }
  FAIL("the run ended before its first progress line even at " << t.steps / 2 << " steps");
  return -1;
}

}  // namespace

TEST_CASE("interrupt: SIGINT / SIGTERM at random points of a simulation leave valid outputs",
          "[interrupt]") {
  // llama3_70b_512xh100_3d (512 H100s, 3D with rank symmetry), lengthened until a simulating
  // progress line (one a second) appears; the signal follows the first one, so it lands
  // mid-simulation. Only the first: the simulator now runs the 1.3 M ops of 48 steps in about a
  // second, and 192 steps exceed limits.max_trace_events, so a run may have no second one.
  const std::vector<std::string> base = {csim::test::scenario_path("llama3_70b_512xh100_3d.json")};
  // A progress line every 20 ms instead of every second (CSIM_PROGRESS_PERIOD_MS, inherited by
  // the spawned simrun): on a machine that simulates 12 steps in well under a second, a run still
  // shows a simulating line early, so the signal lands mid-simulation without depending on how
  // fast the machine is (the lengthening below remains for a run shorter than 20 ms).
  REQUIRE(setenv("CSIM_PROGRESS_PERIOD_MS", "20", 1) == 0);
  const fs::path dir = fs::temp_directory_path() / ("csim_interrupt_" + std::to_string(getpid()));
  int with_trace = 0;
  for (int i = 0; i < 4; ++i) {
    Trial t;
    t.args = base;
    t.steps = 12;
    t.signal_at_line = 1;
    t.signal = i % 2 == 0 ? SIGINT : SIGTERM;
    t.second_signal = i == 3;  // Ctrl-C twice
    if (run_trial_long_enough(t, dir, "training.steps") >= 0) ++with_trace;
  }
  // The signals arrive mid-simulation, so every run writes its partial trace (the last one,
  // signalled twice, may exit before writing).
  CHECK(with_trace >= 3);
  unsetenv("CSIM_PROGRESS_PERIOD_MS");
  fs::remove_all(dir);
}

TEST_CASE("interrupt: a stand-in real run keeps its completed steps", "[interrupt]") {
  // The real executor on CPU threads, each op for 1000x its simulated duration.
  Trial t;
  t.args = {csim::test::scenario_path("single_gpu_linear.json"), "--backend", "standin",
            "--time-scale", "1000"};
  t.steps = 40;
  t.phase = "running";
  t.signal = SIGTERM;
  const fs::path dir =
      fs::temp_directory_path() / ("csim_interrupt_rt_" + std::to_string(getpid()));
  CHECK(run_trial_long_enough(t, dir, "training.steps") >= 0);
  fs::remove_all(dir);
}

// simrun sweep (docs/sweep.md, "Interruption"): a signal at a random point leaves the results file
// absent (before the first checkpoint) or a valid CSV marked incomplete whose rows are finished
// variants; running the same command again resumes it to a complete file.
TEST_CASE("interrupt: a sweep keeps its finished variants and resumes", "[interrupt][sweep]") {
  // 60 variants of the 4-GPU DataParallel scenario (about 3 s on 2 threads in a Release build),
  // times as many step counts as needed to outlast its first checkpoint on this machine.
  std::string batches;
  for (int b = 8; b <= 480; b += 8) batches += (batches.empty() ? "" : ",") + std::to_string(b);
  const fs::path dir =
      fs::temp_directory_path() / ("csim_interrupt_sw_" + std::to_string(getpid()));
  const fs::path out = dir / "r.csv";
  // The columns, then D rows; the header "variants=V done=D complete=false" rebuilt from the
  // sidecar r.csv.meta.json (written after the rows).
  auto read_rows = [&](std::string* header) {
    *header = "";
    std::ifstream side(out.string() + ".meta.json");
    std::stringstream text;
    text << side.rdbuf();
    const nlohmann::json meta = nlohmann::json::parse(text.str(), nullptr, false);
    if (meta.is_object())
      *header = "variants=" + std::to_string(meta.value("variants_total", 0)) +
                " done=" + std::to_string(meta.value("done", 0)) +
                " complete=" + (meta.value("complete", false) ? "true" : "false");
    std::ifstream in(out);
    std::string line;
    std::getline(in, line);  // columns
    int rows = 0;
    while (std::getline(in, line)) rows += !line.empty();
    return rows;
  };
  std::string steps = "2";
  for (int attempt = 0; attempt < 4; ++attempt, steps += "," + std::to_string(attempt + 2)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::vector<std::string> args = {"sweep",
                                           csim::test::scenario_path("dp_vs_ddp_4x1080ti.json"),
                                           "--grid",
                                           "training.global_batch=" + batches,
                                           "--grid",
                                           "training.steps=" + steps,
                                           "--checkpoint-every",
                                           "0",
                                           "-j",
                                           "2",
                                           "-q",
                                           "-o",
                                           out.string()};
    const int variants = 60 * (attempt + 1);
    // SIGINT once the first checkpoint is on disk and still says incomplete: the results file is
    // written by rename, so inotify's IN_MOVED_TO on the directory is the event (no delay).
    const int watch = inotify_init1(IN_CLOEXEC);
    REQUIRE(watch >= 0);
    REQUIRE(inotify_add_watch(watch, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE) >= 0);
    const Child c = spawn_simrun(args, /*pipe_stderr=*/true);
    bool signalled = false;
    int status = 0;
    while (waitpid(c.pid, &status, WNOHANG) == 0) {
      // Wake on a change in the directory, or now and then to notice that the child ended.
      pollfd pfd{watch, POLLIN, 0};
      if (poll(&pfd, 1, 100) > 0) {
        char events[4096];
        (void)read(watch, events, sizeof events);
      }
      std::string header;
      if (fs::exists(out) &&
          (read_rows(&header), header.find("complete=false") != std::string::npos)) {
        kill(c.pid, SIGINT);
        signalled = true;
        break;
      }
    }
    close(watch);
    if (!signalled) {  // it ended (and was reaped above) before its first checkpoint
      close(c.stderr_fd);
      continue;  // a longer sweep
    }
    std::string said;
    const int code = wait_exit_code(c, &said);
    INFO("SIGINT after the first checkpoint; exit " << code << "; stderr: " << said);
    if (code == 0) {
      // The sweep finished its last variants before it handled the signal: its file must then
      // be complete, and a longer sweep tries again (the race is the machine's, not a failure).
      std::string header;
      CHECK(read_rows(&header) == variants);
      CHECK(header.find("complete=true") != std::string::npos);
      continue;
    }
    CHECK(code == 130);
    // The signal handler says what happens (tools/sweep_cli.cpp, say_on_interrupt): while
    // variants run, that they finish and are written; while a checkpoint is being written (with
    // --checkpoint-every 0 it is written after every variant, so the signal can land there), that
    // the sweep exits at once and the file keeps its last checkpoint. Which one is the machine's
    // timing; each must be said in full.
    const bool while_running =
        said.find(
            "simrun sweep: interrupted; the variants under way finish, then the finished "
            "ones are written to " +
            out.string() + ", marked incomplete (the same command resumes)") != std::string::npos;
    const bool while_writing =
        said.find("simrun sweep: interrupted while writing the outputs; exiting at once; " +
                  out.string() + " keeps its last checkpoint (the same command resumes from it)") !=
        std::string::npos;
    CHECK((while_running || while_writing));
    for (const fs::directory_entry& e : fs::directory_iterator(dir))
      CHECK((e.path().filename() == "r.csv" ||
             e.path().filename() == "r.csv.meta.json"));  // no temporary left
    std::string header;
    REQUIRE(fs::exists(out));  // it was there before the signal
    const int rows = read_rows(&header);
    INFO(header);
    // Signalled between writing the rows and the sidecar, the exit is at once: the sidecar may
    // then be the previous checkpoint's, which counted fewer rows.
    if (while_writing && !while_running)
      CHECK(header.find("variants=" + std::to_string(variants) + " done=") != std::string::npos);
    else
      CHECK(header.find("variants=" + std::to_string(variants) + " done=" + std::to_string(rows) +
                        " complete=false") != std::string::npos);
    CHECK(header.find("complete=false") != std::string::npos);
    CHECK(rows < variants);
    // Resume: the same command finishes the sweep.
    CHECK(wait_exit_code(spawn_simrun(args)) == 0);
    REQUIRE(fs::exists(out));
    CHECK(read_rows(&header) == variants);
    CHECK(header.find("done=" + std::to_string(variants) + " complete=true") != std::string::npos);
    fs::remove_all(dir);
    return;
  }
  FAIL("the sweep ended before its first checkpoint even at 240 variants");
}
