// temporary probe
#include <chrono>
#include <cstdio>
#include "backends/block/block_eval.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario_parser.hpp"
using namespace csim;
int main(int argc, char** argv) {
  std::vector<std::string> sets;
  for (int i = 2; i < argc; ++i) sets.push_back(argv[i]);
  core::Scenario sc = core::parse_scenario_file(argv[1], sets);
  auto t0 = std::chrono::steady_clock::now();
  core::Program p = core::lower(sc);
  auto t1 = std::chrono::steady_clock::now();
  block::EvalResult a = block::evaluate(sc, p);
  auto t2 = std::chrono::steady_clock::now();
  block::EvalResult b = block::evaluate_op_level(sc, p);
  auto t3 = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("path %s (%s) lower %.1f ms fast %.2f ms op %.1f ms units %lld chains %lld\n", block::to_string(a.path), a.fallback_reason.c_str(), ms(t1 - t0), ms(t2 - t1), ms(t3 - t2), (long long)a.units, (long long)a.chains);
  std::printf("step %lld vs %lld (%.3f%%)\n", (long long)a.step_time_ns, (long long)b.step_time_ns, 100.0 * (a.step_time_ns - b.step_time_ns) / b.step_time_ns);
  std::printf("peak %lld vs %lld (%.3f%%)\n", (long long)a.max_peak_bytes(), (long long)b.max_peak_bytes(), 100.0 * (a.max_peak_bytes() - b.max_peak_bytes()) / (double)b.max_peak_bytes());
  std::printf("exposed %lld vs %lld (%.3f%%)\n", (long long)a.exposed_comm_ns, (long long)b.exposed_comm_ns, b.exposed_comm_ns ? 100.0 * (a.exposed_comm_ns - b.exposed_comm_ns) / b.exposed_comm_ns : 0.0);
}
