// docs/sweep.md, "Tune".
#include "sweep/tune.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <thread>

#include "core/error.hpp"
#include "core/lowering/activation_offload.hpp"
#include "core/lowering/framework_states.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/model/attention_kernels.hpp"
#include "core/model/flops.hpp"
#include "core/model/fp8_recipe.hpp"
#include "run/scenario_loader.hpp"
#include "sweep/in_flight.hpp"

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

// Megatron's first/last stage split for `blocks` over pp stages that pp does not divide
// (docs/scenario.md, "strategy: uneven pipeline stages"): F = L blocks on the first and last stage,
// (blocks - 2F) / (pp - 2) on each other one, F chosen to make the fullest stage smallest (the
// smaller F on a tie: the first and last stages also hold the embedding and the LM head). pp 2:
// F = floor(blocks / 2), L = the rest. {0, 0} when no split exists.
std::pair<int, int> first_last_split(int blocks, int pp) {
  if (pp == 2) return {blocks / 2, blocks - blocks / 2};
  std::pair<int, int> best{0, 0};
  int best_max = 0;
  for (int f = 1; 2 * f < blocks; ++f) {
    const int rest = blocks - 2 * f;
    if (rest % (pp - 2) != 0) continue;
    const int mx = std::max(f, rest / (pp - 2));
    if (best_max == 0 || mx < best_max) {
      best = {f, f};
      best_max = mx;
    }
  }
  return best;
}

struct Sharding {
  json keys;  // strategy keys (kind included)
  std::string label;
};

// The sharding variants of one dp x tp x pp (docs/sweep.md, "Tune: the other knobs"), each only
// where the parser allows it: ZeRO 2/3 and Megatron-FSDP not with pp > 1, FSDP1 dp only.
std::vector<Sharding> shardings(const TuneSpace& sp, bool gpt, int dp, int tp, int pp,
                                int gpus_per_node) {
  std::vector<Sharding> out;
  const char* kind = gpt ? "3d" : "zero";
  for (const std::string& f : sp.sharding) {
    if (f == "zero") {
      std::vector<int> zeros{0};
      if (dp > 1) zeros = pp > 1 ? std::vector<int>{0, 1} : std::vector<int>{0, 1, 2, 3};
      for (const int z : zeros)
        out.push_back({{{"kind", kind}, {"zero_stage", z}}, "zero " + std::to_string(z)});
    } else if (f == "distopt" && dp > 1 && gpt) {
      out.push_back({{{"kind", "3d"}, {"distributed_optimizer", true}}, "distopt"});
    } else if (f == "megatron_fsdp" && dp > 1 && gpt && pp == 1) {
      out.push_back({{{"kind", "3d"}, {"distributed_optimizer", true}, {"megatron_fsdp", true}},
                     "megatron-fsdp"});
    } else if (f == "fsdp1" && dp > 1 && tp == 1 && pp == 1) {
      for (const char* sh : {"full_shard", "shard_grad_op"})
        out.push_back({{{"kind", "fsdp"}, {"fsdp_sharding", sh}}, std::string("fsdp1 ") + sh});
    } else if (f == "fsdp2" && dp > 1) {
      // HSDP: replicate across nodes, shard within one (torchtitan's dp_replicate x dp_shard),
      // when dp spans nodes: shard over the node's dp ranks (gpus_per_node / tp).
      std::vector<int> reps{1};
      const int in_node = std::max(1, gpus_per_node / tp);
      if (dp > in_node && dp % in_node == 0) reps.push_back(dp / in_node);
      std::vector<json> reshard{"default"};
      if (pp == 1) reshard.push_back(false);  // under pp the default already keeps them
      for (const int r : reps)
        for (const json& raf : reshard) {
          json k = {{"kind", "fsdp"}, {"fsdp_version", 2}, {"reshard_after_forward", raf}};
          std::string label = "fsdp2";
          if (raf == false) label += " keep-gathered";
          if (r > 1) {
            k["replicate"] = r;
            label += " hsdp " + std::to_string(r);
          }
          out.push_back({k, label});
        }
    }
  }
  // Megatron's optimizer offload (strategy.optimizer_offload) on Megatron's optimizer: kind 3d
  // with ZeRO 0 / 1 or the distributed optimizer, not Megatron-FSDP (the parser's rules).
  if (!sp.optimizer_offload.empty()) {
    std::vector<Sharding> with;
    for (const Sharding& sh : out) {
      const bool megatron = sh.keys.value("kind", "") == "3d" &&
                            !sh.keys.contains("megatron_fsdp") &&
                            sh.keys.value("zero_stage", 0) <= 1;
      if (!megatron) {
        with.push_back(sh);
        continue;
      }
      for (const double f : sp.optimizer_offload) {
        if (f <= 0) {
          with.push_back(sh);
          continue;
        }
        Sharding o = sh;
        o.keys["optimizer_offload"] = f;
        char buf[32];
        std::snprintf(buf, sizeof buf, " offload %g", f);
        o.label += buf;
        with.push_back(std::move(o));
      }
    }
    out = std::move(with);
  }
  return out;
}

// The expert-parallel sizes to try with tp x cp x dp = `folded` ranks (docs/sweep.md, "Tune: the
// other knobs"): space.ep (or 1 and every divisor of the experts) that divide the experts and
// `folded`; {1} for a dense model.
std::vector<int> expert_parallel_sizes(const core::Scenario& s, const TuneSpace& space,
                                       int folded) {
  const int experts = s.model.transformer_config.moe.experts;
  if (experts <= 0) return {1};
  std::vector<int> out;
  for (const int ep : space.ep.empty() ? divisors(experts) : space.ep)
    if (ep >= 1 && experts % ep == 0 && folded % ep == 0) out.push_back(ep);
  return out;
}

// The strategy.tp_comm_overlap values to try (docs/sweep.md, "Tune: the other knobs"): space's,
// where the overlap changes the Program (core/lowering/tp_comm_overlap.cpp, overlaps_wgrad: tp > 1
// and no sequence parallelism); elsewhere, or when none is asked for, {0}: the key left out.
std::vector<int> tp_overlaps(const TuneSpace& space, int tp, bool sequence_parallel) {
  if (space.tp_comm_overlap.empty() || tp <= 1 || sequence_parallel) return {0};
  std::vector<int> out;
  for (const int v : space.tp_comm_overlap)
    if (std::find(out.begin(), out.end(), v != 0 ? 1 : 0) == out.end()) out.push_back(v != 0);
  return out;
}

// The strategy.activation_offload block counts to try (docs/sweep.md, "Tune: the other knobs"):
// space's, where the parser accepts them (parse_parallel_act_offload.cpp: pp 1, no recompute, K
// below the blocks); elsewhere, or when none is asked for, {0}: the key left out.
std::vector<int> act_offloads(const TuneSpace& space, int pp, const std::string& rc, int blocks) {
  std::vector<int> out{0};
  if (pp != 1 || rc != "none") return out;
  for (const int k : space.activation_offload)
    if (k > 0 && k < blocks && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  return out;
}

std::vector<Layout> layouts(const core::Scenario& s, int gpus,
                            const std::vector<std::int64_t>& mbs_list, const TuneSpace& space) {
  std::vector<Layout> out;
  const core::TransformerShape& tf = s.model.transformer;
  const bool gpt = tf.layers > 0;
  const bool moe = s.model.transformer_config.moe.any();
  const std::int64_t gb = s.training.global_batch;
  char buf[160];
  // Plain data parallelism through DDP: every bucket size, no accumulation.
  if (gb % gpus == 0)
    for (const double bucket : {5.0, 25.0, 100.0}) {
      std::snprintf(buf, sizeof buf, "ddp dp %d mbs %lld bucket %g MiB", gpus,
                    static_cast<long long>(gb / gpus), bucket);
      out.push_back({{{"kind", "ddp"}, {"ddp", {{"bucket_cap_mb", bucket}}}}, buf});
    }
  // Recompute policies: name, mode, every (full:K).
  std::vector<std::pair<std::string, int>> rcs;
  for (const std::string& r : gpt ? space.recompute : std::vector<std::string>{"none"}) {
    const std::size_t colon = r.find(':');
    if (colon == std::string::npos) {
      rcs.push_back({r, 1});
      continue;
    }
    const int k = std::stoi(r.substr(colon + 1));
    if (k <= tf.layers) rcs.push_back({r.substr(0, colon), k});
  }
  const std::vector<std::string> orders =
      space.rank_orders.empty() ? std::vector<std::string>{""} : space.rank_orders;
  // Context parallelism (docs/sweep.md, "Tune: the other knobs"): each cp dividing the GPUs and
  // the sequence into 2 cp chunks, with each K/V exchange asked for ("a2a+p2p:A": cp_a2a A).
  std::vector<std::pair<int, std::string>> cps;
  for (const int cp : gpt ? space.cp : std::vector<int>{1}) {
    if (cp < 1 || gpus % cp != 0 || (cp > 1 && tf.seq_len % (2 * cp) != 0)) continue;
    if (cp == 1) {
      cps.push_back({1, ""});
      continue;
    }
    for (const std::string& comm : space.cp_comm) cps.push_back({cp, comm});
  }
  for (const auto& [cp, cp_comm] : cps)
    for (const int tp : gpt ? divisors(gpus / cp) : std::vector<int>{1}) {
      if (tp > s.cluster.gpus_per_node || (gpt && tf.heads % tp != 0)) continue;
      for (const int pp : gpt ? divisors(gpus / (tp * cp)) : std::vector<int>{1}) {
        std::pair<int, int> split{0, 0};
        if (gpt && tf.layers % pp != 0) {
          if (!space.uneven_stages || pp > tf.layers) continue;
          split = first_last_split(tf.layers, pp);
          if (split.first == 0) continue;
        }
        const int dp = gpus / (tp * pp * cp);
        // Sharding spans dp x cp; DeepSpeed ZeRO-3 and FSDP1 take no cp (the parser refuses them).
        std::vector<Sharding> shs = shardings(space, gpt, dp * cp, tp, pp, s.cluster.gpus_per_node);
        if (cp > 1) {
          shs.erase(std::remove_if(shs.begin(), shs.end(),
                                   [](const Sharding& sh) {
                                     return sh.keys.value("zero_stage", 0) == 3 ||
                                            (sh.keys.value("kind", "") == "fsdp" &&
                                             sh.keys.value("fsdp_version", 1) == 1);
                                   }),
                    shs.end());
        }
        const int dims_over_1 = (dp > 1) + (tp > 1) + (pp > 1) + (cp > 1);
        const std::vector<int> eps = expert_parallel_sizes(s, space, tp * cp * dp);
        for (const std::int64_t mbs : mbs_list) {
          if (gb % (static_cast<std::int64_t>(dp) * mbs) != 0) continue;
          const std::int64_t m = gb / (dp * mbs);
          std::vector<std::pair<std::string, int>> schedules{{"1f1b", 1}};
          if (pp > 1) {
            schedules.push_back({"gpipe", 1});
            if (split.first == 0 && tf.layers % (2 * pp) == 0 && m % pp == 0)
              schedules.push_back({"interleaved", 2});
          }
          for (const auto& [sched, v] : schedules)
            for (const Sharding& sh : shs)
              for (const auto& [rc, every] : rcs)
                for (const int ep : eps)
                  for (const int sq : (space.sequence_parallel || moe) && tp > 1
                                          ? std::vector<int>{0, 1}
                                          : std::vector<int>{0})
                    for (const std::string& order : orders) {
                      // A rank order only matters with two dimensions over 1; the default once.
                      if (!order.empty() && order != orders.front() && dims_over_1 < 2) continue;
                      // The parser's expert-parallel rules (docs/program.md, "Expert parallel"):
                      // ep under 3d / zero up to stage 2 and FSDP2 without HSDP (no FSDP1, no
                      // Megatron-FSDP, no ZeRO-3); tp > 1 with experts only with sequence
                      // parallelism and ep > 1.
                      const bool fsdp1 = sh.keys.value("kind", "") == "fsdp" &&
                                         sh.keys.value("fsdp_version", 1) == 1;
                      if (ep > 1 && (fsdp1 || sh.keys.value("zero_stage", 0) > 2 ||
                                     sh.keys.value("replicate", 1) > 1 ||
                                     sh.keys.value("megatron_fsdp", false)))
                        continue;
                      if (moe && tp > 1 && (!sq || ep == 1)) continue;
                      const bool zero0 = sh.keys.value("zero_stage", -1) == 0;
                      if (!gpt && tp == 1 && pp == 1 && zero0) continue;  // that is DDP, above
                      json st = sh.keys;
                      st["micro_batch_size"] = mbs;
                      std::string label;
                      if (gpt) {
                        st["dp"] = dp;
                        st["tp"] = tp;
                        st["pp"] = pp;
                        st["recompute"] = rc;
                        if (every > 1) st["recompute_every"] = every;
                        if (pp > 1) st["schedule"] = sched;
                        if (v > 1) st["virtual_stages"] = v;
                        if (sq) st["sequence_parallel"] = true;
                        if (!order.empty()) {
                          // With cp > 1 an order that leaves cp out gets it after tp (Megatron's),
                          // with ep > 1 one that leaves ep out gets it before dp.
                          std::string o = order;
                          if (cp > 1 && o.find("cp") == std::string::npos)
                            o.replace(o.find("tp"), 2, "tp-cp");
                          if (ep > 1 && o.find("ep") == std::string::npos)
                            o.replace(o.find("dp"), 2, "ep-dp");
                          st["rank_order"] = o;
                        }
                        if (ep > 1) st["ep"] = ep;
                        if (cp > 1) {
                          st["cp"] = cp;
                          const std::size_t colon = cp_comm.find(':');
                          st["cp_comm"] = cp_comm.substr(0, colon);
                          if (colon != std::string::npos)
                            st["cp_a2a"] = std::stoi(cp_comm.substr(colon + 1));
                        }
                        if (split.first > 0) {
                          st["first_stage_layers"] = split.first;
                          st["last_stage_layers"] = split.second;
                        }
                      }
                      std::snprintf(buf, sizeof buf, "dp %d tp %d pp %d mbs %lld%s%s %s rc %s", dp,
                                    tp, pp, static_cast<long long>(mbs), pp > 1 ? " " : "",
                                    pp > 1 ? sched.c_str() : "", sh.label.c_str(), rc.c_str());
                      label = buf;
                      if (every > 1) label += "/" + std::to_string(every);
                      if (sq) label += " sp";
                      if (cp > 1) label += " cp " + std::to_string(cp) + " " + cp_comm;
                      if (ep > 1) label += " ep " + std::to_string(ep);
                      if (!order.empty() && order != "tp-dp-pp") label += " " + order;
                      if (split.first > 0)
                        label += " split " + std::to_string(split.first) + "/" +
                                 std::to_string(split.second);
                      // The dispatchers tried where ep > 1 (the scenario's when none is given).
                      const std::vector<std::string> dispatchers =
                          ep > 1 && !space.moe_dispatchers.empty() ? space.moe_dispatchers
                                                                   : std::vector<std::string>{""};
                      for (const std::string& d : dispatchers)
                        for (const int tpo : tp_overlaps(space, tp, sq != 0))
                          for (const int ao : act_offloads(space, pp, rc, tf.layers)) {
                            json with = st;
                            if (!d.empty()) with["moe_dispatcher"] = d;
                            if (tpo) with["tp_comm_overlap"] = true;
                            if (ao > 0) with["activation_offload"] = ao;
                            out.push_back({with, (d.empty() ? label : label + " " + d) +
                                                     (tpo ? " tpo" : "") +
                                                     (ao > 0 ? " ao " + std::to_string(ao) : "")});
                          }
                    }
        }
      }
    }
  return out;
}

// The model and training knobs (attention kernel, precision, compile): one --set list and label
// suffix per combination, the scenario's own values when a knob is not searched.
struct ModelVariant {
  std::vector<std::string> sets;
  json knobs = json::object();
  std::string label;
};

// The scenario's model object as the base overrides leave it: the last whole "model={...}"
// override (simrun tune --hf-config's, run/scenario_loader.hpp) replaces the file's.
json effective_model(const json& doc, const std::vector<std::string>& base_sets) {
  json model = doc.contains("model") ? doc["model"] : json::object();
  for (const std::string& set : base_sets) {
    if (set.rfind("model=", 0) != 0) continue;
    const json v = json::parse(set.substr(6), nullptr, false);
    if (v.is_object()) model = v;
  }
  return model;
}

std::vector<ModelVariant> model_variants(const json& doc, const std::vector<std::string>& base_sets,
                                         const core::Scenario& s, const std::string& name,
                                         const TuneSpace& sp) {
  std::vector<ModelVariant> out{ModelVariant{}};
  auto extend =
      [&out](const std::vector<std::pair<std::vector<std::pair<std::string, json>>, std::string>>&
                 values) {
        std::vector<ModelVariant> next;
        for (const ModelVariant& mv : out)
          for (const auto& [kv, label] : values) {
            ModelVariant n = mv;
            for (const auto& [k, v] : kv) {
              n.sets.push_back(k + "=" + v.dump());
              n.knobs[k] = v;
            }
            n.label += " " + label;
            next.push_back(std::move(n));
          }
        out = std::move(next);
      };
  if (!sp.attention.empty()) {
    const json model = effective_model(doc, base_sets);
    std::string key;
    if (model.is_object() && model.contains("transformer"))
      key = "model.transformer.attention.kernel";
    else if (model.is_object() && model.contains("hf_config"))
      key = "model.attention.kernel";
    else
      throw InputError(name, "--attention",
                       "the attention kernel is a key of model.transformer and model.hf_config; "
                       "this scenario's model has neither",
                       "leave --attention out");
    std::vector<std::string> kernels = sp.attention;
    if (kernels.size() == 1 && kernels[0] == "all") {
      kernels.clear();
      for (const core::AttentionKernel k :
           {core::AttentionKernel::kEager, core::AttentionKernel::kFlash2,
            core::AttentionKernel::kFlash3, core::AttentionKernel::kCudnn})
        if (core::attention_kernel_unsupported(k, s.cluster.gpu).empty())
          kernels.push_back(core::to_string(k));
    }
    std::vector<std::pair<std::vector<std::pair<std::string, json>>, std::string>> vals;
    for (const std::string& k : kernels) vals.push_back({{{key, k}}, "attn " + k});
    extend(vals);
  }
  if (!sp.precisions.empty()) {
    std::vector<std::pair<std::vector<std::pair<std::string, json>>, std::string>> vals;
    for (const std::string& p : sp.precisions) {
      const std::size_t colon = p.find(':');
      const std::string prec = p.substr(0, colon);
      std::vector<std::pair<std::string, json>> kv{{"training.precision", prec}};
      if (colon != std::string::npos) kv.push_back({"training.fp8.recipe", p.substr(colon + 1)});
      vals.push_back({kv, p});
    }
    extend(vals);
  }
  if (!sp.compile.empty()) {
    std::vector<std::pair<std::vector<std::pair<std::string, json>>, std::string>> vals;
    for (const int c : sp.compile)
      vals.push_back({{{"training.compile", c != 0}}, c ? "compile" : "eager-mode"});
    extend(vals);
  }
  return out;
}

}  // namespace

// docs/sweep.md, "Tune", "Bounds": the memory bound.
MemoryBound memory_bound(const core::Scenario& v, int gpus) {
  const core::ParallelSpec& ps = v.strategy.parallel;
  const bool par = core::is_parallel_kind(v.strategy.kind);
  const int tp = par ? ps.tp : 1, pp = par ? ps.pp : 1, dp = par ? ps.dp : gpus;
  const core::ShardingPlan sh = core::sharding_plan(ps, v.strategy.kind);
  const int zero = par ? sh.state_stage : 0;
  // What the lowering allocates (core/lowering/framework_states.hpp), one fact in one place.
  auto states = [&](std::int64_t p) {
    if (par) return core::rank_model_states(v, sh, p);
    return core::model_state_bytes(p, v.training, zero, dp);
  };
  MemoryBound out;
  auto take = [&out](const core::ModelStateBytes& b, double fp8, double acts, double logits,
                     int stage) {
    const double w_g = static_cast<double>(b.params + b.grads) + fp8;
    const double opt = static_cast<double>(b.optimizer);
    // Beside the activations: the whole optimizer state. From step 2 on it is resident; in a
    // one-step run the steady-state projection that the peak and the OOM verdict read lifts
    // each point of step 1 by what the optimizer category lacks of its end-of-step K
    // (docs/memory.md, "First-step and steady-state peaks"; core/program/memory_timeline.cpp).
    // Inside step() also a copy of the gradients where the framework makes one (Megatron fp16).
    const double alone = w_g + opt + static_cast<double>(b.step_main_grads);
    const double need = std::max(alone, w_g + acts + logits + opt);
    out.without_activations = std::max(out.without_activations, alone);
    if (need <= out.bytes) return;
    out.states = static_cast<double>(b.params + b.grads + b.optimizer);
    out.fp8_copies = fp8;
    out.activations = acts;
    out.logits = logits;
    out.bytes = need;
    out.stage = stage;
  };
  if (!par || v.model.transformer.layers == 0) {
    const std::int64_t p = (v.model.total_params() + tp * pp - 1) / (tp * pp);
    take(states(p), 0, 0, 0, 0);
    return out;
  }
  const int segs = pp * ps.virtual_stages;
  const std::vector<core::Segment> seg = core::partition_layers(v.model, segs, ps.segment_blocks);
  // Per stage: the dense parameters, and the routed experts' E / ep share (sharded over edp, as
  // Emitter::model_states counts them; docs/memory.md, "Expert parallel").
  std::vector<std::int64_t> params(static_cast<std::size_t>(pp), 0), fp8(params), experts(params);
  for (int g = 0; g < segs; ++g)
    for (int i = seg[static_cast<std::size_t>(g)].first; i < seg[static_cast<std::size_t>(g)].end;
         ++i) {
      const core::LayerSpec& l = v.model.layers[static_cast<std::size_t>(i)];
      core::ShardedLayer sl = core::shard_layer(v.model, i, tp, ps.sequence_parallel);
      core::shard_experts(sl, l, ps);
      const std::int64_t n = sl.params;
      // The stage holding segment g (chunk-major, or DualPipeV's V).
      const auto st = static_cast<std::size_t>(core::pipeline_stage_of_segment(ps, g));
      if (ps.ep > 1 && l.expert_role != core::ExpertRole::kNone)
        experts[st] += n;
      else
        params[st] += n;
      if (core::runs_in_fp8(l, v.training)) fp8[st] += n;
    }
  auto stage_states = [&](int st) {
    const std::int64_t e = experts[static_cast<std::size_t>(st)];
    const core::ModelStateBytes dense = states(params[static_cast<std::size_t>(st)]);
    if (e == 0) return dense;
    return dense + core::rank_model_states(v, sh, e, ps.size(core::ParallelDim::kEdp));
  };
  // A: the saved activations the stage holds at one moment of its backward phase (in_flight.hpp):
  // n_c passes of each chunk c, each the block the lowering allocates for its segment,
  // round(rank_stored_activation_bytes_per_sample x b) (core/lowering/pipeline.cpp). Model
  // parallelism has no pipeline schedule: one micro-batch of the stage's first segment.
  const bool scheduled = v.strategy.kind != core::StrategyKind::kModelParallel;
  auto pass_bytes = [&](int g) {
    return static_cast<double>(std::llround(core::rank_stored_activation_bytes_per_sample(
                                                v.model, seg[static_cast<std::size_t>(g)], ps) *
                                            static_cast<double>(ps.micro_batch_size)));
  };
  // L: the logits of each forward pass of the last segment, allocated when the pass's forward
  // ends and freed when its backward ends (pipeline.cpp, end_segment: "logits", the last layer's
  // output as the lowering shards it: tp, cp), so held with the n_c passes of that segment's chunk
  // on its stage; the passes counted are whole ones (in_flight.hpp), their logits allocated.
  const int last_seg = segs - 1;
  const std::size_t last_layer = v.model.layers.size() - 1;
  core::ShardedLayer out_layer =
      core::shard_layer(v.model, static_cast<int>(last_layer), tp, ps.sequence_parallel);
  core::shard_context(out_layer, v.model.layers[last_layer], ps);
  core::shard_experts(out_layer, v.model.layers[last_layer], ps);
  const double logits_bytes = static_cast<double>(
      std::llround(out_layer.output_bytes_per_sample * static_cast<double>(ps.micro_batch_size)));
  for (int st = 0; st < pp; ++st) {
    const double copies = v.training.precision == core::Precision::kFp8
                              ? static_cast<double>(core::fp8_weight_copy_bytes(
                                    fp8[static_cast<std::size_t>(st)], v.training.fp8))
                              : 0.0;
    double acts = 0, logits = 0;
    if (scheduled) {
      const std::vector<int> held = held_chunk_passes(ps.schedule, pp, ps.virtual_stages,
                                                      static_cast<int>(ps.micro_batches), st);
      for (int c = 0; c < ps.virtual_stages; ++c)
        if (held[static_cast<std::size_t>(c)] > 0)
          acts += held[static_cast<std::size_t>(c)] * pass_bytes(core::pipeline_segment(ps, c, st));
      if (core::pipeline_stage_of_segment(ps, last_seg) == st)
        logits = held[static_cast<std::size_t>(core::pipeline_chunk_of_segment(ps, last_seg))] *
                 logits_bytes;
    } else {
      acts = pass_bytes(st);
    }
    // strategy.activation_offload (pp 1, so one pass held): the offloaded blocks' are off the GPU
    // at the end of the forward (docs/sweep.md, "Bounds"); what stays is held until the backward.
    acts -= core::offloaded_activation_bytes_per_sample(v.model, ps,
                                                        seg[static_cast<std::size_t>(st)]) *
            static_cast<double>(ps.micro_batch_size);
    take(stage_states(st), copies, acts, logits, st);
  }
  return out;
}

namespace {

// docs/sweep.md, "Tune": the two bounds.
void bound(TuneCandidate& c, const core::Scenario& v, int gpus) {
  const core::ParallelSpec& ps = v.strategy.parallel;
  const bool par = core::is_parallel_kind(v.strategy.kind);
  const int pp = par ? ps.pp : 1;
  const MemoryBound mb = memory_bound(v, gpus);
  c.model_states_gib = mb.bytes / kGiB;
  c.states_alone_gib = mb.without_activations / kGiB;
  c.usable_gib = static_cast<double>(core::usable_memory_bytes(v.cluster, gpus > 1)) / kGiB;
  // The compute bound: the fastest any FLOP can run, over the GPU's curves for the compute dtype,
  // the FP8 GEMM curve at the FP8 peak (precision fp8) and the fused attention kernels' own
  // efficiencies (docs/attention.md, "Efficiency").
  const core::GpuSpec& gpu = v.cluster.gpu;
  const double peak = gpu.peak_flops_per_s(
      core::precision_bytes(v.training.precision, v.training.amp_dtype).compute);
  double eff = 0;
  for (const core::EfficiencyCurve& e : gpu.efficiency) eff = std::max(eff, e.max_efficiency);
  for (const core::LayerSpec& l : v.model.layers)
    if (l.fused_attention.kernel != core::AttentionKernel::kEager)
      eff = std::max({eff, core::fused_attention_max_efficiency(gpu, l.fused_attention, false),
                      core::fused_attention_max_efficiency(gpu, l.fused_attention, true)});
  double rate = peak * eff;
  if (v.training.precision == core::Precision::kFp8)
    rate = std::max(rate, gpu.peak_fp8_flops_per_s * gpu.fp8_gemm_efficiency.max_efficiency);
  const double m = par ? static_cast<double>(ps.micro_batches) : 1.0;
  const double vs = par ? ps.virtual_stages : 1;
  const double bubble = (m + (pp - 1) / vs) / m;
  // Full recompute of every k-th block: core::hardware_flops_per_step counts every block of a
  // model.transformer, so the bound takes the model FLOPs there (a lower count, still a bound).
  const double flops = par && ps.recompute_every > 1 ? core::model_flops_per_step(v)
                                                     : core::hardware_flops_per_step(v);
  c.lb_step_s = rate > 0 ? flops / (gpus * rate) * bubble : 0;
}

// A candidate's strategy as the parser reads it, for finding duplicates (docs/sweep.md, "Tune",
// "Duplicates"): under kind 3d, distributed_optimizer true without megatron_fsdp is zero_stage 1
// (core/scenario/parse_parallel_fsdp2.cpp sets ps.zero_stage = 1; the lowering reads the flag only
// for kind zero, core/lowering/framework_states.cpp and optimizer_memory.cpp), so
// --sharding zero,distopt would otherwise simulate every Megatron layout twice.
// Tune's duplicates (docs/sweep.md, "Duplicates"): the candidates already bounded, by their
// model knobs and grid; within a bucket the parsed strategies are compared field by field, as
// the lowering reads them (core::strategy_as_lowered).
struct Twin {
  core::StrategySpec strategy;
  std::size_t index;
};
std::string twin_bucket(const json& model_knobs, const core::StrategySpec& st) {
  const core::ParallelSpec& p = st.parallel;
  return model_knobs.dump() + '|' + std::to_string(static_cast<int>(st.kind)) + ' ' +
         std::to_string(p.dp) + ' ' + std::to_string(p.tp) + ' ' + std::to_string(p.pp) + ' ' +
         std::to_string(p.cp) + ' ' + std::to_string(p.ep) + ' ' +
         std::to_string(p.micro_batch_size) + ' ' + std::to_string(p.zero_stage);
}
const Twin* find_twin(const std::vector<Twin>& bucket, const core::StrategySpec& st) {
  for (const Twin& t : bucket)
    if (t.strategy == st) return &t;
  return nullptr;
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
    case TuneVerdict::kDuplicate:
      return "duplicate";
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
        candidates[i].verdict != TuneVerdict::kNotReached &&
        candidates[i].verdict != TuneVerdict::kDuplicate)
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
  const std::vector<Layout> ls = layouts(base, gpus, o.micro_batch_sizes, o.space);
  std::map<std::string, std::vector<Twin>> seen;  // twin_bucket -> the strategies bounded
  for (const ModelVariant& mv : model_variants(doc, base_sets, base, name, o.space))
    for (const Layout& l : ls) {
      TuneCandidate c;
      c.index = res.candidates.size();
      c.label = l.label + mv.label;
      c.sets = prefix;
      c.sets.insert(c.sets.end(), mv.sets.begin(), mv.sets.end());
      c.sets.push_back("strategy=" + l.strategy.dump());
      c.knobs = mv.knobs;
      c.knobs["strategy"] = l.strategy;
      try {
        const core::Scenario v = run::load_scenario_document(doc, name, c.sets);
        core::StrategySpec lowered = core::strategy_as_lowered(v);
        std::vector<Twin>& bucket = seen[twin_bucket(mv.knobs, lowered)];
        if (const Twin* twin = find_twin(bucket, lowered)) {
          c.verdict = TuneVerdict::kDuplicate;
          c.reason = "the same strategy as " + res.candidates[twin->index].label +
                     " once parsed (core::strategy_as_lowered)";
          res.candidates.push_back(std::move(c));
          continue;
        }
        bucket.push_back({std::move(lowered), c.index});
        bound(c, v, gpus);
        if (c.model_states_gib > c.usable_gib) {
          c.verdict = TuneVerdict::kCannotFit;
          char buf[160];
          std::snprintf(buf, sizeof buf,
                        "model states (+ activations) need %.1f GiB per GPU, %.1f GiB usable",
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
        // An OOM layout is reported by its verdict alone (docs/block-eval.md, "A verdict alone").
        c.result = evaluate_variant(doc, name, c.sets, control,
                                    o.evaluation == run::Evaluation::kBlock
                                        ? run::Evaluation::kBlockVerdict
                                        : o.evaluation);
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
