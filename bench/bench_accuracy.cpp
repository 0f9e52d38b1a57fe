// Accuracy table (not a test): every case of calibration/published/published-measurements.json
// and of published-measurements-modern.json next to what the simulator's own code paths predict
// for the published setup. Prints a markdown table and a summary; docs/accuracy.md is this
// program's output.
//
//   build/release/bench/bench_accuracy [--cases FILE] [--modern FILE]
//
// collective: Topology + plan_collective with CommParams{} (what the simulator uses), setups as in
//   tests/test_collective_cost.cpp [calibration]; busbw = S / predicted time x busbw_factor.
// layer_time: one GPT block simulated by run::simulate (tensor_parallel tp 8); the block's time is
//   the span on GPU 0's compute stream from its first op to its last (TP collectives included).
// training_throughput: run::simulate + prof::summarize -> tflops_per_gpu; the modern rows (a
//   bundled scenarios/<case id>.json in the published layout) -> tokens_per_s_per_gpu.
// host_overhead: HostSpec defaults, python_us_per_op + dispatch_us_per_op per framework op.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cost/collective_cost.hpp"
#include "core/gpu_catalog.hpp"
#include "core/scenario_parser.hpp"
#include "core/topology.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"

namespace {

using namespace csim;
using namespace csim::core;

// Two GPUs in one node (the GeForce cases, not in the catalog).
ClusterSpec gpu_pair(IntraNodeKind kind, int pcie_gen) {
  ClusterSpec cs;
  cs.gpus_per_node = 2;
  cs.intra.kind = kind;
  cs.intra.pcie_gen = pcie_gen;
  return cs;
}
using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kTolerance = 0.10;  // the [calibration] tests' bound

std::string fmt(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string num(double v) {  // shortest form: 230, 19.6, 6.21, 280000
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string pct(double e) {
  return (e >= 0 ? "+" : "") + fmt(100 * e, 1) + " %";
}

struct Row {
  std::string id, what, published, predicted, error, how, status;
  double abs_error = kNaN;  // the case's figure for the summary (NaN: not predicted)
};

// Cases whose published value set a constant (docs/cost-model.md and docs/scenario.md).
const std::map<std::string, std::string> kFitted = {
    {"nccl_a100x8_allreduce_peak", "NVSwitch efficiency 0.80"},
    {"nccl_h100x8_ring", "NVSwitch efficiency 0.80"},
    {"nccl_a100x8_sendrecv_1GB", "p2p_bandwidth_fraction 0.81"},
    {"nccl_2x4070tis_pcie_latency", "nccl_base_latency_us 4.0, PCIe alphas"},
    {"nccl_2x8h20_ib_latency", "NIC alpha 9.3 us (tree/LL), nvlstree_net_factor 0.454"},
    {"nccl_ndr_nic_peak", "NIC efficiency 0.97"},
    {"nccl_h100_nvls_by_gpucount", "nvls_efficiency 0.758 (8 GPUs only)"},
    {"nccl_h100x8_58MB", "JAX per-call overhead 339 us"},
    {"korthikanti_t4_22B_layer_baseline_no_recompute",
     "A100 gemm 0.68, GEMM tile 0.73 (forward only)"},
    {"megatron19_1p2B_1gpu", "V100 gemm 0.38, GEMM tile 0.42"},
    {"pytorch_eager_op_overhead_issue41383", "python 4.8 + dispatch 2.0 us"},
    {"mbridge2509_llama3_8b_h100_8gpu", "H100 FP8 gemm max_efficiency 0.671"},
};

// Why a case is off, where the cause is known (docs/cost-model.md, "Calibration").
const std::map<std::string, std::string> kWhy = {
    {"nccl_2x2080ti_nvlink",
     "GeForce NVLink bridges reach ~half the p2p rate under NCCL; 1 declared link gives the "
     "published figure"},
    {"pytorch_eager_op_overhead_horace",
     "defaults are the autograd-recording cost (issue41383); a no-grad tiny op is cheaper"},
    {"mbridge2509_llama3_70b_h100_64gpu",
     "exposed pipeline send/recv: waits on the last stage (LM head + loss on top of its blocks); "
     "TP userbuffers overlap not modelled"},
};

void set_status(Row& r, double err) {
  r.error = pct(err);
  r.abs_error = std::abs(err);
  const auto f = kFitted.find(r.id);
  const bool ok = std::abs(err) <= kTolerance;
  if (f != kFitted.end()) {
    r.status = "fitted on it (" + f->second + ")" + (ok ? "" : "; outside 10 %");
  } else if (ok) {
    r.status = "checked (not fitted)";
  } else {
    const auto w = kWhy.find(r.id);
    r.status = "not reproduced: " + (w != kWhy.end() ? w->second : "error > 10 %");
  }
}

// [SECTION] Collectives ---------------------------------------------------------------------------

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

struct Coll {
  double t_us = 0, busbw = 0;  // predicted time, busbw in GB/s
  std::string algo;            // "ring/Simple"
};

Coll predict(const Topology& t, CollectiveKind k, CollectiveAlgo a, int p, double S) {
  const TransferPlan plan = plan_collective(t, CommParams{}, k, a, iota(p), -1, S);
  const double s = static_cast<double>(plan.predicted_ns) * 1e-9;
  // send/recv and all-to-all are NCCL p2p: no algorithm or protocol choice.
  const std::string algo = plan.algo == CollectiveAlgo::kAuto
                               ? std::string("p2p")
                               : std::string(to_string(plan.algo)) + "/" + to_string(plan.proto);
  return {s * 1e6, S / s * busbw_factor(k, p) / 1e9, algo};
}

std::string size_str(double S) {
  return S >= 1e9 ? fmt(S / 1e9, 2) + " GB" : S >= 1e6 ? fmt(S / 1e6, 1) + " MB" : fmt(S, 0) + " B";
}

void collective(Row& r, const json& c) {
  const double pub = c["expected"]["value"].is_number() ? c["expected"]["value"].get<double>() : 0;
  const auto AR = CollectiveKind::kAllReduce;
  const auto AUTO = CollectiveAlgo::kAuto;
  auto busbw_row = [&](const std::string& gpu, int p, CollectiveKind k, CollectiveAlgo a, double S,
                       const std::string& note) {
    const Topology t(catalog_cluster(gpu, 1, 8));
    const Coll x = predict(t, k, a, p, S);
    r.predicted = fmt(x.busbw, 1) + " GB/s (" + x.algo + ", " + fmt(x.t_us, 1) + " us)";
    r.how = std::to_string(p) + "x " + gpu + ", " + to_string(k) + " " + size_str(S) + note;
    set_status(r, x.busbw / pub - 1);
  };
  const std::string& id = r.id;
  if (id == "nccl_a100x8_allreduce_peak") {
    busbw_row("A100-SXM4-80GB", 8, AR, AUTO, 8e9, ", auto (\">=8GB\": 8e9 as the test)");
  } else if (id == "nccl_a100x8_sendrecv_1GB") {
    busbw_row("A100-SXM4-80GB", 8, CollectiveKind::kSendRecv, AUTO, 1073741824.0,
              ", ring i->i+1 (sendrecv_perf -g 8)");
  } else if (id == "nccl_h100x8_ring") {
    busbw_row("H100-SXM5-80GB", 8, AR, CollectiveAlgo::kRing, 4e9,
              ", NCCL_ALGO=RING (\">=2GB\": 4e9 as the test)");
  } else if (id == "nccl_h100x8_nvls") {
    busbw_row("H100-SXM5-80GB", 8, AR, AUTO, 4294967296.0, ", auto (\">=2GB\": 4 GiB as the test)");
  } else if (id == "nccl_h200x8_allreduce") {
    busbw_row("H200-SXM-141GB", 8, AR, AUTO, 4294967296.0, ", auto");
  } else if (id == "nccl_h100_nvls_by_gpucount") {
    const Topology t(catalog_cluster("H100-SXM5-80GB", 1, 8));
    std::string pred, errs;
    double worst = 0, worst_signed = 0;
    for (int p = 5; p <= 8; ++p) {
      const Coll x = predict(t, AR, AUTO, p, 4e9);
      const double e =
          x.busbw / c["expected"]["value"][static_cast<std::size_t>(p - 5)].get<double>() - 1;
      pred += (p > 5 ? " / " : "") + fmt(x.busbw, 1);
      errs += (p > 5 ? " / " : "") + pct(e);
      if (p == 8) pred += " GB/s (" + x.algo + ")";
      if (std::abs(e) > worst) worst = std::abs(e), worst_signed = e;
    }
    r.predicted = pred;
    r.how = "5..8x H100-SXM5-80GB, all_reduce 4e9 B (\"2-4GB\": 4e9 as the test), auto";
    set_status(r, worst_signed);
    r.error = errs + " (worst counted)";
  } else if (id == "nccl_h100x8_58MB") {
    // SHARP disabled (NCCL_NVLS_ENABLE=0): the faster of ring and tree, as auto without NVLS,
    // plus the JAX measurement's per-call overhead (docs/accuracy.md, "nccl_h100x8_58MB"):
    // t = NCCL's collective + kJaxPerCallUs, fitted on this row (the collective's 345.9 us
    // against the measured 2(p-1)/p S / 150 GB/s = 685.1 us). Checked against the row's note
    // ("~370 only reached near 10 GB"): the same sum at 10 GB.
    constexpr double kJaxPerCallUs = 339.2;
    const Topology t(catalog_cluster("H100-SXM5-80GB", 1, 8));
    auto no_nvls = [&](double S) {
      const Coll ring = predict(t, AR, CollectiveAlgo::kRing, 8, S);
      const Coll tree = predict(t, AR, CollectiveAlgo::kTree, 8, S);
      return ring.t_us <= tree.t_us ? ring : tree;
    };
    const double S = 58720256.0;
    const Coll x = no_nvls(S);
    const double t_us = x.t_us + kJaxPerCallUs;
    const double bus = S / (t_us * 1e3) * busbw_factor(AR, 8);
    const Coll big = no_nvls(10e9);
    const double bus10 = 10e9 / ((big.t_us + kJaxPerCallUs) * 1e3) * busbw_factor(AR, 8);
    r.predicted = fmt(bus, 1) + " GB/s (" + x.algo + " " + fmt(x.t_us, 1) + " us + " +
                  fmt(kJaxPerCallUs, 1) + " us per call; 10 GB: " + fmt(bus10, 1) + " GB/s)";
    r.how =
        "8x H100-SXM5-80GB, all_reduce 58.7 MB, faster of forced ring / tree (NVLS off), "
        "plus JAX's per-call overhead";
    set_status(r, bus / pub - 1);
  } else if (id == "nccl_2x8h20_ib_latency" || id == "nccl_ndr_nic_peak") {
    // No H20 in the catalog: H100's NVLink4 (450 GB/s/dir, as H20) and its 8 x 50 GB/s NDR NICs.
    const Topology t(catalog_cluster("H100-SXM5-80GB", 2, 8));
    if (id == "nccl_ndr_nic_peak") {
      double cap = 0;
      for (LinkId l : t.route(Endpoint::gpu(0), Endpoint::gpu(8)))
        if (t.links()[static_cast<std::size_t>(l)].kind == LinkKind::kNic)
          cap = t.links()[static_cast<std::size_t>(l)].capacity_bytes_per_s;
      r.predicted = fmt(cap / 1e9, 1) + " GB/s";
      r.how = "2x8 H100-SXM5-80GB (8 NICs x 50 GB/s): capacity of the NIC link on GPU 0 -> GPU 8";
      set_status(r, cap / 1e9 / pub - 1);
    } else {
      // The case forced NCCL_ALGO=NVLSTree: ours forced too (docs/cost-model.md, "NVLSTree"; its
      // network hop factor is fitted on this case). Our tree/LL, on which the NIC alpha was
      // fitted, is quoted beside it.
      const Coll x = predict(t, AR, CollectiveAlgo::kNvlsTree, 16, 8);
      const Coll tree = predict(t, AR, CollectiveAlgo::kTree, 16, 8);
      r.predicted = fmt(x.t_us, 1) + " us (" + x.algo + "; tree/LL " + fmt(tree.t_us, 1) + " us)";
      r.how =
          "2x8 H100-SXM5-80GB as H20 (8 NICs x 50 GB/s), all_reduce 8 B, nvlstree forced "
          "(NCCL_ALGO=NVLSTree)";
      set_status(r, x.t_us / pub - 1);
    }
  } else if (id == "nccl_2x2080ti_nvlink") {
    // Not in the catalog: a 2-GPU NVLink "mesh" of 2 links x 25 GB/s (the bridge), PCIe 3.0.
    ClusterSpec cs = gpu_pair(IntraNodeKind::kNvlinkMesh, 3);
    cs.intra.nvlink_bytes_per_s_per_link = 25e9;
    cs.intra.nvlink_pairs = {{0, 1, 2}};
    const Coll two = predict(Topology(cs), AR, AUTO, 2, 67108864.0);
    cs.intra.nvlink_pairs = {{0, 1, 1}};
    const Coll one = predict(Topology(cs), AR, AUTO, 2, 67108864.0);
    r.predicted = fmt(two.busbw, 1) + " GB/s (" + two.algo + "); 1 link: " + fmt(one.busbw, 1);
    r.how = "ClusterSpec: 2 GPUs, NVLink bridge 2 links x 25 GB/s, all_reduce 64 MiB, auto";
    set_status(r, two.busbw / pub - 1);
  } else if (id == "nccl_2x4070tis_pcie_latency") {
    // GeForce: no P2P, so NCCL stages through host memory (docs/cost-model.md, "Host staging").
    ClusterSpec cs = gpu_pair(IntraNodeKind::kPcie, 4);
    cs.p2p = false;
    const Coll x = predict(Topology(cs), AR, AUTO, 2, 8);
    r.predicted = fmt(x.t_us, 2) + " us (" + x.algo + ")";
    r.how =
        "ClusterSpec: 2 GPUs on PCIe 4.0, p2p false (staged through host memory), all_reduce 8 B";
    set_status(r, x.t_us / pub - 1);
  } else {
    r.predicted = "—";
    r.status = "not reproduced: no setup for this case in bench_accuracy";
  }
}

// [SECTION] Simulated runs ------------------------------------------------------------------------

// Forward and backward (+ recompute) time of block `prefix` on GPU 0: the span on its compute
// stream from the first to the last op of that block in issue order (TP collectives in between
// are on the same stream, so they count).
std::pair<double, double> block_times_ms(const run::RunResult& run, const std::string& prefix) {
  const Program& p = run.program;
  auto span = [&](const std::function<bool(core::Phase)>& in_phase) {
    int first = -1, last = -1, stream = -1;
    for (const Op& op : p.ops) {
      if (op.gpu != 0 || p.name_of(op).rfind(prefix, 0) != 0 || !in_phase(op.phase)) continue;
      if (first < 0) first = op.id, stream = op.stream;
      last = op.id;
    }
    TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = 0;
    for (int i = first; i >= 0 && i <= last; ++i) {
      const Op& op = p.ops[static_cast<std::size_t>(i)];
      if (op.stream != stream || (op.kind != OpKind::kCompute && op.kind != OpKind::kCollective))
        continue;
      const OpTiming& t = run.result.timings[static_cast<std::size_t>(i)];
      lo = std::min(lo, t.start_ns);
      hi = std::max(hi, t.end_ns);
    }
    return static_cast<double>(hi - lo) * 1e-6;
  };
  return {span([](core::Phase ph) { return ph == core::Phase::kForward; }),
          span([](core::Phase ph) {
            return ph == core::Phase::kBackward || ph == core::Phase::kRecompute;
          })};
}

void layer_time(Row& r, const json& c) {
  const bool sp = r.id.find("sequence") != std::string::npos;
  const std::string rc = r.id.find("full_recompute") != std::string::npos ? "full"
                         : r.id.find("selective") != std::string::npos    ? "selective"
                                                                          : "none";
  const std::string strategy = std::string(R"({"kind": "tensor_parallel", "tp": 8, )") +
                               R"("sequence_parallel": )" + (sp ? "true" : "false") +
                               R"(, "recompute": ")" + rc + R"(", "tp_comm_overlap": true})";
  const std::string text =
      R"({"name": ")" + r.id +
      R"(", "cluster": {"nodes": 1, "gpus_per_node": 8, "gpu": "A100-SXM4-80GB"},
      "model": {"gpt": {"layers": 3, "hidden": 6144, "heads": 64, "seq_len": 2048, "vocab": 51200}},
      "training": {"global_batch": 4, "precision": "fp16", "optimizer": "adam", "steps": 1},
      "strategy": )" +
      strategy + "}";
  const run::RunResult run = run::simulate(parse_scenario_string(text, r.id));
  const auto [fwd, bwd] = block_times_ms(run, "h.1.");
  const json& also = c["expected"]["also"];
  r.published += " (fwd " + fmt(also["forward_ms"].get<double>(), 1) + " / bwd " +
                 fmt(also["backward_ms"].get<double>(), 1) + ")";
  r.predicted = fmt(fwd + bwd, 2) + " ms (fwd " + fmt(fwd, 2) + " / bwd " + fmt(bwd, 2) + ")";
  r.how =
      "run::simulate: gpt 3 layers h 6144, 64 heads, s 2048, V 51200, 8x A100-SXM4-80GB, "
      "tensor_parallel tp 8" +
      std::string(sp ? " + SP" : "") + ", recompute " + rc + ", tp_comm_overlap" +
      ", fp16, batch 4; span of block h.1 on GPU 0's compute stream, forward vs "
      "backward+recompute";
  set_status(r, (fwd + bwd) / c["expected"]["value"].get<double>() - 1);
  r.error += " (fwd " + pct(fwd / also["forward_ms"].get<double>() - 1) + ", bwd " +
             pct(bwd / also["backward_ms"].get<double>() - 1) + ")";
}

// A modern row (published-measurements-modern.json): the bundled scenario named after the case,
// in the published layout (docs/scenario.md, "Bundled scenarios"), simulated as simrun does;
// tokens/s per GPU from its summary.
void modern_throughput(Row& r, const json& c) {
  const std::string file = std::string(CSIM_SOURCE_DIR) + "/scenarios/" + r.id + ".json";
  if (!std::ifstream(file)) {
    const bool moe = c["model"].contains("experts");
    r.predicted = "—";
    r.how = "no scenarios/" + r.id + ".json";
    r.status = "not reproduced: " + std::string(moe ? "needs mixture-of-experts layers and "
                                                      "expert parallelism (not expressible yet)"
                                                    : "no bundled scenario for this case");
    return;
  }
  const run::RunResult run = run::simulate(parse_scenario_file(file));
  const prof::Summary s = prof::summarize(run.trace);
  const double exposed = s.gpus > 0 ? s.exposed_comm_s / s.gpus / s.step_time_s : 0;
  r.predicted = fmt(s.tokens_per_s_per_gpu, 0) + " tokens/s/GPU (step " + fmt(s.step_time_s, 2) +
                " s, " + fmt(100 * s.mfu, 1) + " % MFU)";
  r.how = "run::simulate of scenarios/" + r.id + ".json; summary tokens_per_s_per_gpu; exposed " +
          "communication " + fmt(100 * exposed, 1) + " % of the step" +
          (s.oom ? "; memory model: OOM by " +
                       fmt(static_cast<double>(s.oom->shortfall_bytes) / kGiB, 2) +
                       " GiB (time simulated regardless)"
                 : std::string());
  set_status(r, s.tokens_per_s_per_gpu / c["expected"]["value"].get<double>() - 1);
}

void training_throughput(Row& r, const json& c) {
  if (c["expected"]["metric"] == "tokens_per_sec_per_gpu") return modern_throughput(r, c);
  const json& m = c["model"];
  const std::string text = R"({"name": ")" + r.id +
                           R"(", "cluster": {"gpus_per_node": 1, "gpu": "V100-SXM2-32GB"},
      "model": {"gpt": {"layers": )" +
                           std::to_string(m["layers"].get<int>()) + R"(, "hidden": )" +
                           std::to_string(m["hidden"].get<int>()) + R"(, "heads": )" +
                           std::to_string(m["heads"].get<int>()) + R"(, "seq_len": )" +
                           std::to_string(m["seq_len"].get<int>()) + R"(, "vocab": )" +
                           std::to_string(m["vocab"].get<int>()) + R"(}},
      "training": {"global_batch": )" +
                           std::to_string(c["parallelism"]["batch"].get<int>()) +
                           R"(, "precision": "fp16", "optimizer": "adam", "steps": 3}})";
  const run::RunResult run = run::simulate(parse_scenario_string(text, r.id));
  const prof::Summary s = prof::summarize(run.trace);
  r.predicted = fmt(s.tflops_per_gpu, 1) + " TFLOP/s (" + fmt(100 * s.mfu, 1) + " % MFU)";
  r.published += " (" + fmt(c["expected"]["also"]["percent_of_peak"].get<double>(), 0) + " %)";
  r.how =
      "run::simulate: gpt 40L h 1536, 16 heads, s 1024, V 51200, single V100-SXM2-32GB, "
      "batch 8, fp16, adam, 3 steps; summary tflops_per_gpu (median step)" +
      (s.oom ? "; memory model: OOM by " +
                   fmt(static_cast<double>(s.oom->shortfall_bytes) / kGiB, 1) +
                   " GiB (no recompute for kind single; time simulated regardless)"
             : std::string());
  set_status(r, s.tflops_per_gpu / c["expected"]["value"].get<double>() - 1);
}

void host_overhead(Row& r, const json& c) {
  const HostSpec h;  // the defaults the simulator uses (docs/program.md, "Host costs")
  const double us = h.python_us_per_op + h.dispatch_us_per_op;
  const json& v = c["expected"]["value"];
  r.how = "HostSpec defaults: python_us_per_op " + fmt(h.python_us_per_op, 1) +
          " + dispatch_us_per_op " + fmt(h.dispatch_us_per_op, 1) + " per framework op";
  if (v.is_number()) {  // ops/s
    r.predicted = fmt(1e6 / us, 0) + " ops/s (" + fmt(us, 1) + " us/op)";
    set_status(r, 1e6 / us / v.get<double>() - 1);
  } else {
    r.published = "requires_grad " + fmt(v["requires_grad"].get<double>(), 1) + " / no_grad " +
                  fmt(v["no_grad"].get<double>(), 1) + " " +
                  c["expected"]["unit"].get<std::string>();
    r.predicted = fmt(us, 1) + " us/op";
    set_status(r, us / v["requires_grad"].get<double>() - 1);
    r.error += " vs requires_grad (" + pct(us / v["no_grad"].get<double>() - 1) + " vs no_grad)";
  }
}

std::string published_of(const json& c) {
  const json& v = c["expected"]["value"];
  const std::string unit = c["expected"]["unit"].get<std::string>();
  if (v.is_number()) return num(v.get<double>()) + " " + unit;
  if (v.is_array()) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? " / " : "") + fmt(v[i].get<double>(), 0);
    return s + " " + unit;
  }
  return unit;  // objects: the category handler writes it
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(CSIM_SOURCE_DIR) + "/calibration/published/published-measurements.json";
  std::string modern =
      std::string(CSIM_SOURCE_DIR) + "/calibration/published/published-measurements-modern.json";
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--cases") path = argv[i + 1];
    if (std::string(argv[i]) == "--modern") modern = argv[i + 1];
  }
  std::vector<json> cases;
  for (const std::string& p : {path, modern}) {
    std::ifstream in(p);
    if (!in) {
      std::cerr << "bench_accuracy: cannot read " << p << "\n";
      return 2;
    }
    const json doc = json::parse(in, nullptr, false);
    if (doc.is_discarded() || !doc.contains("cases") || !doc["cases"].is_array()) {
      std::cerr << "bench_accuracy: " << p << ": not JSON with a \"cases\" array\n";
      return 2;
    }
    for (const json& c : doc["cases"]) cases.push_back(c);
  }
  std::vector<Row> rows;
  for (const json& c : cases) {
    Row r;
    r.id = c["id"].get<std::string>();
    r.what = c.value("description", "");
    r.published = published_of(c);
    const std::string cat = c["category"].get<std::string>();
    try {
      if (cat == "collective")
        collective(r, c);
      else if (cat == "layer_time")
        layer_time(r, c);
      else if (cat == "training_throughput")
        training_throughput(r, c);
      else if (cat == "host_overhead")
        host_overhead(r, c);
      else
        r.status = "not reproduced: no predictor for category " + cat;
    } catch (const std::exception& e) {
      r.predicted = "—";
      r.abs_error = kNaN;
      r.status = std::string("not reproduced: ") + e.what();
    }
    if (r.predicted.empty()) r.predicted = "—";
    if (r.error.empty()) r.error = "—";
    rows.push_back(r);
  }

  std::cout << "| case | what | published | predicted | error | how predicted | status |\n"
               "| --- | --- | --- | --- | --- | --- | --- |\n";
  std::vector<double> all, ok;
  std::vector<std::string> off;
  for (const Row& r : rows) {
    std::cout << "| " << r.id << " | " << r.what << " | " << r.published << " | " << r.predicted
              << " | " << r.error << " | " << r.how << " | " << r.status << " |\n";
    if (std::isnan(r.abs_error)) {
      off.push_back(r.id + " (no prediction)");
      continue;
    }
    all.push_back(r.abs_error);
    if (r.abs_error <= kTolerance)
      ok.push_back(r.abs_error);
    else
      off.push_back(r.id + " (" + fmt(100 * r.abs_error, 1) + " %)");
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return kNaN;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  std::cout << "\nCases: " << rows.size() << "; predicted: " << all.size()
            << "; within 10 % (reproduced): " << ok.size() << ".\n"
            << "Median |error| over the reproduced cases: " << fmt(100 * median(ok), 1)
            << " %; over all predicted cases: " << fmt(100 * median(all), 1) << " %.\n"
            << "Outside 10 % or not predicted:";
  for (std::size_t i = 0; i < off.size(); ++i) std::cout << (i ? "; " : " ") << off[i];
  std::cout << (off.empty() ? " none.\n" : ".\n");
  return 0;
}
