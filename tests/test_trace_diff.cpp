// tracediff: metrics of small checked-in trace pairs (tests/data/diff/, written by make_pairs.py),
// op classes, tolerances, medians of several runs, the verdicts and exit codes, bad input.
// Formulas: docs/tracediff.md.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/op_classes.hpp"
#include "profiler/summary.hpp"
#include "profiler/trace_classify.hpp"
#include "profiler/trace_diff.hpp"
#include "tests/test_support.hpp"
#include "tools/tracediff_app.hpp"

using namespace csim;

namespace {

std::string data(const std::string& name) {
  return test::repo_path("tests/data/diff/" + name);
}

struct Run {
  int code = -1;
  std::string out, err;
};

Run tracediff(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  Run r;
  r.code = app::tracediff_main(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

const prof::MetricDiff* row(const prof::DiffResult& d, const std::string& key) {
  for (const auto& m : d.rows) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

prof::TraceEvent event(const char* cat, const char* name) {
  prof::TraceEvent e;
  e.cat = cat;
  e.name = name;
  e.cls = prof::classify(e.cat, e.name);
  return e;
}

constexpr double kGiBf = 1024.0 * 1024.0 * 1024.0;

}  // namespace

TEST_CASE("op classes of Kineto and ClusterSim events", "[tracediff]") {
  CHECK(prof::op_class(event("kernel", "ampere_sgemm_128x64_tn")) == "gemm");
  CHECK(prof::op_class(event("kernel", "sm80_xmma_fprop_implicit_gemm_indexed")) == "conv");
  CHECK(prof::op_class(event("kernel", "void at::native::vectorized_elementwise_kernel<4>")) ==
        "elementwise");
  CHECK(prof::op_class(event("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL")) == "all_reduce");
  CHECK(prof::op_class(event("kernel", "ncclKernel_ReduceScatter_RING_LL_Sum_float")) ==
        "reduce_scatter");
  CHECK(prof::op_class(event("Memcpy", "Memcpy DtoH (Device -> Pinned)")) == "memcpy_d2h");
  CHECK(prof::op_class(event("gpu_memset", "Memset (Device)")) == "memset");
  CHECK(prof::op_class(event("cpu_op", "aten::addmm")) == "cpu_op");
  CHECK(prof::op_class(event("cuda_runtime", "cudaLaunchKernel")) == "cuda_runtime");
  CHECK(prof::op_class(event("user_annotation", "ProfilerStep#3")).empty());
  // Our own traces carry the class in args.
  prof::TraceEvent ours = event("kernel", "fc.fwd");
  ours.args.push_back({"kind", std::string("gemm")});
  CHECK(prof::op_class(ours) == "gemm");
  prof::TraceEvent copy = event("gpu_memcpy", "scatter chunk 1");
  copy.args.push_back({"copy_kind", std::string("peer")});
  CHECK(prof::op_class(copy) == "memcpy_p2p");
  prof::TraceEvent coll = event("kernel", "ncclDevKernel_reduce (broadcast.bwd)");
  coll.args.push_back({"Collective name", std::string("reduce")});
  CHECK(prof::op_class(coll) == "reduce");
  // A kernel simrun replay ran at its measured duration (simulated_elsewhere_ns) is classed by the
  // name it had in its own trace, not by the op kind the replay gave it (docs/tracediff.md, "Op
  // classes"), so the per-class rows of tracediff ORIGINAL REPLAYED line up.
  prof::TraceEvent replayed = event("kernel", "ampere_sgemm_128x64_tn");
  replayed.args.push_back({"kind", std::string("elementwise")});
  CHECK(prof::op_class(replayed) == "elementwise");
  replayed.args.push_back({"simulated_elsewhere_ns", std::int64_t{12000}});
  CHECK(prof::op_class(replayed) == "gemm");
}

TEST_CASE("metrics of the base trace", "[tracediff]") {
  const prof::RunMetrics r = app::load_run(data("base.json"));
  auto v = [&](const std::string& k) {
    INFO(k);
    REQUIRE(r.metrics.count(k) == 1);
    return r.metrics.at(k).value;
  };
  // Steps 2..3 of period 10 ms: step_time = 10 ms.
  CHECK(v("step_time") == Approx(10e-3));
  // All-reduce [5.5, 7.5] ms, GEMM [0.5, 6.5] ms: exposed = 7.5 − 6.5 = 1 ms per GPU and step,
  // overlapped = 6.5 − 5.5 = 1 ms, so comm_overlap = 1 / (1 + 1) = 0.5.
  CHECK(v("exposed_comm") == Approx(1e-3));
  CHECK(v("comm_overlap") == Approx(0.5));
  // Peaks 1.5 GiB and 1.25 GiB: imbalance = 1.5 / 1.375.
  CHECK(v("peak_memory/max") == Approx(1.5 * kGiBf));
  CHECK(v("imbalance") == Approx(1.5 / 1.375));
  // Per (GPU, role, class): GEMM 6 ms, all-reduce 2 ms, H2D 0.5 ms per step. The host lane holds
  // aten::linear [0, 0.5] ms with cudaLaunchKernel nested in it: only the outer 0.5 ms counts.
  CHECK(v("time/gpu0/compute/gemm") == Approx(6e-3));
  CHECK(v("time/gpu1/comm/all_reduce") == Approx(2e-3));
  CHECK(v("time/mean/copy/memcpy_h2d") == Approx(0.5e-3));
  CHECK(v("time/gpu0/host/cpu_op") == Approx(0.5e-3));
  CHECK(r.metrics.count("time/gpu0/host/cuda_runtime") == 0);
  // Critical path, window [10, 30] ms, from the last GPU work: all-reduce [25.5, 27.5] ← (implicit:
  // the GPU work that ended last before 25.5) H2D [20.1, 20.6] ← all-reduce [15.5, 17.5] ← H2D
  // [10.1, 10.6] ← nothing after the window start. comm 2 + 2, copy 0.5 + 0.5, wait 4.9 + 2.6 +
  // 4.9 + 0.1 = 12.5; total 27.5 − 10 = 17.5 ms over 2 steps.
  CHECK(v("critical_path/communication") == Approx(2e-3));
  CHECK(v("critical_path/copy") == Approx(0.5e-3));
  CHECK(v("critical_path/wait") == Approx(6.25e-3));
  CHECK(v("critical_path/compute") == 0);
  CHECK(r.gpus.size() == 2);
}

TEST_CASE("a regression fails with exit 1, biggest change first", "[tracediff]") {
  const Run r = tracediff({data("base.json"), data("regression.json")});
  INFO(r.out << r.err);
  CHECK(r.code == app::kDiffRegression);
  const prof::DiffResult d = prof::diff_runs({app::load_run(data("base.json"))},
                                             {app::load_run(data("regression.json"))}, {});
  // exposed: 1 ms → 3 ms (+200 %); step 10 → 11 ms (+10 %); overlap 50 % → 0 % (−100 %).
  const prof::MetricDiff* exposed = row(d, "exposed_comm");
  REQUIRE(exposed != nullptr);
  CHECK(exposed->change_rel == Approx(2.0));
  CHECK(exposed->status == prof::Status::kRegressed);
  CHECK(row(d, "step_time")->change_rel == Approx(0.1));
  CHECK(row(d, "step_time")->status == prof::Status::kRegressed);
  CHECK(row(d, "comm_overlap")->status == prof::Status::kRegressed);
  // Sorted by |relative change|.
  for (std::size_t i = 1; i < d.rows.size(); ++i) {
    CHECK(std::fabs(d.rows[i - 1].change_rel) >= std::fabs(d.rows[i].change_rel));
  }
  CHECK(r.out.find("verdict: REGRESSION") != std::string::npos);
  CHECK(r.out.find("exposed_comm") < r.out.find("step_time"));
}

TEST_CASE("an improvement is reported but passes", "[tracediff]") {
  const Run r = tracediff({data("base.json"), data("improvement.json")});
  INFO(r.out << r.err);
  CHECK(r.code == app::kDiffOk);
  CHECK(r.out.find("improved") != std::string::npos);
  const prof::DiffResult d = prof::diff_runs({app::load_run(data("base.json"))},
                                             {app::load_run(data("improvement.json"))}, {});
  // step 10 → 9 ms: −10 %; GEMM 6 → 5 ms: −16.7 %.
  CHECK(row(d, "step_time")->change_rel == Approx(-0.1));
  CHECK(row(d, "step_time")->status == prof::Status::kImproved);
  CHECK(row(d, "time/gpu0/compute/gemm")->change_rel == Approx(-1.0 / 6.0));
  CHECK(d.regressions == 0);
}

TEST_CASE("ops that appeared and vanished", "[tracediff]") {
  const Run r = tracediff({data("base.json"), data("op_changed.json")});
  INFO(r.out << r.err);
  CHECK(r.code == app::kDiffRegression);
  const prof::DiffResult d = prof::diff_runs({app::load_run(data("base.json"))},
                                             {app::load_run(data("op_changed.json"))}, {});
  const prof::MetricDiff* gather = row(d, "time/gpu0/comm/all_gather");
  REQUIRE(gather != nullptr);
  CHECK(gather->appeared);
  CHECK(gather->next.median == Approx(0.5e-3));
  CHECK(gather->status == prof::Status::kRegressed);
  const prof::MetricDiff* h2d = row(d, "time/gpu1/copy/memcpy_h2d");
  REQUIRE(h2d != nullptr);
  CHECK(h2d->vanished);
  CHECK(h2d->status == prof::Status::kImproved);
  REQUIRE(d.appeared_ops.size() == 1);
  CHECK(d.appeared_ops[0].name == "comm ncclDevKernel_AllGather_RING_LL");
  REQUIRE(d.vanished_ops.size() == 1);
  CHECK(d.vanished_ops[0].name == "copy Memcpy HtoD (Pageable -> Device)");
  CHECK(r.out.find("ops only in new") != std::string::npos);
  CHECK(r.out.find("(appeared)") != std::string::npos);
}

TEST_CASE("different rank counts compare what is comparable and say so", "[tracediff]") {
  const Run r = tracediff({data("base.json"), data("one_gpu.json")});
  INFO(r.out << r.err);
  CHECK(r.out.find("different rank counts: base has 2 GPUs (world size 2), new has 1 GPU") !=
        std::string::npos);
  const prof::DiffResult d = prof::diff_runs({app::load_run(data("base.json"))},
                                             {app::load_run(data("one_gpu.json"))}, {});
  CHECK(row(d, "time/gpu0/compute/gemm") == nullptr);
  REQUIRE(row(d, "time/mean/compute/gemm") != nullptr);
  CHECK(row(d, "time/mean/compute/gemm")->status == prof::Status::kUnchanged);
  // Imbalance 1.5/1.375 → 1: better, so not a failure.
  CHECK(row(d, "imbalance")->status == prof::Status::kImproved);
  CHECK(r.code == app::kDiffOk);
}

TEST_CASE("malformed, truncated, missing and oversized inputs exit 2 naming the file",
          "[tracediff]") {
  for (const char* bad : {"truncated.json", "not_json.json", "no_events.json", "absent.json"}) {
    const Run r = tracediff({data("base.json"), data(bad)});
    INFO(bad << ": " << r.err);
    CHECK(r.code == app::kDiffBadInput);
    CHECK(r.err.find(bad) != std::string::npos);
    CHECK(r.out.empty());
  }
  const Run huge = tracediff({data("base.json"), data("regression.json"), "--max-size", "1KiB"});
  CHECK(huge.code == app::kDiffBadInput);
  CHECK(huge.err.find("over the limit") != std::string::npos);
  CHECK(tracediff({data("base.json")}).code == app::kDiffBadInput);
  CHECK(tracediff({data("base.json"), data("base.json"), "--tolerance", "abc"}).code ==
        app::kDiffBadInput);
  // A summary JSON missing a key.
  const std::string bad_summary = test::tmp_path("csim_bad_summary.json").string();
  { std::ofstream(bad_summary) << R"({"step_time_s": 0.01, "per_gpu": [{"name": "x"}]})"; }
  const Run s = tracediff({data("base.json"), bad_summary});
  CHECK(s.code == app::kDiffBadInput);
  CHECK(s.err.find("per_gpu[0].peak_bytes") != std::string::npos);
  std::remove(bad_summary.c_str());
}

TEST_CASE("a trace compared with its own summary JSON", "[tracediff]") {
  const prof::Trace t = prof::read_chrome_trace_file(data("base.json"));
  const std::string path = test::tmp_path("csim_base_summary.json").string();
  { std::ofstream(path) << prof::summary_to_json(prof::summarize(t)).dump(2); }
  const Run r = tracediff({data("base.json"), path});
  INFO(r.out << r.err);
  CHECK(r.code == app::kDiffOk);
  CHECK(r.out.find("no metric changed") != std::string::npos);
  CHECK(r.out.find("'time' metrics only in base: not compared") != std::string::npos);
  std::remove(path.c_str());
}

TEST_CASE("tolerance file parsing", "[tracediff]") {
  const auto rules =
      prof::parse_tolerance_rules(test::read_file(data("tolerances.txt")), "tolerances.txt");
  REQUIRE(rules.size() == 4);
  prof::Tolerances tol;
  tol.rules = rules;
  CHECK(tol.for_metric("step_time", prof::Unit::kSeconds).rel == Approx(0.01));
  // Defaults: --tolerance (2 %), min 1 µs for times, 1 MiB for memory.
  CHECK(tol.for_metric("exposed_comm", prof::Unit::kSeconds).rel == Approx(0.02));
  CHECK(tol.for_metric("exposed_comm", prof::Unit::kSeconds).min_abs == Approx(1e-6));
  CHECK(tol.for_metric("peak_memory/gpu3", prof::Unit::kBytes).min_abs ==
        Approx(64.0 * 1024 * 1024));
  CHECK(tol.for_metric("peak_memory/gpu3", prof::Unit::kBytes).rel == 0);
  CHECK(tol.for_metric("time/gpu0/host/cpu_op", prof::Unit::kSeconds).ignore);
  CHECK_FALSE(tol.for_metric("time/gpu0/compute/gemm", prof::Unit::kSeconds).ignore);
  CHECK(tol.for_metric("critical_path/wait", prof::Unit::kSeconds).min_abs == Approx(50e-6));
  CHECK(prof::glob_match("time/*/comm/*", "time/gpu12/comm/all_reduce"));
  CHECK_FALSE(prof::glob_match("time/*/comm/*", "time/gpu12/compute/gemm"));
  double v = 0;
  CHECK(prof::parse_percent("2%", &v));
  CHECK(v == Approx(0.02));
  CHECK(prof::parse_percent("0.5", &v));
  CHECK(v == Approx(0.005));
  CHECK_FALSE(prof::parse_percent("-1%", &v));
  CHECK(prof::parse_quantity("1.5ms", &v));
  CHECK(v == Approx(1.5e-3));
  CHECK(prof::parse_quantity("2GiB", &v));
  CHECK(v == Approx(2 * kGiBf));
  CHECK_FALSE(prof::parse_quantity("5 parsecs", &v));
  // Errors name the file and the line.
  try {
    prof::parse_tolerance_rules("step_time 1%\nexposed_comm five\n", "tol.txt");
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("tol.txt: line 2") != std::string::npos);
  }
  CHECK_THROWS_AS(prof::parse_tolerance_rules("step_time\n", "tol.txt"), InputError);
  CHECK_THROWS_AS(prof::parse_tolerance_rules("step_time min=fast\n", "tol.txt"), InputError);
  // A looser tolerance turns the regression pair's step time (+10 %) into a pass for that metric.
  prof::Tolerances loose;
  loose.rules = prof::parse_tolerance_rules("* 300%\ncritical_path/* ignore\n", "t");
  const prof::DiffResult d = prof::diff_runs({app::load_run(data("base.json"))},
                                             {app::load_run(data("regression.json"))}, loose);
  // The largest change outside the critical path is exposed_comm's +200 %: within 300 %.
  CHECK(d.regressions == 0);
  // Through the command line, with the checked-in file: step_time at 1 % still fails.
  const Run r = tracediff(
      {data("base.json"), data("regression.json"), "--tolerances", data("tolerances.txt")});
  CHECK(r.code == app::kDiffRegression);
}

TEST_CASE("several runs per side are compared by median with a spread", "[tracediff]") {
  auto run = [](double step_s) {
    prof::RunMetrics r;
    r.source = "run";
    r.families.insert(prof::kFamilyStep);
    prof::Metric m;
    m.value = step_s;
    m.family = prof::kFamilyStep;
    r.metrics["step_time"] = m;
    return r;
  };
  // base: median(10, 11, 30) = 11 ms, spread (30 − 10)/11 = 1.818; new: median(10.4, 10.5,
  // 10.6) = 10.5 ms: −4.5 % → improved despite the 30 ms outlier.
  const prof::DiffResult d = prof::diff_runs({run(10e-3), run(11e-3), run(30e-3)},
                                             {run(10.4e-3), run(10.5e-3), run(10.6e-3)}, {});
  const prof::MetricDiff* st = row(d, "step_time");
  REQUIRE(st != nullptr);
  CHECK(st->base.median == Approx(11e-3));
  CHECK(st->next.median == Approx(10.5e-3));
  CHECK(st->base.spread() == Approx(20.0 / 11.0));
  CHECK(st->next.spread() == Approx(0.2 / 10.5));
  CHECK(st->status == prof::Status::kImproved);
  // Even count: mean of the middle two.
  const prof::DiffResult e = prof::diff_runs({run(10e-3), run(12e-3)}, {run(11e-3)}, {});
  CHECK(row(e, "step_time")->base.median == Approx(11e-3));
  CHECK(row(e, "step_time")->status == prof::Status::kUnchanged);
  // Command line: three base runs (base, regression, base) vs base: median is base's.
  const Run r = tracediff({"--base", data("base.json"), "--base", data("regression.json"), "--base",
                           data("base.json"), "--new", data("base.json")});
  INFO(r.out << r.err);
  CHECK(r.code == app::kDiffOk);
  CHECK(r.out.find("medians of 3 base and 1 new runs") != std::string::npos);
}

TEST_CASE("the JSON report (--json) holds every compared metric", "[tracediff]") {
  const std::string path = test::tmp_path("csim_diff.json").string();
  const Run r = tracediff({data("base.json"), data("regression.json"), "--json", path});
  CHECK(r.code == app::kDiffRegression);
  const nlohmann::json j = nlohmann::json::parse(test::read_file(path));
  CHECK(j["verdict"] == "regression");
  CHECK(j["rows"].size() > 10);
  CHECK(j["rows"][0]["status"].is_string());
  std::remove(path.c_str());
}
