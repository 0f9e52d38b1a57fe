// Sweep and tune benchmark (not a test; docs/sweep.md, "Speed"): variants simulated per second
// on one core for small scenarios (issue 8's target: >= 1,000 per second per core), the same on
// every core, and the wall time of `simrun tune` on GPT-3 175B over 1,024 GPUs (target < 60 s).
// Prints a table; figures are quoted as measured in one run, never asserted.
//
//   build/release/bench/bench_sweep [--variants N] [--no-tune]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "core/json_diagnostics.hpp"
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

double variants_per_s(const Case& c, std::size_t n, int threads, std::size_t* ok) {
  const std::string path = std::string(CSIM_SOURCE_DIR) + "/scenarios/" + c.scenario;
  const nlohmann::json doc = core::parse_json_strict(read(path), path);
  std::vector<sweep::Knob> knobs{c.knob};
  std::vector<sweep::Variant> vs = sweep::grid_variants(knobs, n);
  vs.resize(std::min(vs.size(), n));
  sweep::SweepRunOptions o;
  o.threads = threads;
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

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 4000;
  bool tune = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--variants") && i + 1 < argc)
      n = std::stoul(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-tune"))
      tune = false;
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<Case> cases{
      {"single_gpu_linear.json", range_knob("training.global_batch", 10, 10, n)},
      {"mlp_1xh200.json", range_knob("training.global_batch", 1024, 1024, n)},
      {"linear_5x2_dp2.json", range_knob("training.global_batch", 2, 2, n)},
  };
  std::printf("%-26s %9s %14s %16s\n", "scenario", "variants", "1 core /s", "all cores /s");
  for (const Case& c : cases) {
    std::size_t ok1 = 0, okn = 0;
    const double one = variants_per_s(c, n, 1, &ok1);
    const double all = variants_per_s(c, n, cores, &okn);
    std::printf("%-26s %9zu %14.0f %10.0f (%d)\n", c.scenario, ok1, one, all, cores);
  }
  if (!tune) return 0;
  const std::string path = std::string(CSIM_SOURCE_DIR) + "/scenarios/gpt3_175b_1024xa100_3d.json";
  const nlohmann::json doc = core::parse_json_strict(read(path), path);
  sweep::TuneOptions o;
  o.threads = cores;
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
