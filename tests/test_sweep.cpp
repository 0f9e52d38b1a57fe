// simrun sweep and simrun tune (docs/sweep.md): variants, figures, results file, resume,
// interruption, and the search's optimum checked against an exhaustive one.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/json_diagnostics.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/summary.hpp"
#include "simrun_cli_support.hpp"
#include "sweep/results_io.hpp"
#include "sweep/sweep_runner.hpp"
#include "sweep/tune.hpp"
#include "test_support.hpp"

using namespace csim;
namespace fs = std::filesystem;

namespace {

nlohmann::json scenario_doc(const std::string& path) {
  return core::parse_json_strict(test::read_file(path), path);
}

double rel(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-300);
}

}  // namespace

// [SECTION] Variants -----------------------------------------------------------------------------

TEST_CASE("a knob splits its values on commas outside brackets and quotes", "[sweep]") {
  const sweep::Knob k = sweep::parse_knob("strategy.device_ids=[0,1],[0,1,2],\"a,b\"");
  CHECK(k.key == "strategy.device_ids");
  REQUIRE(k.values.size() == 3);
  CHECK(k.values[0] == "[0,1]");
  CHECK(k.values[1] == "[0,1,2]");
  CHECK(k.values[2] == "\"a,b\"");
  CHECK_THROWS_AS(sweep::parse_knob("no_equals"), InputError);
  CHECK_THROWS_AS(sweep::parse_knob("k=1,,2"), InputError);
}

TEST_CASE("the grid varies the first knob slowest, a random sample is distinct and seeded",
          "[sweep]") {
  const std::vector<sweep::Knob> knobs{{"a", {"1", "2"}}, {"b", {"x", "y", "z"}}};
  const std::vector<sweep::Variant> g = sweep::grid_variants(knobs, 100);
  REQUIRE(g.size() == 6);  // 2 x 3
  // Mixed radix, b fastest: index 4 = a[4 / 3] b[4 % 3] = (2, y).
  CHECK(g[4].values == std::vector<std::string>{"2", "y"});
  CHECK(sweep::variant_id(knobs, g[4].values) == "a=2 b=y");
  CHECK_THROWS_AS(sweep::grid_variants(knobs, 5), InputError);  // over the limit

  const std::vector<sweep::Variant> r1 = sweep::random_variants(knobs, 4, 7);
  const std::vector<sweep::Variant> r2 = sweep::random_variants(knobs, 4, 7);
  REQUIRE(r1.size() == 4);
  std::set<std::size_t> seen;
  for (std::size_t i = 0; i < r1.size(); ++i) {
    CHECK(r1[i].index == r2[i].index);  // the same seed draws the same variants
    CHECK(seen.insert(r1[i].index).second);
    CHECK(r1[i].values == g[r1[i].index].values);
  }
  CHECK(sweep::random_variants(knobs, 50, 7).size() == 6);  // more than the grid: the grid
}

// [SECTION] Figures ------------------------------------------------------------------------------

// The sweep skips the trace, so its op-level figures must be the summary's, computed from the
// trace simrun writes: same step spans, same MFU formula, same memory peaks. The default (block)
// path gives the same figures within 1 % (docs/block-eval.md; every bundled scenario is compared
// in tests/test_block_eval.cpp), and exactly where it falls back to the op-level simulator.
TEST_CASE("a variant's figures are the summary's of the same run", "[sweep]") {
  for (const char* name : {"dp_vs_ddp_4x1080ti.json", "gpt2_small_8xa100.json",
                           "gpt_pipeline_8xa100.json", "mlp_1xh200.json"}) {
    INFO(name);
    const std::string path = test::scenario_path(name);
    const sweep::VariantResult v =
        sweep::evaluate_variant(scenario_doc(path), path, {}, {}, run::Evaluation::kOpLevel);
    const sweep::VariantResult fast = sweep::evaluate_variant(scenario_doc(path), path, {});
    REQUIRE(fast.status == v.status);
    CHECK(rel(fast.step_time_s, v.step_time_s) < 0.01);
    CHECK(rel(fast.peak_gib, v.peak_gib) < 0.01);
    // gpt_pipeline_8xa100 is a pipeline the block path covers; the other three fall back
    // (one process with several threads, or a single GPU: docs/block-eval.md, "Scope").
    CHECK((fast.evaluation == block::EvalPath::kBlock) ==
          (std::string(name) == "gpt_pipeline_8xa100.json"));
    const run::RunResult run = run::simulate(core::parse_scenario_file(path));
    const prof::Summary s = prof::summarize(run.trace);
    REQUIRE(v.status == (run.memory.oom ? sweep::VariantStatus::kOom : sweep::VariantStatus::kOk));
    CHECK(rel(v.step_time_s, s.step_time_s) < 1e-12);
    CHECK(rel(v.samples_per_s, s.samples_per_s) < 1e-12);
    CHECK(rel(v.mfu, s.mfu) < 1e-12);
    double peak = 0;
    for (const core::GpuMemory& g : run.memory.gpus)
      peak = std::max(peak, static_cast<double>(g.peak_bytes));
    CHECK(rel(v.peak_gib, peak / kGiB) < 1e-12);
    CHECK(v.per_gpu.size() == run.memory.gpus.size());
  }
}

TEST_CASE("an invalid variant is a row with the parser's message, not an error", "[sweep]") {
  const std::string path = test::scenario_path("dp_vs_ddp_4x1080ti.json");
  // The cluster has GPUs 0..3: GPU 7 does not exist.
  const sweep::VariantResult v =
      sweep::evaluate_variant(scenario_doc(path), path, {"strategy.device_ids=[0,7]"});
  CHECK(v.status == sweep::VariantStatus::kInvalid);
  CHECK(v.error.find("strategy.device_ids") != std::string::npos);
}

// [SECTION] Command line -------------------------------------------------------------------------

namespace {

const std::vector<std::string> kGrid{"--grid", "strategy.kind=data_parallel,ddp", "--grid",
                                     "training.global_batch=64,128,256,512"};

std::vector<std::string> sweep_args(const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> a{"sweep", test::scenario_path("dp_vs_ddp_4x1080ti.json"), "-o", out};
  a.insert(a.end(), kGrid.begin(), kGrid.end());
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

}  // namespace

TEST_CASE("simrun sweep writes every variant, fitting ones first by throughput", "[sweep][cli]") {
  const fs::path d = test::fresh_dir("sweep", "csv");
  const test::CliResult r = test::run_simrun(sweep_args((d / "r.csv").string(), {"-j", "2"}));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  // The CSV holds the columns and the rows only (pandas.read_csv reads it as it is); the header
  // is its sidecar r.csv.meta.json.
  std::ifstream in(d / "r.csv");
  std::string columns, line;
  std::getline(in, columns);
  const nlohmann::json meta =
      nlohmann::json::parse(test::read_file((d / "r.csv.meta.json").string()));
  CHECK(meta.at("format") == "csim-sweep");
  CHECK(meta.at("variants_total") == 8);
  CHECK(meta.at("done") == 8);
  CHECK(meta.at("complete") == true);
  CHECK(meta.at("keys") == nlohmann::json::array({"strategy.kind", "training.global_batch"}));
  CHECK(columns.rfind("index,strategy.kind,training.global_batch,status,step_time_ms", 0) == 0);
  std::vector<std::string> status;
  std::vector<double> rate;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = [&] {
      std::vector<std::string> v;
      std::stringstream ss(line);
      std::string x;
      while (std::getline(ss, x, ',')) v.push_back(x);
      return v;
    }();
    status.push_back(f[3]);
    rate.push_back(std::stod(f[5]));
  }
  REQUIRE(status.size() == 8);  // 2 kinds x 4 batches
  // 1080 Ti (11 GiB): batch 512 does not fit under either kind (docs/memory.md), the rest do.
  CHECK(std::count(status.begin(), status.end(), "oom") == 2);
  CHECK(status[6] == "oom");
  CHECK(status[7] == "oom");
  for (std::size_t i = 1; i < 6; ++i) CHECK(rate[i - 1] >= rate[i]);  // best first
  // The same sweep on one thread writes the same bytes: rows carry no wall-clock figure.
  const test::CliResult r1 = test::run_simrun(sweep_args((d / "r1.csv").string(), {"-j", "1"}));
  REQUIRE(r1.code == 0);
  CHECK(test::read_file((d / "r.csv").string()) == test::read_file((d / "r1.csv").string()));
  CHECK(test::read_file((d / "r.csv.meta.json").string()) ==
        test::read_file((d / "r1.csv.meta.json").string()));
}

TEST_CASE("simrun sweep resumes from a partial JSON Lines file, and a CSV needs its sidecar",
          "[sweep][cli]") {
  const fs::path d = test::fresh_dir("sweep", "jsonl");
  const std::string full = (d / "full.jsonl").string(), part = (d / "part.jsonl").string();
  REQUIRE(test::run_simrun(sweep_args(full)).code == 0);
  // One row object a line, 8 variants; keep the first 3 as an interrupted run would.
  std::ifstream in(full);
  std::string line, kept;
  int lines = 0;
  while (std::getline(in, line)) {
    CHECK(nlohmann::json::parse(line).contains("knobs"));
    if (lines++ < 3) kept += line + "\n";
  }
  CHECK(lines == 8);
  std::ofstream(part) << kept;
  fs::copy_file(full + ".meta.json", part + ".meta.json");
  const test::CliResult r = test::run_simrun(sweep_args(part));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("3 variants already done, 5 to go") != std::string::npos);
  CHECK(test::read_file(part) == test::read_file(full));
  // A CSV without its sidecar is not resumed from: its provenance is unknown.
  const std::string csv = (d / "r.csv").string();
  REQUIRE(test::run_simrun(sweep_args(csv)).code == 0);
  fs::remove(csv + ".meta.json");
  const test::CliResult r2 = test::run_simrun(sweep_args(csv));
  CHECK(r2.code == 2);
  CHECK(r2.err.find("provenance file " + csv + ".meta.json is missing") != std::string::npos);
}

TEST_CASE("simrun sweep resumes from a partial results file and ends with the same file",
          "[sweep][cli]") {
  const fs::path d = test::fresh_dir("sweep", "resume");
  const std::string full = (d / "full.json").string(), part = (d / "part.json").string();
  REQUIRE(test::run_simrun(sweep_args(full)).code == 0);
  // An interrupted run: keep 3 rows of the full file, marked incomplete.
  nlohmann::json doc = nlohmann::json::parse(test::read_file(full));
  doc["rows"].erase(doc["rows"].begin() + 3, doc["rows"].end());
  doc["complete"] = false;
  doc["done"] = 3;
  std::ofstream(part) << doc.dump(2) << "\n";
  const test::CliResult r = test::run_simrun(sweep_args(part));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("3 variants already done, 5 to go") != std::string::npos);
  CHECK(r.out.find("5 variants simulated") != std::string::npos);
  CHECK(test::read_file(part) == test::read_file(full));
  for (const auto& e : fs::directory_iterator(d))  // no temporary left behind
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("a sweep's base fingerprint is FNV-1a over its overrides, each with a newline",
          "[sweep]") {
  CHECK(sweep::base_fingerprint({}) == "none");
  // FNV-1a 64 of "a" is af63dc4c8601ec8c (the published test vector of the FNV reference code);
  // one more byte, '\n' (0x0a): (0xaf63dc4c8601ec8c ^ 0x0a) * 1099511628211 mod 2^64.
  CHECK(sweep::base_fingerprint({"a"}) == "089bdc07b544e7b2");
  // Order matters: --hf-config's model first, then the --set ones, as applied.
  CHECK(sweep::base_fingerprint({"a", "b"}) != sweep::base_fingerprint({"b", "a"}));
}

TEST_CASE("simrun sweep refuses an unknown knob and another sweep's results file (exit 2)",
          "[sweep][cli]") {
  const fs::path d = test::fresh_dir("sweep", "bad");
  const std::string scen = test::scenario_path("dp_vs_ddp_4x1080ti.json");
  const test::CliResult r = test::run_simrun(
      {"sweep", scen, "--grid", "strategy.bucket_size=1,2", "-o", (d / "x.csv").string()});
  CHECK(r.code == 2);
  CHECK(r.err.find("strategy.bucket_size") != std::string::npos);
  CHECK_FALSE(fs::exists(d / "x.csv"));
  // A results file of a sweep over other knobs is not resumed from.
  REQUIRE(test::run_simrun(
              {"sweep", scen, "-q", "--grid", "training.steps=2,3", "-o", (d / "y.csv").string()})
              .code == 0);
  const test::CliResult r2 = test::run_simrun(sweep_args((d / "y.csv").string()));
  CHECK(r2.code == 2);
  CHECK(r2.err.find("cannot resume") != std::string::npos);
  CHECK(r2.err.find("--fresh") == std::string::npos);  // the hint names -o or deleting
  // The same grid over another base (a --set applied before the grid) is another sweep too: its
  // rows would mix variants of two scenarios under the same knob values. y.csv's base is "none"
  // (no --set, no --hf-config); this one's is the FNV-1a fingerprint of its one override.
  const test::CliResult r3 =
      test::run_simrun({"sweep", scen, "-q", "--grid", "training.steps=2,3", "--set",
                        "training.global_batch=64", "-o", (d / "y.csv").string()});
  INFO(r3.err);
  CHECK(r3.code == 2);
  CHECK(r3.err.find("its base (the --hf-config and --set applied before the grid) is none, this "
                    "sweep's " +
                    sweep::base_fingerprint({"training.global_batch=64"})) != std::string::npos);
}

// [SECTION] Tune ---------------------------------------------------------------------------------

// gpt_tiny_2xa100: 84M parameters on two 80 GB A100s, so every layout fits (model states 16 B x
// 84M = 1.3 GiB). Then, by hand, the fastest layout has
//   pp 1:  a 2-stage pipeline idles (pp - 1) / (m + pp - 1) of the step and adds p2p sends;
//   tp 1:  tensor parallelism halves every GEMM (lower efficiency, eq. in docs/cost-model.md) and
//          puts two all-reduces per block in the critical path, while data parallelism's
//          gradient all-reduce overlaps backward;
//   recompute none: recompute only adds forward FLOPs;
//   micro-batch 8 = global batch 16 / dp 2: the largest GEMMs, the highest efficiency.
// The ZeRO stage and DDP's bucket size are not decided by hand (they move the optimizer and the
// last bucket by < 3 %); an exhaustive search decides them, and tune must agree with it.
TEST_CASE("tune finds the layout derived by hand and the exhaustive search's optimum",
          "[sweep][tune]") {
  const std::string path = test::repo_path("tests/data/sweep/gpt_tiny_2xa100.json");
  const nlohmann::json doc = scenario_doc(path);
  sweep::TuneOptions o;
  o.threads = 2;
  const sweep::TuneResult r = sweep::tune(doc, path, {}, o);
  REQUIRE(r.complete);
  const std::vector<std::size_t> rank = r.ranking();
  REQUIRE_FALSE(rank.empty());
  const sweep::TuneCandidate& best = r.candidates[rank.front()];
  INFO(best.label);
  CHECK(best.label.find("tp 1 pp 1 mbs 8") != std::string::npos);
  CHECK(best.label.find("rc none") != std::string::npos);

  // Exhaustive: simulate every valid layout, pruned ones included.
  double exhaustive = 0;
  std::size_t pruned = 0;
  for (const sweep::TuneCandidate& c : r.candidates) {
    if (c.verdict == sweep::TuneVerdict::kInvalid) continue;
    pruned += c.verdict == sweep::TuneVerdict::kPruned;
    const sweep::VariantResult v = sweep::evaluate_variant(doc, path, c.sets);
    if (v.status != sweep::VariantStatus::kOk) continue;
    if (exhaustive == 0 || v.step_time_s < exhaustive) exhaustive = v.step_time_s;
    // The bounds are bounds: never above what the simulator finds.
    CHECK(c.lb_step_s <= v.step_time_s);
    CHECK(c.model_states_gib <= v.peak_gib);
  }
  CHECK(pruned > 0);  // the bound did prune something
  CHECK(best.result.step_time_s == exhaustive);
}

TEST_CASE("tune rejects layouts whose model states cannot fit, without simulating them",
          "[sweep][tune]") {
  // GPT-3 175B on 16 GPUs: 175e9 x 18 B (bf16 weights, fp32 main grads, Adam + master) / 16 GPUs
  // = 197 GB per GPU even fully sharded over tp x pp: nothing fits in 80 GB, nothing is simulated.
  const std::string path = test::scenario_path("gpt3_175b_1024xa100_3d.json");
  sweep::TuneOptions o;
  o.gpus = 16;
  const sweep::TuneResult r = sweep::tune(scenario_doc(path), path, {}, o);
  CHECK(r.simulated == 0);
  CHECK(r.ranking().empty());
  std::size_t cannot = 0;
  for (const sweep::TuneCandidate& c : r.candidates)
    cannot += c.verdict == sweep::TuneVerdict::kCannotFit;
  CHECK(cannot > 0);
  std::ostringstream out;
  sweep::print_tune_report(r, 5, 3, out);
  CHECK(out.str().find("no layout fits in memory") != std::string::npos);
  CHECK(out.str().find("model states (+ activations) need") != std::string::npos);
  // Every one of them on its model states alone (>= 197 GB per GPU above, no activations).
  CHECK(out.str().find(std::to_string(cannot) +
                       " cannot fit (memory bound: " + std::to_string(cannot) +
                       " on the model states alone, 0 with") != std::string::npos);
}
