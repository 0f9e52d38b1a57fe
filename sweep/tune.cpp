// docs/sweep.md, "Tune".
#include "sweep/tune.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.hpp"
#include "core/flops.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "run/scenario_loader.hpp"

namespace csim::sweep {
namespace {

using nlohmann::json;

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// The --set values that give the cluster `gpus` GPUs: whole nodes, or part of one node.
std::vector<std::string> gpu_sets(const core::ClusterSpec& c, int gpus, const std::string& name) {
  const int total = c.nodes * c.gpus_per_node;
  if (gpus == total) return {};
  if (gpus % c.gpus_per_node == 0)
    return {"cluster.nodes=" + std::to_string(gpus / c.gpus_per_node)};
  if (gpus < c.gpus_per_node)
    return {"cluster.nodes=1", "cluster.gpus_per_node=" + std::to_string(gpus)};
  throw InputError(name, "--gpus",
                   std::to_string(gpus) + " GPUs are neither whole nodes of " +
                       std::to_string(c.gpus_per_node) + " nor part of one node",
                   "give a multiple of cluster.gpus_per_node");
}

struct Layout {
  json strategy;
  std::string label;
};

std::vector<Layout> layouts(const core::Scenario& s, int gpus,
                            const std::vector<std::int64_t>& mbs_list) {
  std::vector<Layout> out;
  const core::TransformerShape& tf = s.model.transformer;
  const bool gpt = tf.layers > 0;
  const std::int64_t gb = s.training.global_batch;
  char buf[160];
  // Plain data parallelism through DDP: every bucket size, no accumulation.
  if (gb % gpus == 0)
    for (const double bucket : {5.0, 25.0, 100.0}) {
      std::snprintf(buf, sizeof buf, "ddp dp %d mbs %lld bucket %g MiB", gpus,
                    static_cast<long long>(gb / gpus), bucket);
      out.push_back({{{"kind", "ddp"}, {"ddp", {{"bucket_cap_mb", bucket}}}}, buf});
    }
  const std::vector<const char*> rcs = gpt ? std::vector<const char*>{"none", "selective", "full"}
                                           : std::vector<const char*>{"none"};
  for (const int tp : gpt ? divisors(gpus) : std::vector<int>{1}) {
    if (tp > s.cluster.gpus_per_node || (gpt && tf.heads % tp != 0)) continue;
    for (const int pp : gpt ? divisors(gpus / tp) : std::vector<int>{1}) {
      if (gpt && tf.layers % pp != 0) continue;
      const int dp = gpus / (tp * pp);
      for (const std::int64_t mbs : mbs_list) {
        if (gb % (static_cast<std::int64_t>(dp) * mbs) != 0) continue;
        const std::int64_t m = gb / (dp * mbs);
        std::vector<std::pair<std::string, int>> schedules{{"1f1b", 1}};
        if (pp > 1) {
          schedules.push_back({"gpipe", 1});
          if (tf.layers % (2 * pp) == 0 && m % pp == 0) schedules.push_back({"interleaved", 2});
        }
        std::vector<int> zeros{0};
        if (dp > 1) zeros = pp > 1 ? std::vector<int>{0, 1} : std::vector<int>{0, 1, 2, 3};
        for (const auto& [sched, v] : schedules)
          for (const int z : zeros)
            for (const char* rc : rcs) {
              if (!gpt && tp == 1 && pp == 1 && z == 0) continue;  // that is DDP, above
              json st = {{"kind", gpt ? "3d" : "zero"}, {"micro_batch_size", mbs}};
              if (gpt) {
                st["dp"] = dp;
                st["tp"] = tp;
                st["pp"] = pp;
                st["recompute"] = rc;
                if (pp > 1) st["schedule"] = sched;
                if (v > 1) st["virtual_stages"] = v;
              }
              st["zero_stage"] = z;
              std::snprintf(buf, sizeof buf, "dp %d tp %d pp %d mbs %lld%s%s zero %d rc %s", dp, tp,
                            pp, static_cast<long long>(mbs), pp > 1 ? " " : "",
                            pp > 1 ? sched.c_str() : "", z, rc);
              out.push_back({st, buf});
            }
      }
    }
  }
  return out;
}

// docs/sweep.md, "Tune": the two bounds.
void bound(TuneCandidate& c, const core::Scenario& v, int gpus) {
  const core::ParallelSpec& ps = v.strategy.parallel;
  const bool par = core::is_parallel_kind(v.strategy.kind);
  const int tp = par ? ps.tp : 1, pp = par ? ps.pp : 1, dp = par ? ps.dp : gpus;
  const int zero = par ? ps.zero_stage : 0;
  // Parameters per GPU: an even share, or with uneven pipeline stages the fullest stage's
  // (docs/scenario.md, "strategy: uneven pipeline stages").
  const std::int64_t p = par && !ps.segment_blocks.empty()
                             ? (core::max_stage_params(v.model, ps) + tp - 1) / tp
                             : (v.model.total_params() + tp * pp - 1) / (tp * pp);
  const core::ModelStateBytes st = core::model_state_bytes(p, v.training, zero, dp);
  c.model_states_gib = static_cast<double>(st.params + st.grads + st.optimizer) / kGiB;
  c.usable_gib = static_cast<double>(core::usable_memory_bytes(v.cluster, gpus > 1)) / kGiB;
  double eff = 0;
  for (const core::EfficiencyCurve& e : v.cluster.gpu.efficiency)
    eff = std::max(eff, e.max_efficiency);
  const double peak = v.cluster.gpu.peak_flops_per_s(
      core::precision_bytes(v.training.precision, v.training.amp_dtype).compute);
  const double m = par ? static_cast<double>(ps.micro_batches) : 1.0;
  const double vs = par ? ps.virtual_stages : 1;
  const double bubble = (m + (pp - 1) / vs) / m;
  c.lb_step_s =
      peak > 0 && eff > 0 ? core::hardware_flops_per_step(v) / (gpus * peak * eff) * bubble : 0;
}

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  return buf;
}

}  // namespace

const char* to_string(TuneVerdict v) {
  switch (v) {
    case TuneVerdict::kFits:
      return "fits";
    case TuneVerdict::kOom:
      return "OOM";
    case TuneVerdict::kInvalid:
      return "invalid";
    case TuneVerdict::kCannotFit:
      return "cannot fit";
    case TuneVerdict::kPruned:
      return "pruned";
    case TuneVerdict::kNotReached:
      return "not reached";
  }
  return "?";
}

std::vector<std::size_t> TuneResult::ranking() const {
  std::vector<std::size_t> r;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].verdict == TuneVerdict::kFits) r.push_back(i);
  std::stable_sort(r.begin(), r.end(), [&](std::size_t a, std::size_t b) {
    return candidates[a].result.step_time_s < candidates[b].result.step_time_s;
  });
  return r;
}

std::vector<std::size_t> TuneResult::rejected() const {
  std::vector<std::size_t> r;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].verdict != TuneVerdict::kFits &&
        candidates[i].verdict != TuneVerdict::kInvalid &&
        candidates[i].verdict != TuneVerdict::kNotReached)
      r.push_back(i);
  std::stable_sort(r.begin(), r.end(), [&](std::size_t a, std::size_t b) {
    return candidates[a].lb_step_s < candidates[b].lb_step_s;
  });
  return r;
}

TuneResult tune(const json& doc, const std::string& name, const std::vector<std::string>& base_sets,
                const TuneOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const core::Scenario base = run::load_scenario_document(doc, name, base_sets);
  const int total = base.cluster.nodes * base.cluster.gpus_per_node;
  const int gpus = o.gpus > 0 ? o.gpus : total;
  TuneResult res;
  res.gpu_sets = gpu_sets(base.cluster, gpus, name);
  std::vector<std::string> prefix = base_sets;
  prefix.insert(prefix.end(), res.gpu_sets.begin(), res.gpu_sets.end());

  // Enumerate, validate and bound (cheap: no lowering).
  for (Layout& l : layouts(base, gpus, o.micro_batch_sizes)) {
    TuneCandidate c;
    c.index = res.candidates.size();
    c.label = std::move(l.label);
    c.sets = prefix;
    c.sets.push_back("strategy=" + l.strategy.dump());
    try {
      const core::Scenario v = run::load_scenario_document(doc, name, c.sets);
      bound(c, v, gpus);
      if (c.model_states_gib > c.usable_gib) {
        c.verdict = TuneVerdict::kCannotFit;
        char buf[160];
        std::snprintf(buf, sizeof buf, "model states alone need %.1f GiB per GPU, %.1f GiB usable",
                      c.model_states_gib, c.usable_gib);
        c.reason = buf;
      }
    } catch (const InputError& e) {
      c.verdict = TuneVerdict::kInvalid;
      c.reason = e.message();
    }
    res.candidates.push_back(std::move(c));
  }

  // Simulate in order of the lower bound until it cannot beat the best.
  std::vector<std::size_t> order;
  for (const TuneCandidate& c : res.candidates)
    if (c.verdict == TuneVerdict::kNotReached) order.push_back(c.index);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return res.candidates[a].lb_step_s < res.candidates[b].lb_step_s;
  });
  double best = 0;
  const std::size_t width = static_cast<std::size_t>(std::max(1, o.threads));
  core::RunControl control;
  control.cancel = o.cancel;
  std::size_t next = 0;
  while (next < order.size()) {
    if (o.cancel && o.cancel->load()) {
      res.complete = false;
      break;
    }
    if (best > 0 && o.prune_margin * res.candidates[order[next]].lb_step_s >= best) {
      for (std::size_t k = next; k < order.size(); ++k) {
        TuneCandidate& c = res.candidates[order[k]];
        c.verdict = TuneVerdict::kPruned;
        c.reason = "cannot beat the best: compute bound " + ms(c.lb_step_s) + " vs " + ms(best);
      }
      break;
    }
    const std::size_t end = std::min(order.size(), next + width);
    std::vector<std::thread> pool;
    for (std::size_t k = next; k < end; ++k)
      pool.emplace_back([&, k] {
        TuneCandidate& c = res.candidates[order[k]];
        c.result = evaluate_variant(doc, name, c.sets, control, o.evaluation);
      });
    for (std::thread& t : pool) t.join();
    for (std::size_t k = next; k < end; ++k) {
      TuneCandidate& c = res.candidates[order[k]];
      switch (c.result.status) {
        case VariantStatus::kOk:
          c.verdict = TuneVerdict::kFits;
          ++res.simulated;
          if (best == 0 || c.result.step_time_s < best) best = c.result.step_time_s;
          break;
        case VariantStatus::kOom:
          c.verdict = TuneVerdict::kOom;
          c.reason = c.result.error;
          ++res.simulated;
          break;
        case VariantStatus::kInvalid:
          c.verdict = TuneVerdict::kInvalid;
          c.reason = c.result.error;
          break;
        case VariantStatus::kFailed:  // cancelled mid-simulation
          res.complete = false;
          break;
      }
    }
    next = end;
    if (o.on_progress) o.on_progress(res.simulated, order.size(), best);
  }
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace csim::sweep
