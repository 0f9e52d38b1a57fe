// Pipeline parallelism's keys (core/scenario/parse_parallel.hpp): the schedule and its model chunks
// per stage (the layer split over the chunks: parse_parallel_stages.cpp), the micro-batches every
// schedule runs (global_batch = dp * micro_batch_size * micro-batches), and model_parallel's
// split_at (the layer each device's part starts at).
#include <algorithm>

#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

void validate_pipeline_schedule(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  ps.schedule = static_cast<PipelineSchedule>(o.choice(
      "schedule", {"gpipe", "1f1b", "interleaved", "dualpipev"}, in.model_parallel() ? 0 : 1));
  const bool dualpipev = ps.schedule == PipelineSchedule::kDualPipeV;
  ps.virtual_stages = static_cast<int>(
      o.integer("virtual_stages",
                ps.schedule == PipelineSchedule::kInterleaved || dualpipev ? 2 : 1, 1, 1024));
  if (dualpipev) {
    // DualPipeV's V: two model chunks per rank (dualpipev.py's modules pair), virtual_stages
    // absent or 2 (pipeline_dualpipev.cpp).
    if (ps.virtual_stages != 2)
      ctx.fail_conflict(
          {o.at("virtual_stages"), o.at("schedule")},
          "dualpipev runs exactly 2 model chunks per stage (its V), virtual_stages is " +
              std::to_string(ps.virtual_stages),
          "remove strategy.virtual_stages (dualpipev implies 2), or use schedule "
          "interleaved");
    if (ps.pp < 2 || in.model_parallel())
      ctx.fail_conflict({o.at("schedule"), o.at(in.model_parallel() ? "kind" : "pp")},
                        "dualpipev needs a pipeline of strategy.pp >= 2 stages (kind pipeline, 3d, "
                        "...), pp is " +
                            std::to_string(ps.pp),
                        "set strategy.pp >= 2, or use schedule 1f1b");
    return;
  }
  if (ps.schedule == PipelineSchedule::kInterleaved && ps.virtual_stages < 2) {
    ctx.fail(o.at("virtual_stages"),
             "the interleaved schedule needs virtual_stages >= 2 model chunks per stage",
             "use schedule 1f1b for one chunk per stage");
  }
  if (ps.schedule != PipelineSchedule::kInterleaved && ps.virtual_stages != 1) {
    ctx.fail(o.at("virtual_stages"),
             std::string("virtual_stages > 1 needs schedule interleaved, schedule is ") +
                 to_string(ps.schedule),
             "set strategy.schedule to interleaved");
  }
  if (ps.schedule == PipelineSchedule::kInterleaved && ps.pp < 2) {
    ctx.fail(o.at("schedule"), "the interleaved schedule needs strategy.pp >= 2",
             "use schedule 1f1b");
  }
  // How the blocks split over the pp * virtual_stages chunks: validate_stage_split
  // (parse_parallel_stages.cpp).
}

void validate_micro_batches(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const TrainingSpec& t = in.training;
  const bool mp = in.model_parallel();
  const bool ga_given = in.gradient_accumulation_given;
  // Micro-batches: m = global_batch / (dp * micro_batch_size).
  const std::int64_t gb = t.global_batch;
  std::int64_t mbs = 0;
  if (o.has("micro_batch_size")) {
    mbs = o.integer("micro_batch_size", 1, 1, 1 << 24);
  } else if (ps.pp > 1 && !ga_given && !mp) {
    mbs = 1;
  } else {
    mbs = gb / (static_cast<std::int64_t>(ps.dp) * t.gradient_accumulation);
  }
  if (mbs < 1 || gb % (static_cast<std::int64_t>(ps.dp) * mbs) != 0) {
    std::vector<std::string> keys = {"training.global_batch", o.at("dp")};
    if (o.has("micro_batch_size")) keys.push_back(o.at("micro_batch_size"));
    std::string hint =
        "make training.global_batch a multiple of strategy.dp * strategy.micro_batch_size";
    if (!o.has("dp")) {
      // dp not given: the GPUs left by tp and pp (parse_parallel_grid.cpp), so the cluster's
      // size is one of the conflicting values (a --set cluster.nodes=N changes dp).
      keys.push_back("cluster.nodes");
      keys.push_back("cluster.gpus_per_node");
      hint = std::string("strategy.dp is not set, so it is the GPUs / (") +
             (ps.cp > 1 ? "tp * cp * pp" : "tp * pp") + ") = " + std::to_string(ps.dp) + "; " +
             hint + ", or set strategy.dp";
    }
    ctx.fail_conflict(keys,
                      std::to_string(gb) + " samples do not split into dp " +
                          std::to_string(ps.dp) + " x micro_batch_size " +
                          std::to_string(std::max<std::int64_t>(mbs, 1)) + " x micro-batches",
                      hint);
  }
  ps.micro_batch_size = mbs;
  ps.micro_batches = gb / (ps.dp * mbs);
  if (ga_given && o.has("micro_batch_size") && ps.micro_batches != t.gradient_accumulation) {
    ctx.fail_conflict({"training.gradient_accumulation", o.at("micro_batch_size"),
                       "training.global_batch", o.at("dp")},
                      "training.gradient_accumulation " + std::to_string(t.gradient_accumulation) +
                          " disagrees with " + std::to_string(ps.micro_batches) +
                          " micro-batches = global_batch / (dp * micro_batch_size)",
                      "give one of training.gradient_accumulation and strategy.micro_batch_size");
  }
  if (ps.schedule == PipelineSchedule::kInterleaved &&
      (ps.micro_batches < ps.pp || ps.micro_batches % ps.pp != 0)) {
    ctx.fail(
        o.has("micro_batch_size") ? o.at("micro_batch_size") : std::string("training.global_batch"),
        std::to_string(ps.micro_batches) +
            " micro-batches: the interleaved schedule needs a multiple of strategy.pp (" +
            std::to_string(ps.pp) + ")",
        "Megatron's interleaved 1F1B runs micro-batches in groups of pp");
  }
  if (ps.schedule == PipelineSchedule::kDualPipeV && ps.micro_batches < 2 * ps.pp) {
    // dualpipev.py's step(): assert num_chunks >= num_ranks * 2.
    std::vector<std::string> keys = {"training.global_batch", o.at("schedule"), o.at("pp")};
    if (o.has("micro_batch_size")) keys.push_back(o.at("micro_batch_size"));
    ctx.fail_conflict(keys,
                      std::to_string(ps.micro_batches) +
                          " micro-batches: dualpipev needs at least 2 * strategy.pp = " +
                          std::to_string(2 * ps.pp),
                      "raise training.global_batch or lower strategy.micro_batch_size or pp "
                      "(DualPipeV.step asserts num_chunks >= 2 * num_ranks)");
  }
  if (ps.pp > 1 && ps.micro_batches < ps.pp && !mp) {
    ctx.warn(o.at("pp"), std::to_string(ps.micro_batches) + " micro-batches over " +
                             std::to_string(ps.pp) + " stages: stages idle most of the step");
  }
}

void validate_model_split(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const ModelSpec& m = in.model;
  // Model parallel: where each device's part starts.
  if (!o.has("split_at")) return;
  if (!in.model_parallel())
    ctx.fail(o.at("split_at"), "split_at applies to strategy.kind model_parallel",
             "remove it, or use kind model_parallel");
  const json& arr = require_array(ctx, o.raw("split_at"), o.at("split_at"), false);
  if (static_cast<int>(arr.size()) != ps.pp - 1) {
    ctx.fail(o.at("split_at"),
             std::to_string(arr.size()) + " split points for " + std::to_string(ps.pp) + " devices",
             "give one layer name per device after the first (" + std::to_string(ps.pp - 1) + ")");
  }
  ps.stage_first_layer.push_back(0);
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string p = index_path(o.at("split_at"), i);
    if (!arr[i].is_string()) ctx.fail(p, "expected a layer name, got " + describe_value(arr[i]));
    const std::string name = arr[i].get<std::string>();
    int idx = -1;
    std::vector<std::string> names;
    for (std::size_t k = 0; k < m.layers.size(); ++k) {
      names.push_back(m.layers[k].name);
      if (m.layers[k].name == name) idx = static_cast<int>(k);
    }
    if (idx < 0) {
      const std::string near = nearest_candidate(name, names);
      ctx.fail(p, "no layer named '" + name + "'",
               near.empty() ? "use a layer name of the model" : "did you mean " + near + "?");
    }
    if (idx <= ps.stage_first_layer.back()) {
      ctx.fail(p, "'" + name + "' does not come after the previous split point",
               "list split points in forward order");
    }
    ps.stage_first_layer.push_back(idx);
  }
}

}  // namespace csim::core::parse
