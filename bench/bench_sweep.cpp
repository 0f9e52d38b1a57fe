// Sweep and tune benchmark (not a test; docs/sweep.md, "Speed"): variants evaluated per second
// on one core for small scenarios (issue 8's target: >= 1,000 per second per core) and for GPT-3
// 175B on 1,024 A100s at batches 128 and 1,536 (issue 17's target: >= 200 per second per core),
// the same on every core, and the wall time of `simrun tune` on GPT-3 175B over 1,024 GPUs (issue
// 17's target: < 2 s). Prints a table; figures are quoted as measured in one run, never asserted.
//
//   build/release/bench/bench_sweep [--variants N] [--gpt3-variants N] [--op-level] [--no-tune]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "core/json_diagnostics.hpp"
#include "run/allocator.hpp"
#include "sweep/sweep_runner.hpp"
#include "sweep/tune.hpp"

namespace {

using namespace csim;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Case {
  const char* scenario;
  sweep::Knob knob;  // one knob with many values: the variants
};

double variants_per_s(const Case& c, std::size_t n, int threads, run::Evaluation evaluation,
                      std::size_t* ok) {
  const std::string path = std::string(CSIM_SOURCE_DIR) + "/scenarios/" + c.scenario;
  const nlohmann::json doc = core::parse_json_strict(read(path), path);
  std::vector<sweep::Knob> knobs{c.knob};
  std::vector<sweep::Variant> vs = sweep::grid_variants(knobs, n);
  vs.resize(std::min(vs.size(), n));
  sweep::SweepRunOptions o;
  o.threads = threads;
  o.evaluation = evaluation;
  const sweep::SweepRunOutcome out = sweep::run_variants(doc, path, {}, knobs, vs, o);
  *ok = 0;
  for (const sweep::VariantResult& r : out.rows) *ok += r.status != sweep::VariantStatus::kInvalid;
  return static_cast<double>(out.rows.size()) / out.wall_s;
}

sweep::Knob range_knob(const char* key, int from, int step, std::size_t n) {
  sweep::Knob k{key, {}};
  for (std::size_t i = 0; i < n; ++i)
    k.values.push_back(std::to_string(from + step * static_cast<int>(i)));
  return k;
}

// The same value n times: n evaluations of one configuration (variants that cost the same).
sweep::Knob repeat_knob(const char* key, const char* value, std::size_t n) {
  return sweep::Knob{key, std::vector<std::string>(n, value)};
}

constexpr const char* kUsage =
    "bench_sweep: sweep and tune speed (not a test; figures are quoted as measured)\n"
    "  bench_sweep [--variants N] [--gpt3-variants N] [--op-level] [--no-tune]\n"
    "      variants per second on 1 core and on all cores: three small scenarios (N variants,\n"
    "      default 4000) and GPT-3 175B / 1,024 A100s at batch 128 and 1,536 (--gpt3-variants,\n"
    "      default 16); then simrun tune's wall time on that workload. --op-level: every\n"
    "      variant on the op-level simulator instead of the block path (docs/block-eval.md)\n"
    "  bench_sweep --help\n";

}  // namespace

int main(int argc, char** argv) {
  csim::run::configure_allocator();  // as simrun does (run/allocator.hpp)
  std::size_t n = 4000, n_gpt3 = 16;
  bool tune = true;
  run::Evaluation evaluation = run::Evaluation::kBlock;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--variants") && i + 1 < argc) {
      n = std::stoul(argv[++i]);
    } else if (!std::strcmp(argv[i], "--gpt3-variants") && i + 1 < argc) {
      n_gpt3 = std::stoul(argv[++i]);
    } else if (!std::strcmp(argv[i], "--no-tune")) {
      tune = false;
    } else if (!std::strcmp(argv[i], "--op-level")) {
      evaluation = run::Evaluation::kOpLevel;
    } else {
      std::fputs(kUsage, std::strcmp(argv[i], "--help") ? stderr : stdout);
      return std::strcmp(argv[i], "--help") ? 2 : 0;
    }
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<Case> cases{
      {"single_gpu_linear.json", range_knob("training.global_batch", 10, 10, n)},
      {"mlp_1xh200.json", range_knob("training.global_batch", 1024, 1024, n)},
      {"linear_5x2_dp2.json", range_knob("training.global_batch", 2, 2, n)},
      {"gpt3_175b_1024xa100_3d.json", repeat_knob("training.global_batch", "128", n_gpt3)},
      {"gpt3_175b_1024xa100_3d.json", repeat_knob("training.global_batch", "1536", n_gpt3)},
  };
  std::printf("evaluation: %s\n", run::to_string(evaluation));
  std::printf("%-40s %9s %14s %16s\n", "scenario", "variants", "1 core /s", "all cores /s");
  for (const Case& c : cases) {
    std::size_t ok1 = 0, okn = 0;
    const std::size_t nc = c.knob.values.size();
    const double one = variants_per_s(c, nc, 1, evaluation, &ok1);
    const double all = variants_per_s(c, nc, cores, evaluation, &okn);
    const std::string label = std::string(c.scenario) + " " + c.knob.key + "=" + c.knob.values[0];
    std::printf("%-40s %9zu %14.1f %10.1f (%d)\n",
                c.knob.values[0] == c.knob.values.back() ? label.c_str() : c.scenario, ok1, one,
                all, cores);
  }
  if (!tune) return 0;
  const std::string path = std::string(CSIM_SOURCE_DIR) + "/scenarios/gpt3_175b_1024xa100_3d.json";
  const nlohmann::json doc = core::parse_json_strict(read(path), path);
  sweep::TuneOptions o;
  o.threads = cores;
  o.evaluation = evaluation;
  const auto t0 = std::chrono::steady_clock::now();
  const sweep::TuneResult r = sweep::tune(doc, path, {}, o);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<std::size_t> rank = r.ranking();
  std::printf(
      "tune gpt3_175b_1024xa100_3d: %zu layouts, %zu simulated, %.1f s on %d cores; best %s "
      "%.1f ms\n",
      r.candidates.size(), r.simulated, s, cores,
      rank.empty() ? "-" : r.candidates[rank[0]].label.c_str(),
      rank.empty() ? 0.0 : r.candidates[rank[0]].result.step_time_s * 1e3);
  return 0;
}
