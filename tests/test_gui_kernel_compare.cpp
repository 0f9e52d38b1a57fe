// simview's per-GPU kernel comparison (gui/kernel_compare_model.hpp), on hand-made traces and
// on a small mixture of experts simulated with balanced and with zipf routing, and the compare
// table's expert-parallel rows.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/scenario/scenario_parser.hpp"
#include "gui/kernel_compare_model.hpp"
#include "gui/scenario_runner.hpp"
#include "gui/stats_model.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"

using namespace csim;
using namespace csim::gui;

namespace {

prof::TraceEvent kernel(int pid, TimeNs ts, TimeNs dur, const std::string& name,
                        prof::EventClass cls = prof::EventClass::kCompute) {
  prof::TraceEvent e;
  e.pid = pid;
  e.tid = 1000;
  e.ts_ns = ts;
  e.dur_ns = dur;
  e.name = name;
  e.cat = "kernel";
  e.cls = cls;
  return e;
}

prof::TraceEvent all_to_all(int pid, TimeNs ts, TimeNs dur, const std::string& op,
                            const std::string& group) {
  prof::TraceEvent e =
      kernel(pid, ts, dur, "ncclDevKernel_SendRecv", prof::EventClass::kCommunication);
  e.args.push_back({"op", op});
  e.args.push_back({"Process Group Name", group});
  return e;
}

// Two GPUs of one EP group: layer 0's expert GEMM takes as long on both, layer 1's 50 % longer
// on GPU 1, and GPU 0's combine all-to-all of layer 1 waits those 50 µs for it.
prof::Trace two_gpus() {
  prof::Trace t;
  for (int p = 0; p < 2; ++p) {
    prof::ProcessInfo pi;
    pi.pid = p;
    pi.gpu = p;
    pi.name = "node 0 / GPU " + std::to_string(p);
    t.processes.push_back(pi);
  }
  for (int p = 0; p < 2; ++p) {
    t.events.push_back(kernel(p, 0, 100'000, "mb0 h.0.mlp.experts.fc.fwd"));
    t.events.push_back(all_to_all(p, 100'000, 20'000, "ep all_to_all combine", "3"));
    t.events.push_back(
        kernel(p, 200'000, p == 0 ? 100'000 : 150'000, "mb0 h.1.mlp.experts.fc.fwd"));
    t.events.push_back(all_to_all(p, p == 0 ? 300'000 : 350'000, p == 0 ? 70'000 : 20'000,
                                  "ep all_to_all combine", "3"));
    t.events.push_back(kernel(p, 400'000, 10'000, "mb0 h.1.attn.proj.fwd"));
    prof::TraceEvent host =
        kernel(p, 0, 5'000, "mb0 h.0.mlp.experts.fc.fwd", prof::EventClass::kHost);
    host.cat = "cpu_op";
    host.tid = 1;
    t.events.push_back(host);
  }
  return t;
}

}  // namespace

TEST_CASE("kernel filter: substrings of the name or of the op arg, '|' separating several",
          "[gui]") {
  const prof::Trace t = two_gpus();
  const prof::TraceEvent& gemm = t.events[0];
  const prof::TraceEvent& a2a = t.events[1];
  const prof::TraceEvent& host = t.events[5];
  CHECK(kernel_matches(gemm, "mlp.experts"));
  CHECK(kernel_matches(gemm, "attn | experts.fc"));
  CHECK_FALSE(kernel_matches(gemm, "attn"));
  CHECK(kernel_matches(a2a, "ep all_to_all"));  // by its op, not its kernel name
  CHECK(kernel_matches(a2a, "SendRecv"));
  CHECK_FALSE(kernel_matches(host, "mlp.experts"));  // host work is not GPU time
  CHECK_FALSE(kernel_matches(gemm, ""));
  CHECK_FALSE(kernel_matches(gemm, " | "));
}

TEST_CASE("kernel comparison: time per GPU per step, instances and the slowest GPU", "[gui]") {
  const prof::Trace t = two_gpus();
  prof::Summary s;
  s.step_times_ns = {1'000'000, 1'000'000};  // two steps: per-step figures are halves
  const KernelComparison e = compare_kernels(t, s, "mlp.experts");
  REQUIRE(e.gpus.size() == 2);
  CHECK(e.gpus[0].name == "node 0 / GPU 0");
  CHECK(e.gpus[0].events == 2);
  CHECK(e.gpus[0].per_step_s == Approx(100e-6));
  CHECK(e.gpus[1].per_step_s == Approx(125e-6));
  CHECK(e.instances == 2);
  CHECK(e.equal_instances == 1);
  CHECK(e.worst_spread == Approx(1.5));
  CHECK(e.mean_spread == Approx(1.25));
  CHECK(e.gpus[1].slowest == 1);
  CHECK(e.gpus[0].slowest == 0);
  CHECK(most_often_slowest(e) == 1);
  CHECK(max_over_mean(e) == Approx(125.0 / 112.5));

  // The all-to-alls: GPU 0's waits for GPU 1's longer GEMM, so GPU 0 is the slowest there.
  const KernelComparison a = compare_kernels(t, s, "ep all_to_all");
  REQUIRE(a.gpus.size() == 2);
  CHECK(a.instances == 2);
  CHECK(a.equal_instances == 1);
  CHECK(a.worst_spread == Approx(3.5));
  CHECK(most_often_slowest(a) == 0);

  // Nothing matches: no GPUs, no instances, no slowest.
  const KernelComparison none = compare_kernels(t, s, "no such kernel");
  CHECK(none.gpus.empty());
  CHECK(none.instances == 0);
  CHECK(most_often_slowest(none) == -1);
  CHECK(max_over_mean(none) == 0);
}

TEST_CASE("kernel comparison: a kernel on one GPU only is no instance, equal kernels no slowest",
          "[gui]") {
  prof::Trace t = two_gpus();
  t.events.push_back(kernel(0, 500'000, 10'000, "mb0 h.2.mlp.experts.fc.fwd"));
  const KernelComparison k = compare_kernels(t, prof::Summary{}, "h.0.mlp.experts|h.2.mlp");
  CHECK(k.instances == 1);  // h.0 on both GPUs; h.2 on GPU 0 only
  CHECK(k.equal_instances == 1);
  CHECK(most_often_slowest(k) == -1);
  CHECK(k.gpus[0].per_step_s == Approx(110e-6));  // no steps: the whole trace is one
}

TEST_CASE("balanced against zipf routing: equal expert kernels, then a slowest EP rank", "[gui]") {
  // A small mixture of experts (4 blocks of 4 SwiGLU experts, top 2) on 4 H100 with dp 4 and
  // ep 4, every rank simulated (no rank symmetry), balanced and zipf-routed: the demonstration
  // of docs/transformer.md, "Routing imbalance", in the compare view's terms.
  auto scenario = [](const std::string& routing) {
    return R"({"cluster": {"gpus_per_node": 4, "gpu": "H100-SXM5-80GB"},
      "model": {"transformer": {"layers": 4, "hidden": 256, "heads": 4, "ffn_hidden": 512,
      "seq_len": 64, "vocab": 1000, "mlp": "swiglu", "norm": "rmsnorm", "position": "rope",
      "moe": {"experts": 4, "top_k": 2, "expert_ffn_hidden": 128)" +
           routing + R"(}}}, "training": {"global_batch": 8, "precision": "bf16",
      "optimizer": "adam", "steps": 2}, "strategy": {"kind": "3d", "dp": 4,
      "micro_batch_size": 1, "ep": 4}, "simulation": {"symmetry": "off"}})";
  };
  const run::RunResult bal = run::simulate(core::parse_scenario_string(scenario(""), "b.json"));
  const run::RunResult zipf = run::simulate(core::parse_scenario_string(
      scenario(R"(, "routing": {"kind": "zipf", "skew": 1.5, "seed": 9})"), "z.json"));
  const prof::Summary sb = prof::summarize(bal.trace);
  const prof::Summary sz = prof::summarize(zipf.trace);

  const KernelComparison kb = compare_kernels(bal.trace, sb, "mlp.experts");
  const KernelComparison kz = compare_kernels(zipf.trace, sz, "mlp.experts");
  REQUIRE(kb.gpus.size() == 4);
  REQUIRE(kz.gpus.size() == 4);
  CHECK(kb.instances > 0);
  CHECK(kb.instances == kz.instances);  // the same kernels, only their durations differ
  CHECK(kb.equal_instances == kb.instances);
  CHECK(max_over_mean(kb) == Approx(1.0));
  CHECK(most_often_slowest(kb) == -1);
  CHECK(kz.equal_instances < kz.instances);
  CHECK(kz.worst_spread > 1.01);
  CHECK(max_over_mean(kz) > 1.0);
  CHECK(most_often_slowest(kz) >= 0);

  // The all-to-alls: equal when balanced; under zipf the ranks done early wait.
  const KernelComparison ab = compare_kernels(bal.trace, sb, "ep all_to_all");
  const KernelComparison az = compare_kernels(zipf.trace, sz, "ep all_to_all");
  REQUIRE(ab.instances > 0);
  CHECK(ab.equal_instances == ab.instances);
  CHECK(az.worst_spread > 1.01);

  // The compare table's expert-parallel rows, B (zipf) against A (balanced).
  const StatsModel a = build_stats(bal.trace, sb);
  const StatsModel b = build_stats(zipf.trace, sz);
  const std::vector<CompareRow> rows = compare_table({&a, &b});
  REQUIRE(rows.size() == 13);
  CHECK(rows[10].metric == "tokens/s per GPU");
  CHECK(rows[10].raw[0] == Approx(sb.tokens_per_s_per_gpu));
  CHECK(rows[11].metric == "tokens max/mean per EP rank");
  CHECK(rows[11].raw[0] == Approx(1.0));
  CHECK(rows[11].raw[1] == Approx(sz.tokens_per_ep_rank_max_over_mean));
  CHECK(rows[11].raw[1] > 1.0);
  CHECK(rows[12].metric == "exposed ep comm (sum of GPUs)");
  CHECK(rows[12].raw[0] == Approx(exposed_group_comm_s(sb, "ep")));
  CHECK(rows[12].raw[0] > 0);
  CHECK(rows[12].raw[1] > rows[12].raw[0]);
}

TEST_CASE("the bundled Qwen3-30B-A3B pair, reduced: the compare view's demonstration", "[gui]") {
  // docs/transformer.md, "Routing imbalance" (and its screenshot): the balanced scenario without
  // rank symmetry against its zipf-routed twin, 32 sequences, 2 steps, 16 H100, ep 8.
  const std::string dir = std::string(CSIM_SOURCE_DIR) + "/scenarios/";
  const std::vector<std::string> small = {"training.global_batch=32", "training.steps=2"};
  std::vector<std::string> bal_sets = small;
  bal_sets.push_back("simulation.symmetry=off");
  const SimResult bal = run_scenario(dir + "mbridge2509_qwen3_30b_a3b_h100_16gpu.json", bal_sets);
  const SimResult zipf = run_scenario(dir + "qwen3_30b_a3b_16xh100_ep8_zipf.json", small);
  INFO(bal.error << zipf.error);
  REQUIRE(bal.ok);
  REQUIRE(zipf.ok);
  const prof::Summary sb = prof::summarize(bal.trace);
  const prof::Summary sz = prof::summarize(zipf.trace);
  const KernelComparison eb = compare_kernels(bal.trace, sb, "mlp.experts");
  const KernelComparison ez = compare_kernels(zipf.trace, sz, "mlp.experts");
  REQUIRE(eb.gpus.size() == 16);
  REQUIRE(ez.gpus.size() == 16);
  CHECK(eb.instances == ez.instances);
  CHECK(eb.equal_instances == eb.instances);  // balanced: every EP rank's expert kernels equal
  CHECK(most_often_slowest(eb) == -1);
  CHECK(ez.equal_instances < ez.instances);  // zipf: they differ across the EP ranks
  CHECK(most_often_slowest(ez) >= 0);
  const KernelComparison ab = compare_kernels(bal.trace, sb, "ep all_to_all");
  const KernelComparison az = compare_kernels(zipf.trace, sz, "ep all_to_all");
  REQUIRE(ab.instances > 0);
  CHECK(ab.equal_instances == ab.instances);
  CHECK(az.equal_instances < az.instances);  // the ranks done early wait in the all-to-alls
  CHECK(az.mean_s > ab.mean_s);
  CHECK(exposed_group_comm_s(sz, "ep") > exposed_group_comm_s(sb, "ep"));
  CHECK(sz.step_time_s > sb.step_time_s);
}
