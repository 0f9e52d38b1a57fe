// Launch mode mpi end to end: simrun started by mpirun (one MPI rank per Program process) on the
// CPU stand-in device. Runs the built simrun through the real mpirun, so the MPI bootstrap, the
// coordinator on rank 0's thread, the cross-rank rendezvous and the merged trace are all real.
#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Outcome {
  int code = -1;
  std::string output;  // stdout and stderr together
};

// mpirun -np N simrun ARGS, as root where needed (CI runs as root), oversubscribed (2 cores here).
Outcome mpirun(int np, const std::string& args) {
  // Open MPI's own allocations are not ours to leak-check under AddressSanitizer.
  ::setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
  const std::string cmd = std::string(CSIM_MPIRUN) + " --allow-run-as-root --oversubscribe -np " +
                          std::to_string(np) + " " + CSIM_SIMRUN + " " + args + " 2>&1";
  Outcome o;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) o.output += buf;
  const int status = ::pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

fs::path fresh_dir(const std::string& name) {
  return csim::test::fresh_dir("csim_mpi_", name);
}

// "X" events per GPU lane (pid) of a trace: what each rank contributed to the merge.
std::map<int, int> complete_events_per_pid(const json& trace) {
  std::map<int, int> n;
  for (const json& e : trace["traceEvents"])
    if (e.value("ph", "") == "X" && e.contains("pid") && e["pid"].is_number_integer())
      ++n[e["pid"].get<int>()];
  return n;
}

}  // namespace

TEST_CASE("launch mode mpi: four MPI ranks run DDP on the stand-in and rank 0 writes one trace",
          "[mpi][real]") {
  const fs::path d = fresh_dir("ddp");
  // DDP on 4 GPUs without data-loader workers: exactly 4 Program processes, one per MPI rank.
  const std::string scenario = csim::test::scenario_path("dp_vs_ddp_4x1080ti.json") +
                               " --set strategy.kind=ddp --set training.data_loader.num_workers=0"
                               " --set training.steps=3 --backend standin --time-scale 0.1";
  const Outcome o = mpirun(4, scenario + " --launch mpi -o " + (d / "mpi.json").string());
  INFO(o.output);
  REQUIRE(o.code == 0);
  // Ranks 1..3 say they finished their share; rank 0 prints the summary.
  CHECK(o.output.find("MPI rank 3 finished its share") != std::string::npos);
  CHECK(o.output.find("step time:") != std::string::npos);
  const json t = json::parse(csim::test::read_file((d / "mpi.json").string()));
  const json& md = t["clustersim"];
  CHECK(md["launch"] == "mpi");
  CHECK(md["ranks"] == 4);
  CHECK(md["complete"] == true);
  CHECK(md["backend"] == "cpu-standin");
  // Every rank measured its clock against the coordinator (one entry per rank, all on this
  // host, so each offset is within a few times its own uncertainty plus scheduling noise).
  REQUIRE(md["clock_sync"].size() == 4);
  for (const json& c : md["clock_sync"]) CHECK(c["uncertainty_ns"].get<long>() >= 0);
  // The merged trace holds every rank's ops: the same events per GPU as launch mode processes,
  // where one launcher forks the same four ranks.
  const int processes_status =
      std::system((std::string(CSIM_SIMRUN) + " " + scenario + " --launch processes -q -o " +
                   (d / "processes.json").string())
                      .c_str());
  REQUIRE(WIFEXITED(processes_status));
  REQUIRE(WEXITSTATUS(processes_status) == 0);
  const json tp = json::parse(csim::test::read_file((d / "processes.json").string()));
  const auto per_pid_mpi = complete_events_per_pid(t);
  CHECK(per_pid_mpi.size() >= 4);
  CHECK(per_pid_mpi == complete_events_per_pid(tp));
}

TEST_CASE(
    "launch mode mpi: a rank count that does not match the scenario is refused with the "
    "mpirun line to use",
    "[mpi][real]") {
  // The same DDP run has 4 processes; 2 MPI ranks cannot run it (exit 2 from every rank).
  const Outcome o = mpirun(2, csim::test::scenario_path("dp_vs_ddp_4x1080ti.json") +
                                  " --set strategy.kind=ddp --set "
                                  "training.data_loader.num_workers=0 --backend standin "
                                  "--launch mpi");
  INFO(o.output);
  CHECK(o.code == 2);
  CHECK(o.output.find("has 2 MPI ranks") != std::string::npos);
  CHECK(o.output.find("mpirun -np 4") != std::string::npos);
}

// simrun sweep under mpirun (docs/sweep.md, "MPI"): 3 ranks share 8 variants (3, 3 and 2),
// rank 0 gathers and writes; the file is byte for byte the single-process one (rows sorted, no
// wall-clock figures), which the same simrun writes without mpirun.
TEST_CASE("simrun sweep across 3 MPI ranks writes the single-process results file",
          "[mpi][sweep]") {
  const fs::path d = fresh_dir("sweep");
  const std::string args = csim::test::scenario_path("dp_vs_ddp_4x1080ti.json") +
                           " --grid strategy.kind=data_parallel,ddp"
                           " --grid training.global_batch=64,128,256,512 -j 1 -o ";
  const Outcome m = mpirun(3, "sweep " + args + (d / "mpi.csv").string());
  INFO(m.output);
  REQUIRE(m.code == 0);
  CHECK(m.output.find("MPI rank 1 simulated 3 variants") != std::string::npos);
  CHECK(m.output.find("MPI rank 2 simulated 2 variants") != std::string::npos);
  const std::string single =
      std::string(CSIM_SIMRUN) + " sweep " + args + (d / "one.csv").string() + " -q";
  REQUIRE(std::system(single.c_str()) == 0);
  CHECK(csim::test::read_file((d / "mpi.csv").string()) ==
        csim::test::read_file((d / "one.csv").string()));
}
