// Pipeline stage split's keys (core/scenario/parse_parallel.hpp; docs/scenario.md, "strategy:
// uneven pipeline stages"): stage_layers, first_stage_layers / last_stage_layers,
// account_for_embedding / account_for_loss. Reads pp and virtual_stages (validate_rank_grid,
// validate_pipeline_schedule); fills ParallelSpec::segment_blocks through split_pipeline_stages
// (core/model/pipeline_stages.hpp). Without these keys the blocks must divide evenly over pp *
// virtual_stages, as before.
#include "core/model/pipeline_stages.hpp"
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

namespace {

const char* const kStageKeys[] = {"stage_layers", "first_stage_layers", "last_stage_layers",
                                  "account_for_embedding", "account_for_loss"};

}  // namespace

void validate_stage_split(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const ModelSpec& m = in.model;
  const char* given = nullptr;
  for (const char* k : kStageKeys) {
    if (o.has(k) && !given) given = k;
  }
  if (given && (!in.gpt() || in.model_parallel())) {
    ctx.fail(
        o.at(given),
        in.model_parallel() ? "applies to pipeline stages, not to model_parallel"
                            : "a stage split counts transformer blocks: it needs model.gpt "
                              "(or another transformer model)",
        in.model_parallel() ? "use split_at" : "remove it; other models are balanced by FLOPs");
  }
  if (!in.gpt()) {
    const int segments = ps.pp * ps.virtual_stages;
    if (static_cast<int>(m.layers.size()) < segments) {
      ctx.fail(o.at("pp"),
               "the model has " + std::to_string(m.layers.size()) + " layers, fewer than the " +
                   std::to_string(segments) + " pipeline chunks",
               "use fewer stages");
    }
    return;
  }
  StageSplitRequest r;
  r.blocks = m.transformer.layers;
  r.stages = ps.pp;
  r.chunks = ps.virtual_stages;
  r.v_shape = ps.schedule == PipelineSchedule::kDualPipeV;
  if (o.has("stage_layers")) {
    const std::string p = o.at("stage_layers");
    const json& arr = require_array(ctx, o.raw("stage_layers"), p, true);
    for (std::size_t i = 0; i < arr.size(); ++i)
      r.stage_layers.push_back(static_cast<int>(o.to_int(arr[i], index_path(p, i), 0, 1000000)));
  }
  r.first_stage_layers = static_cast<int>(o.integer("first_stage_layers", -1, 1, 1000000));
  r.last_stage_layers = static_cast<int>(o.integer("last_stage_layers", -1, 1, 1000000));
  r.account_for_embedding = o.boolean("account_for_embedding", false);
  r.account_for_loss = o.boolean("account_for_loss", false);
  const StageSplit split = split_pipeline_stages(r);
  if (!split.error.empty()) {
    if (split.blame_key == "pp") {
      // Today's even split, refused as before, with the keys that allow an uneven one.
      std::vector<std::string> keys = {"model.gpt.layers", o.at("pp")};
      if (o.has("virtual_stages")) keys.push_back(o.at("virtual_stages"));
      ctx.fail_conflict(keys,
                        "model.gpt.layers " + std::to_string(m.transformer.layers) +
                            " is not divisible by pp * virtual_stages = " +
                            std::to_string(ps.pp * ps.virtual_stages),
                        split.hint);
    }
    ctx.fail(o.at(split.blame_key), split.error, split.hint);
  }
  if (split.uneven) ps.segment_blocks = split.blocks_per_segment;
}

}  // namespace csim::core::parse
