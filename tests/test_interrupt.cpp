// Interruption (docs/limits.md, "Interruption"): the built simrun, run as a child process on
// scenarios that take a few seconds, gets SIGINT or SIGTERM at seeded random points. Each time it
// must exit 130; every output it was asked for is either absent or complete, valid JSON marked
// incomplete ("complete": false, whole steps only); no temporary file is left in the output
// directory. Also: a second signal during the run, and a stand-in real run (--backend standin).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_support.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Child {
  pid_t pid = -1;
};

Child spawn_simrun(const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {CSIM_SIMRUN};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  Child c;
  const int rc = posix_spawn(&c.pid, CSIM_SIMRUN, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  return c;
}

int wait_exit_code(const Child& c) {
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
// Returns K (steps in the trace), -1 when absent.
int check_trace(const fs::path& file, int steps_asked) {
  if (!fs::exists(file)) return -1;
  std::ifstream in(file);
  json t;
  REQUIRE_NOTHROW(t = json::parse(in));
  const json& md = t.at("clustersim");
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

struct Trial {
  std::vector<std::string> args;  // scenario and options, without the outputs
  int steps = 0;
  double delay_s = 0;
  int signal = SIGINT;
  double second_signal_after_s = -1;  // >= 0: a second signal this long after the first
};

// Returns the steps the trace kept (-1: no trace written).
int run_trial(const Trial& t, const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<std::string> args = t.args;
  const fs::path trace = dir / "trace.json", summary = dir / "summary.json";
  for (const std::string& a : {std::string("-q"), std::string("-o"), trace.string(),
                               std::string("--summary"), summary.string()})
    args.push_back(a);
  const Child c = spawn_simrun(args);
  std::this_thread::sleep_for(std::chrono::duration<double>(t.delay_s));
  kill(c.pid, t.signal);
  if (t.second_signal_after_s >= 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(t.second_signal_after_s));
    kill(c.pid, t.signal);
  }
  const int code = wait_exit_code(c);
  INFO("signal " << t.signal << " after " << t.delay_s << " s; exit " << code);
  CHECK(code == 130);
  const int k = check_trace(trace, t.steps);
  bool incomplete = false;
  if (k >= 0) {
    std::ifstream in(trace);
    incomplete = !json::parse(in).at("clustersim").at("complete").get<bool>();
  }
  check_summary(summary, incomplete);
  check_no_temporaries(dir);
  return k;
}

}  // namespace

TEST_CASE("interrupt: SIGINT / SIGTERM at random points of a simulation leave valid outputs",
          "[interrupt]") {
  // llama3_70b_512xh100_3d (512 H100s, 3D with rank symmetry) for 12 steps: about a second to
  // lower, then about half a second per step in a Release build (20 MB of trace per step), so the
  // signals land mid-simulation.
  const int steps = 12;
  const std::vector<std::string> base = {csim::test::scenario_path("llama3_70b_512xh100_3d.json"),
                                         "--set", "training.steps=" + std::to_string(steps)};
  std::mt19937 rng(20240917);
  std::uniform_real_distribution<double> delay(0.4, 2.0);
  const fs::path dir = fs::temp_directory_path() / ("csim_interrupt_" + std::to_string(getpid()));
  int with_trace = 0;
  for (int i = 0; i < 4; ++i) {
    Trial t;
    t.args = base;
    t.steps = steps;
    t.delay_s = delay(rng);
    t.signal = i % 2 == 0 ? SIGINT : SIGTERM;
    if (i == 3) t.second_signal_after_s = 0.05;  // Ctrl-C twice
    if (run_trial(t, dir) >= 0) ++with_trace;
  }
  // The first three signals arrive mid-run, so those runs write their partial trace.
  CHECK(with_trace >= 3);
  fs::remove_all(dir);
}

TEST_CASE("interrupt: a stand-in real run keeps its completed steps", "[interrupt]") {
  // The real executor on CPU threads, each op for 1000x its simulated duration.
  const int steps = 40;
  Trial t;
  t.args = {csim::test::scenario_path("single_gpu_linear.json"),
            "--backend",
            "standin",
            "--time-scale",
            "1000",
            "--set",
            "training.steps=" + std::to_string(steps)};
  t.steps = steps;
  std::mt19937 rng(7);
  t.delay_s = std::uniform_real_distribution<double>(0.3, 1.5)(rng);
  t.signal = SIGTERM;
  const fs::path dir =
      fs::temp_directory_path() / ("csim_interrupt_rt_" + std::to_string(getpid()));
  CHECK(run_trial(t, dir) >= 0);
  fs::remove_all(dir);
}

// simrun sweep (docs/sweep.md, "Interruption"): a signal at a random point leaves the results file
// absent (before the first checkpoint) or a valid CSV marked incomplete whose rows are finished
// variants; running the same command again resumes it to a complete file.
TEST_CASE("interrupt: a sweep keeps its finished variants and resumes", "[interrupt][sweep]") {
  // 60 variants of the 4-GPU DataParallel scenario: about 3 s on 2 threads in a Release build.
  std::string batches;
  for (int b = 8; b <= 480; b += 8) batches += (batches.empty() ? "" : ",") + std::to_string(b);
  const fs::path dir =
      fs::temp_directory_path() / ("csim_interrupt_sw_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path out = dir / "r.csv";
  const std::vector<std::string> args = {
      "sweep",     csim::test::scenario_path("dp_vs_ddp_4x1080ti.json"),
      "--grid",    "training.global_batch=" + batches,
      "-j",        "2",
      "-q",        "-o",
      out.string()};
  std::mt19937 rng(11);
  const double delay_s = std::uniform_real_distribution<double>(0.5, 2.0)(rng);
  const Child c = spawn_simrun(args);
  std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
  kill(c.pid, SIGINT);
  const int code = wait_exit_code(c);
  INFO("SIGINT after " << delay_s << " s; exit " << code);
  CHECK(code == 130);
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    CHECK(e.path().filename() == "r.csv");  // no temporary left
  // "# csim-sweep scenario=... variants=60 done=D complete=false", the columns, then D rows.
  auto read_rows = [&](std::string* header) {
    std::ifstream in(out);
    std::string line;
    std::getline(in, *header);
    std::getline(in, line);  // columns
    int rows = 0;
    while (std::getline(in, line)) rows += !line.empty();
    return rows;
  };
  std::string header;
  if (fs::exists(out)) {
    const int rows = read_rows(&header);
    INFO(header);
    CHECK(header.find("variants=60 done=" + std::to_string(rows) + " complete=false") !=
          std::string::npos);
    CHECK(rows < 60);
  }
  // Resume: the same command finishes the sweep.
  CHECK(wait_exit_code(spawn_simrun(args)) == 0);
  REQUIRE(fs::exists(out));
  CHECK(read_rows(&header) == 60);
  CHECK(header.find("done=60 complete=true") != std::string::npos);
  fs::remove_all(dir);
}
