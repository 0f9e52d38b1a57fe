// Simulated rows of the accuracy dashboard (docs/accuracy.md, "How each row is predicted"): each
// row runs the scenario written once from its published setup (calibration/scenarios/<id>.json,
// or the bundled scenarios/<id>.json of a modern row; assumptions in the scenario's description)
// through run::simulate and prof::summarize, as simrun does, and reads the published metric off
// the result.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/accuracy/accuracy.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"

namespace csim::accuracy {

using namespace csim::core;
using nlohmann::json;

namespace {

// Rows the scenario format cannot express yet, and why (none since expert parallelism, issue 34).
const std::map<std::string, std::string> kNotExpressible = {};

struct Simulated {
  std::string file;  // relative to the source tree, for the "how" column
  run::RunResult run;
  prof::Summary summary;
};

Simulated simulate_row(const std::string& id, const std::vector<std::string>& overrides = {}) {
  const std::string path = scenario_for(id);
  if (path.empty()) throw std::runtime_error("no calibration/scenarios/" + id + ".json");
  Simulated s;
  s.file = path.substr(std::string(CSIM_SOURCE_DIR).size() + 1);
  s.run = run::simulate(parse_scenario_file(path, overrides));
  s.summary = prof::summarize(s.run.trace);
  return s;
}

// "; exposed communication 3.1 % of the step; OOM by 1.2 GiB (time simulated regardless)"
std::string run_notes(const prof::Summary& s) {
  const double exposed =
      s.gpus > 0 && s.step_time_s > 0 ? s.exposed_comm_s / s.gpus / s.step_time_s : 0;
  std::string out = "; exposed communication " + fmt(100 * exposed, 1) + " % of the step";
  if (s.oom)
    out += "; memory model: OOM by " + fmt(static_cast<double>(s.oom->shortfall_bytes) / kGiB, 2) +
           " GiB (time simulated regardless)";
  return out;
}

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

// Korthikanti Table 4: block h.1 of a 3-layer model, forward vs backward + recompute.
void layer_time(Row& r, const json& c) {
  const Simulated s = simulate_row(r.id);
  const auto [fwd, bwd] = block_times_ms(s.run, "h.1.");
  const json& also = c["expected"]["also"];
  r.published += " (fwd " + fmt(also["forward_ms"].get<double>(), 1) + " / bwd " +
                 fmt(also["backward_ms"].get<double>(), 1) + ")";
  r.predicted = fmt(fwd + bwd, 2) + " ms (fwd " + fmt(fwd, 2) + " / bwd " + fmt(bwd, 2) + ")";
  r.how = "run::simulate of " + s.file +
          "; span of block h.1 on GPU 0's compute stream, forward vs backward+recompute";
  set_status(r, (fwd + bwd) / c["expected"]["value"].get<double>() - 1);
  r.error += " (fwd " + pct(fwd / also["forward_ms"].get<double>() - 1) + ", bwd " +
             pct(bwd / also["backward_ms"].get<double>() - 1) + ")";
}

// Megatron-LM (Narayanan et al. 2021, eq. 3): F = 96 B s l h^2 (1 + s/6h + V/16lh) FLOPs per
// iteration (activation recompute counted), TFLOP/s per GPU = F / (n t) (docs/accuracy.md).
double megatron21_flops(const json& c) {
  const json& m = c["model"];
  const double B = c["parallelism"]["global_batch"].get<double>();
  const double s = m["seq_len"].get<double>(), l = m["layers"].get<double>();
  const double h = m["hidden"].get<double>(), V = m["vocab"].get<double>();
  return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
}

void tflops_per_gpu(Row& r, const json& c) {
  const Simulated s = simulate_row(r.id);
  const std::string metric = c["expected"]["metric"].get<std::string>();
  double predicted = 0;
  std::string how;
  if (metric == "achieved_tflops_per_gpu") {
    const double n = c["hardware"]["gpus"].get<double>();
    predicted = megatron21_flops(c) / (n * s.summary.step_time_s) / 1e12;
    how = "; TFLOP/s = 96 B s l h^2 (1 + s/6h + V/16lh) / (n x step " +
          fmt(s.summary.step_time_s, 2) + " s)";
  } else {  // achieved_tflops: the summary's model TFLOP/s (docs/summary.md, "MFU and HFU")
    predicted = s.summary.tflops_per_gpu;
    how = "; summary tflops_per_gpu (median step)";
    if (c["expected"].contains("also") && c["expected"]["also"].contains("percent_of_peak"))
      r.published += " (" + fmt(c["expected"]["also"]["percent_of_peak"].get<double>(), 0) + " %)";
  }
  r.predicted = fmt(predicted, 1) + " TFLOP/s (step " + fmt(s.summary.step_time_s, 2) + " s, " +
                fmt(100 * s.summary.mfu, 1) + " % MFU)";
  r.how = "run::simulate of " + s.file + how + run_notes(s.summary);
  set_status(r, predicted / c["expected"]["value"].get<double>() - 1);
}

void tokens_per_gpu(Row& r, const json& c) {
  const Simulated s = simulate_row(r.id);
  r.predicted = fmt(s.summary.tokens_per_s_per_gpu, 0) + " tokens/s/GPU (step " +
                fmt(s.summary.step_time_s, 2) + " s, " + fmt(100 * s.summary.mfu, 1) + " % MFU)";
  r.how = "run::simulate of " + s.file + "; summary tokens_per_s_per_gpu" + run_notes(s.summary);
  set_status(r, s.summary.tokens_per_s_per_gpu / c["expected"]["value"].get<double>() - 1);
}

void iteration_time(Row& r, const json& c) {
  const Simulated s = simulate_row(r.id);
  r.predicted = fmt(s.summary.step_time_s, 2) + " s (" + fmt(100 * s.summary.mfu, 1) + " % MFU)";
  r.how = "run::simulate of " + s.file + "; summary step_time_s" + run_notes(s.summary);
  set_status(r, s.summary.step_time_s / c["expected"]["value"].get<double>() - 1);
}

// Hugging Face Trainer's train_runtime: steps x the steady step time.
void train_runtime(Row& r, const json& c) {
  const Simulated s = simulate_row(r.id);
  const double steps = c["parallelism"]["steps"].get<double>();
  const double t = steps * s.summary.step_time_s;
  r.predicted =
      fmt(t, 1) + " s (" + num(steps) + " x step " + fmt(s.summary.step_time_s, 3) + " s)";
  r.how = "run::simulate of " + s.file + "; " + num(steps) + " x summary step_time_s" +
          run_notes(s.summary);
  set_status(r, t / c["expected"]["value"].get<double>() - 1);
}

// Megatron 2019, Figure 5: weak-scaling efficiency = the run's model TFLOP/s per GPU over the
// 1.2B model's on one GPU (megatron19_1p2B_1gpu).
void weak_scaling(Row& r, const json& c) {
  const Simulated base = simulate_row("megatron19_1p2B_1gpu");
  const Simulated mp = simulate_row(r.id);
  const Simulated mpdp = simulate_row(r.id + "_dp64");
  const double e_mp = mp.summary.tflops_per_gpu / base.summary.tflops_per_gpu;
  const double e_mpdp = mpdp.summary.tflops_per_gpu / base.summary.tflops_per_gpu;
  const json& v = c["expected"]["value"];
  const double err_mp = 100 * e_mp / v["model_parallel"].get<double>() - 1;
  const double err_mpdp = 100 * e_mpdp / v["model_plus_data_parallel"].get<double>() - 1;
  r.published = "model parallel " + num(v["model_parallel"].get<double>()) +
                " % / + data parallel " + num(v["model_plus_data_parallel"].get<double>()) + " %";
  r.predicted = fmt(100 * e_mp, 1) + " % / " + fmt(100 * e_mpdp, 1) + " % (" +
                fmt(mp.summary.tflops_per_gpu, 1) + ", " + fmt(mpdp.summary.tflops_per_gpu, 1) +
                " vs " + fmt(base.summary.tflops_per_gpu, 1) + " TFLOP/s per GPU)";
  r.how = "run::simulate of " + mp.file + " and " + mpdp.file +
          "; summary tflops_per_gpu over that of calibration/scenarios/megatron19_1p2B_1gpu.json";
  set_status(r, std::abs(err_mp) >= std::abs(err_mpdp) ? err_mp : err_mpdp);
  r.error = pct(err_mp) + " / " + pct(err_mpdp) + " (worst counted)";
}

// GPU 0's model state (parameters + gradients + optimizer) and activations at its allocated peak
// (core::memory_timeline's at_peak, the summary's peak_by_category_bytes), as docs/memory.md's
// Korthikanti table reads them: the state that is resident while the activations peak, not the
// largest state at any time (inside step() Megatron's fp16 main-grad copy raises it briefly).
std::pair<double, double> gpu0_state_and_activations_gib(const run::RunResult& run) {
  const auto& b = run.memory.gpus.at(0).at_peak;
  const Bytes state = b[static_cast<int>(MemCategory::kParams)] +
                      b[static_cast<int>(MemCategory::kGrads)] +
                      b[static_cast<int>(MemCategory::kOptimizer)];
  const Bytes act = b[static_cast<int>(MemCategory::kActivations)];
  return {static_cast<double>(state) / kGiB, static_cast<double>(act) / kGiB};
}

// Korthikanti Figure 1: first pipeline stage (GPU 0), model state and activations, without
// recompute or sequence parallelism and with both. Two steps, so that Adam's state (allocated at
// the first step()) is resident at the second step's activation peak.
void memory_per_gpu(Row& r, const json& c) {
  const Simulated plain = simulate_row(r.id, {"training.steps=2"});
  const Simulated sp = simulate_row(r.id, {"training.steps=2", "strategy.recompute=\"selective\"",
                                           "strategy.sequence_parallel=true"});
  const double act = gpu0_state_and_activations_gib(plain.run).second;
  const auto [state, act_sp] = gpu0_state_and_activations_gib(sp.run);
  const json& v = c["expected"]["value"];
  const double pub_state = v["params_grads_optimizer"].get<double>();
  const double pub_act = v["activations_no_recompute_no_sp"].get<double>();
  const double pub_act_sp = v["activations_sp_selective"].get<double>();
  r.published = "state " + fmt(pub_state, 2) + " / activations " + fmt(pub_act, 2) + " / SP+sel " +
                fmt(pub_act_sp, 2) + " GiB";
  r.predicted = "state " + fmt(state, 2) + " / activations " + fmt(act, 2) + " / SP+sel " +
                fmt(act_sp, 2) + " GiB";
  const double errs[3] = {state / pub_state - 1, act / pub_act - 1, act_sp / pub_act_sp - 1};
  double worst = errs[0];
  for (double e : errs)
    if (std::abs(e) > std::abs(worst)) worst = e;
  r.how = "run::simulate of " + plain.file +
          " --set training.steps=2 (and with strategy.recompute=selective "
          "strategy.sequence_parallel=true); GPU 0's params + grads + optimizer bytes (SP run) and "
          "activation bytes at its allocated peak (core::memory_timeline at_peak)";
  set_status(r, worst);
  r.error = pct(errs[0]) + " / " + pct(errs[1]) + " / " + pct(errs[2]) + " (worst counted)";
}

}  // namespace

void predict_simulated(Row& r, const json& c) {
  const auto ne = kNotExpressible.find(r.id);
  if (ne != kNotExpressible.end()) return not_predicted(r, ne->second);
  const std::string metric = c["expected"]["metric"].get<std::string>();
  if (metric == "layer_fwd_bwd_time") return layer_time(r, c);
  if (metric == "achieved_tflops" || metric == "achieved_tflops_per_gpu")
    return tflops_per_gpu(r, c);
  if (metric == "tokens_per_sec_per_gpu") return tokens_per_gpu(r, c);
  if (metric == "iteration_time") return iteration_time(r, c);
  if (metric == "train_runtime") return train_runtime(r, c);
  if (metric == "memory_per_gpu") return memory_per_gpu(r, c);
  if (metric.rfind("weak_scaling_efficiency", 0) == 0) return weak_scaling(r, c);
  not_predicted(r, "no predictor for metric " + metric);
}

}  // namespace csim::accuracy
