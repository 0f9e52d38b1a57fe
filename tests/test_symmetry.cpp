// Rank symmetry (docs/cost-model.md, "Rank symmetry"): the symmetric simulation (one
// representative per class of data- and tensor-parallel mirror images) must give the same answer
// as the full-fidelity simulation of every rank, including where mirror images share links.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/per_rank_traces.hpp"
#include "profiler/rank_symmetry.hpp"
#include "profiler/summary.hpp"
#include "profiler/trace_diff.hpp"
#include "run/run.hpp"

using namespace csim;

namespace {

// A GPT on `nodes` nodes of `per_node` A100s with `nics` NICs each, strategy as given.
std::string cluster_gpt(int nodes, int per_node, int nics, const std::string& strategy,
                        int global_batch = 16) {
  return "{\"cluster\":{\"nodes\":" + std::to_string(nodes) +
         ",\"gpus_per_node\":" + std::to_string(per_node) +
         ",\"gpu\":\"A100-SXM4-80GB\",\"nics_per_node\":" + std::to_string(nics) +
         ",\"nic_gbps\":25},"
         "\"model\":{\"gpt\":{\"layers\":4,\"hidden\":1024,\"heads\":16,\"seq_len\":512,"
         "\"vocab\":32000}},"
         "\"training\":{\"global_batch\":" +
         std::to_string(global_batch) +
         ",\"precision\":\"bf16\",\"optimizer\":\"adam\",\"steps\":2},\"strategy\":{" + strategy +
         "}}";
}

struct Both {
  run::RunResult sym, full;
  prof::Summary sym_summary, full_summary;
};

Both run_both(const std::string& json) {
  Both b;
  const core::Scenario sym = core::parse_scenario_string(json, "test.json", {});
  const core::Scenario full =
      core::parse_scenario_string(json, "test.json", {"simulation.symmetry=off"});
  b.sym = run::simulate(sym);
  b.full = run::simulate(full);
  b.sym_summary = prof::summarize(b.sym.trace);
  b.full_summary = prof::summarize(b.full.trace);
  return b;
}

// The symmetric run reproduces the full one: the same step times (exactly: both are the same
// deterministic event sequence on the representatives, and every mirror image transfer moves on
// its own links), per-GPU figures of the representatives, sums over GPUs (each representative
// counted for the GPUs it stands for; up to summation order) and peak memory.
void check_same(const Both& b) {
  const prof::Summary& s = b.sym_summary;
  const prof::Summary& f = b.full_summary;
  REQUIRE(b.sym.program.symmetry.enabled());
  REQUIRE_FALSE(b.full.program.symmetry.enabled());
  CHECK(s.symmetric);
  CHECK(s.step_times_ns == f.step_times_ns);
  CHECK(s.gpus == f.gpus);
  CHECK(s.mfu == Approx(f.mfu).epsilon(1e-12));
  CHECK(s.exposed_comm_s == Approx(f.exposed_comm_s).epsilon(1e-9));
  CHECK(s.overlapped_comm_s == Approx(f.overlapped_comm_s).epsilon(1e-9));
  CHECK(s.imbalance == Approx(f.imbalance).epsilon(1e-12));
  std::map<int, const prof::GpuSummary*> full_by_gpu;
  for (const prof::GpuSummary& g : f.per_gpu) full_by_gpu[g.gpu] = &g;
  for (const prof::GpuSummary& g : s.per_gpu) {
    CAPTURE(g.gpu);
    REQUIRE(full_by_gpu.count(g.gpu) == 1);
    const prof::GpuSummary& h = *full_by_gpu[g.gpu];
    CHECK(g.compute_s == h.compute_s);
    CHECK(g.comm_s == h.comm_s);
    CHECK(g.idle_s == h.idle_s);
    CHECK(g.peak_bytes == h.peak_bytes);
  }
  // The full program has one op list per GPU; the symmetric one per representative:
  // ops shrink by about the number of GPUs each stands for.
  CHECK(b.sym.program.ops.size() < b.full.program.ops.size());
}

}  // namespace

TEST_CASE("rank symmetry: 3D dp 2 x tp 2 x pp 2 in one node equals full fidelity",
          "[strategies][symmetry][sim]") {
  const Both b = run_both(cluster_gpt(1, 8, 1, "\"kind\":\"3d\",\"tp\":2,\"pp\":2"));
  // Representatives: (dp 0, tp 0) of each stage, standing for dp x tp = 4 GPUs each.
  // Every GPU has its row: 2 simulated (stands_for 4) and 6 mirrors naming their representative.
  REQUIRE(b.sym_summary.per_gpu.size() == 8);
  int simulated = 0;
  for (const prof::GpuSummary& g : b.sym_summary.per_gpu) {
    if (g.mirror_of < 0) {
      ++simulated;
      CHECK(g.stands_for == 4);
    } else {
      CHECK(g.stands_for == 0);
      CHECK(b.sym.program.symmetry.weight_of_gpu[static_cast<std::size_t>(g.mirror_of)] == 4);
    }
  }
  CHECK(simulated == 2);
  check_same(b);
}

TEST_CASE("rank symmetry: mirror images that share a NIC slow each other as in full fidelity",
          "[strategies][symmetry][sim]") {
  // 4 nodes of 4 GPUs with one NIC each; rank order tp-pp-dp puts a whole replica (tp 2 x pp 2)
  // in a node, so every data-parallel collective crosses the NICs, and the two tensor-parallel
  // mirror images of each (tp 0 and tp 1) share their node's one NIC: each gets half of it.
  // Only the representative's collective issues ops; its image must still take its half.
  const Both b = run_both(cluster_gpt(
      4, 4, 1, "\"kind\":\"3d\",\"tp\":2,\"pp\":2,\"rank_order\":\"tp-pp-dp\",\"zero_stage\":1"));
  check_same(b);
  // And the sharing matters: with 4 NICs per node the step is faster.
  const Both wide = run_both(cluster_gpt(
      4, 4, 4, "\"kind\":\"3d\",\"tp\":2,\"pp\":2,\"rank_order\":\"tp-pp-dp\",\"zero_stage\":1"));
  check_same(wide);
  CHECK(wide.sym_summary.step_time_s < b.sym_summary.step_time_s);
}

TEST_CASE("rank symmetry: ZeRO-3 and FSDP over data parallelism equal full fidelity",
          "[strategies][symmetry][sim]") {
  check_same(run_both(cluster_gpt(2, 4, 1, "\"kind\":\"zero\",\"zero_stage\":3")));
  check_same(run_both(cluster_gpt(2, 4, 2, "\"kind\":\"fsdp\"")));
}

TEST_CASE("rank symmetry: off, or nothing to collapse, gives a program with every rank",
          "[strategies][symmetry]") {
  // Pipeline only (dp = tp = 1): every rank is its own class.
  const core::Scenario pp = core::parse_scenario_string(
      cluster_gpt(1, 4, 1, "\"kind\":\"pipeline\",\"pp\":4"), "test.json", {});
  CHECK_FALSE(core::lower(pp).symmetry.enabled());
  const core::Scenario off =
      core::parse_scenario_string(cluster_gpt(1, 8, 1, "\"kind\":\"3d\",\"tp\":2,\"pp\":2"),
                                  "test.json", {"simulation.symmetry=off"});
  CHECK_FALSE(core::lower(off).symmetry.enabled());
  // A typo is an input error naming the key.
  CHECK_THROWS_WITH(
      core::parse_scenario_string(cluster_gpt(1, 8, 1, "\"kind\":\"3d\",\"tp\":2,\"pp\":2"),
                                  "test.json", {"simulation.symmetry=of"}),
      Catch::Contains("simulation.symmetry"));
}

TEST_CASE("rank symmetry: a symmetric summary diffs clean against the full-fidelity one",
          "[strategies][symmetry][sim]") {
  // tracediff reads a summary JSON whose mirrored rows only name their representative; the
  // metrics it rebuilds must equal those of the full run, GPU by GPU.
  const Both b = run_both(cluster_gpt(1, 8, 1, "\"kind\":\"3d\",\"tp\":2,\"pp\":2"));
  const prof::RunMetrics sym =
      prof::metrics_from_summary(prof::summary_to_json(b.sym_summary), "sym.json");
  const prof::RunMetrics full =
      prof::metrics_from_summary(prof::summary_to_json(b.full_summary), "full.json");
  REQUIRE(sym.metrics.size() == full.metrics.size());
  for (const auto& [key, m] : full.metrics) {
    CAPTURE(key);
    REQUIRE(sym.metrics.count(key) == 1);
    CHECK(sym.metrics.at(key).value == Approx(m.value).epsilon(1e-9));
  }
}

TEST_CASE("stragglers: every rank simulated, the slow GPU bounds the step and is named",
          "[strategies][heterogeneity][sim]") {
  // GPU 5 of a dp 2 x tp 2 x pp 2 run computes 1.5x slower: symmetry is off (the ranks differ),
  // the step gets longer, and the summary names GPU 5 as bounding, its compute 1.5x a healthy
  // GPU's of the same stage (GPU 5 = rank 5 = tp 1, dp 0, pp 1 with tp-dp-pp; GPU 4 is its
  // healthy tensor-parallel peer).
  // Resource sharing is off (nccl_sms 0, hbm_sharing false): it would slow the two GPUs' kernels
  // by different amounts, as their collectives overlap them differently (the straggler's
  // kernels, 1.5x slower, ask 1.5x less HBM).
  const std::string base = cluster_gpt(1, 8, 1, "\"kind\":\"3d\",\"tp\":2,\"pp\":2");
  const std::string quiet =
      "cluster.gpu={\"base\":\"A100-SXM4-80GB\",\"nccl_sms\":0,\"hbm_sharing\":false}";
  const run::RunResult healthy =
      run::simulate(core::parse_scenario_string(base, "t.json", {quiet}));
  const run::RunResult slow = run::simulate(core::parse_scenario_string(
      base, "t.json", {quiet, "cluster.stragglers=[{\"gpu\":5,\"slowdown\":1.5}]"}));
  CHECK_FALSE(slow.program.symmetry.enabled());
  const prof::Summary h = prof::summarize(healthy.trace);
  const prof::Summary s = prof::summarize(slow.trace);
  CHECK(s.step_time_s > h.step_time_s);
  CHECK(s.bounding_gpu == 5);
  CHECK(s.bounding_rank == 5);
  const prof::GpuSummary* g4 = nullptr;
  const prof::GpuSummary* g5 = nullptr;
  for (const prof::GpuSummary& g : s.per_gpu) {
    if (g.gpu == 4) g4 = &g;
    if (g.gpu == 5) g5 = &g;
  }
  REQUIRE(g4 != nullptr);
  REQUIRE(g5 != nullptr);
  // Kernel durations are rounded to ns one by one, so the ratio is 1.5 to within rounding.
  CHECK(g5->compute_s / g4->compute_s == Approx(1.5).epsilon(1e-4));
}

TEST_CASE("fat tree: symmetric equals full fidelity, and oversubscription slows DP",
          "[strategies][symmetry][fabric][sim]") {
  // 4 nodes of 4 GPUs, a replica per node (rank order tp-pp-dp), 1 node per leaf at 4:1: every
  // data-parallel ring hop crosses the spine at a quarter of the NIC rate.
  const std::string st =
      "\"kind\":\"3d\",\"tp\":2,\"pp\":2,\"rank_order\":\"tp-pp-dp\",\"zero_stage\":1";
  const std::string flat = cluster_gpt(4, 4, 2, st);
  std::string tree = flat;
  tree.insert(tree.find("\"nic_gbps\""),
              "\"fabric\":{\"nodes_per_leaf\":1,\"oversubscription\":4},");
  const Both f = run_both(tree);
  check_same(f);
  const Both n = run_both(flat);
  CHECK(f.sym_summary.step_time_s > n.sym_summary.step_time_s);
}

TEST_CASE("rank symmetry: the expanded trace summarises like the full-fidelity run",
          "[strategies][symmetry][sim]") {
  // simrun --expand-mirrors: each mirrored GPU gets a copy of its representative's events, so the
  // trace has every GPU's lanes and its summary needs no weights; it must match the full run.
  Both b = run_both(cluster_gpt(1, 8, 1, "\"kind\":\"3d\",\"tp\":2,\"pp\":2"));
  const std::size_t before = b.sym.trace.events.size();
  CHECK(prof::expand_mirrored_gpus(b.sym.trace) == 6);  // 8 GPUs, 2 simulated
  CHECK(b.sym.trace.processes.size() == 8);
  CHECK(b.sym.trace.events.size() == 4 * before);  // each representative stands for 4 GPUs
  const prof::Summary e = prof::summarize(b.sym.trace);
  CHECK_FALSE(e.symmetric);
  CHECK(e.step_times_ns == b.full_summary.step_times_ns);
  CHECK(e.exposed_comm_s == Approx(b.full_summary.exposed_comm_s).epsilon(1e-9));
  REQUIRE(e.per_gpu.size() == b.full_summary.per_gpu.size());
  for (std::size_t i = 0; i < e.per_gpu.size(); ++i) {
    CAPTURE(i);
    CHECK(e.per_gpu[i].gpu == b.full_summary.per_gpu[i].gpu);
    CHECK(e.per_gpu[i].compute_s == b.full_summary.per_gpu[i].compute_s);
    CHECK(e.per_gpu[i].peak_bytes == b.full_summary.per_gpu[i].peak_bytes);
  }
  // Expanding again changes nothing.
  CHECK(prof::expand_mirrored_gpus(b.sym.trace) == 0);
}

namespace {

std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path d = std::filesystem::temp_directory_path() /
                                  ("csim_per_rank_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d;
}

}  // namespace

TEST_CASE("per-rank files of a symmetric run: every rank, as if the mirrors were expanded first",
          "[symmetry][trace][sim]") {
  // tp 2 x pp 2 x dp 2 on 8 GPUs: 2 simulated GPUs (one per stage), each standing for 4.
  Both b = run_both(cluster_gpt(1, 8, 1, "\"kind\":\"3d\",\"tp\":2,\"pp\":2"));
  REQUIRE(b.sym.trace.processes.size() == 2);
  const std::filesystem::path every = fresh_dir("every"), expanded = fresh_dir("expanded"),
                              reps = fresh_dir("reps");
  // By default every GPU gets its file, the 6 mirrored ones written from their representative's.
  const prof::PerRankResult r = prof::write_per_rank_traces(b.sym.trace, every.string());
  CHECK(r.world_size == 8);
  REQUIRE(r.files.size() == 8);
  int mirrored = 0;
  std::set<int> ranks;
  for (const prof::PerRankFile& f : r.files) {
    mirrored += f.mirrored ? 1 : 0;
    ranks.insert(f.rank);
    CHECK(f.stands_for == std::vector<int>{f.rank});
  }
  CHECK(mirrored == 6);
  CHECK(ranks == std::set<int>{0, 1, 2, 3, 4, 5, 6, 7});
  // The same bytes as expanding the mirrors in memory (expand_mirrored_gpus, tested against the
  // full-fidelity run above) and writing one file per process.
  prof::Trace t = b.sym.trace;
  CHECK(prof::expand_mirrored_gpus(t) == 6);
  prof::write_per_rank_traces(t, expanded.string());
  for (int rank = 0; rank < 8; ++rank) {
    CAPTURE(rank);
    const std::string name = "rank-" + std::to_string(rank) + ".json";
    const std::string a = file_text(every / name);
    CHECK_FALSE(a.empty());
    CHECK(a == file_text(expanded / name));
  }
  // A mirrored rank's file is a whole rank as HTA reads it: its own rank and GPU process, every
  // step and kernel of its representative.
  const prof::Trace m = prof::read_chrome_trace_file((every / "rank-5.json").string());
  CHECK(m.rank == 5);
  CHECK(m.world_size == 8);
  REQUIRE_FALSE(m.processes.empty());
  CHECK(m.processes[0].gpu == 5);

  // --per-rank-representatives: the 2 simulated GPUs' files, each naming the 4 ranks it stands
  // for in clustersim.rank_symmetry.stands_for, together every rank once.
  const prof::PerRankResult p = prof::write_per_rank_traces(b.sym.trace, reps.string(),
                                                            prof::PerRankMirrors::kRepresentatives);
  REQUIRE(p.files.size() == 2);
  CHECK(p.world_size == 8);
  std::multiset<int> covered;
  for (const prof::PerRankFile& f : p.files) {
    CHECK_FALSE(f.mirrored);
    REQUIRE(f.stands_for.size() == 4);
    CHECK(f.stands_for.front() == f.rank);
    covered.insert(f.stands_for.begin(), f.stands_for.end());
    const prof::Trace back = prof::read_chrome_trace_file(
        (reps / ("rank-" + std::to_string(f.rank) + ".json")).string());
    CHECK(back.metadata["rank_symmetry"]["stands_for"].get<std::vector<int>>() == f.stands_for);
  }
  CHECK(covered == std::multiset<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(std::distance(std::filesystem::directory_iterator(reps),
                      std::filesystem::directory_iterator{}) == 2);
  for (const auto& d : {every, expanded, reps}) std::filesystem::remove_all(d);
}

TEST_CASE("rank ranges read as ranges", "[symmetry][trace]") {
  CHECK(prof::rank_ranges({3, 0, 1, 2, 8, 10, 11}) == "0-3, 8, 10-11");
  CHECK(prof::rank_ranges({5}) == "5");
  CHECK(prof::rank_ranges({}).empty());
  CHECK(prof::rank_ranges({1, 1, 2}) == "1-2");
}
