// Pipeline stage assignment (core/model/pipeline_stages.hpp; docs/scenario.md, "strategy: uneven
// pipeline stages"). Megatron-Core's rules (megatron/core/transformer/transformer_block.py,
// get_num_layers_to_build, and transformer_layer.py, get_transformer_layer_offset): with
// num_layers_in_first/last_pipeline_stage the named stages take their counts and the middle
// stages split the rest evenly; with account_for_embedding/loss_in_pipeline_split the embedding
// and the loss count as one layer each in an even split of num_layers + 1 (+ 1). Megatron refuses
// both at once (TransformerConfig.__post_init__); so does this.
#include "core/model/pipeline_stages.hpp"

#include <numeric>
#include <tuple>

namespace csim::core {

namespace {

StageSplit fail(std::string key, std::string error, std::string hint) {
  StageSplit s;
  s.blame_key = std::move(key);
  s.error = std::move(error);
  s.hint = std::move(hint);
  return s;
}

StageSplit done(std::vector<int> per_segment) {
  StageSplit s;
  s.blocks_per_segment = std::move(per_segment);
  for (int b : s.blocks_per_segment) s.uneven = s.uneven || b != s.blocks_per_segment.front();
  return s;
}

std::string str(int v) {
  return std::to_string(v);
}

// The explicit list: pp * v entries, each >= 1, summing to the blocks.
StageSplit explicit_split(const StageSplitRequest& r) {
  const int segments = r.stages * r.chunks;
  if (static_cast<int>(r.stage_layers.size()) != segments) {
    return fail("stage_layers",
                str(static_cast<int>(r.stage_layers.size())) + " entries for " + str(segments) +
                    (r.chunks > 1 ? " virtual stages (pp * virtual_stages)" : " pipeline stages"),
                r.chunks > 1 ? "give one block count per virtual stage, in the order chunk 0 of "
                               "stages 0..pp-1, then chunk 1, ..."
                             : "give one block count per stage");
  }
  for (int b : r.stage_layers) {
    if (b < 1) {
      return fail("stage_layers", "a stage with " + str(b) + " blocks",
                  "every pipeline stage holds at least one transformer block");
    }
  }
  const long long sum = std::accumulate(r.stage_layers.begin(), r.stage_layers.end(), 0LL);
  if (sum != r.blocks) {
    return fail(
        "stage_layers",
        "the stages hold " + std::to_string(sum) + " blocks, the model has " + str(r.blocks),
        "the entries must sum to the model's transformer blocks");
  }
  return done(r.stage_layers);
}

// Megatron's first / last stage counts; the middle stages split the rest evenly.
StageSplit first_last_split(const StageSplitRequest& r) {
  const bool has_first = r.first_stage_layers >= 0, has_last = r.last_stage_layers >= 0;
  const int v = r.chunks;
  for (const auto& [given, count, key] :
       {std::tuple{has_first, r.first_stage_layers, "first_stage_layers"},
        std::tuple{has_last, r.last_stage_layers, "last_stage_layers"}}) {
    if (!given) continue;
    if (count < v || count % v != 0) {
      return fail(key, str(count) + " blocks do not split over " + str(v) + " model chunks",
                  "with interleaving the stage's count must be a multiple of virtual_stages "
                  "(Megatron's rule); or give stage_layers per virtual stage");
    }
  }
  const int first = has_first ? r.first_stage_layers : 0, last = has_last ? r.last_stage_layers : 0;
  const int middle_stages = r.stages - (has_first ? 1 : 0) - (has_last ? 1 : 0);
  const int middle = r.blocks - first - last;
  const char* key = has_last ? "last_stage_layers" : "first_stage_layers";
  if (middle < 0 || (middle_stages == 0 && middle != 0)) {
    return fail(key,
                "first and last stages hold " + str(first + last) + " blocks, the model has " +
                    str(r.blocks),
                "the named stages and the middle stages together hold every block");
  }
  if (middle_stages > 0 && (middle < middle_stages * v || middle % (middle_stages * v) != 0)) {
    return fail(key,
                "the remaining " + str(middle) + " blocks do not split evenly over the " +
                    str(middle_stages) + " middle stages" +
                    (v > 1 ? " x " + str(v) + " chunks" : std::string()),
                "choose counts that leave a multiple of the middle stages, or give stage_layers");
  }
  std::vector<int> out(static_cast<std::size_t>(r.stages * v));
  for (int c = 0; c < v; ++c) {
    for (int st = 0; st < r.stages; ++st) {
      int b = middle_stages > 0 ? middle / (middle_stages * v) : 0;
      if (st == 0 && has_first) b = first / v;
      if (st == r.stages - 1 && has_last) b = last / v;
      const int seg = r.v_shape && c == 1 ? 2 * r.stages - 1 - st : c * r.stages + st;
      out[static_cast<std::size_t>(seg)] = b;
    }
  }
  return done(std::move(out));
}

// Megatron's accounting: embedding and loss as one layer each in an even split.
StageSplit accounted_split(const StageSplitRequest& r) {
  const int segments = r.stages * r.chunks;
  const int extra = (r.account_for_embedding ? 1 : 0) + (r.account_for_loss ? 1 : 0);
  const int n = r.blocks + extra;
  const char* key = r.account_for_embedding ? "account_for_embedding" : "account_for_loss";
  if (n % segments != 0) {
    return fail(key,
                str(r.blocks) + " blocks + " + str(extra) + " (embedding / loss) = " + str(n) +
                    " layers are not divisible by pp * virtual_stages = " + str(segments),
                "Megatron splits the counted layers evenly; use first_stage_layers / "
                "last_stage_layers or stage_layers instead");
  }
  const int per = n / segments;
  if (per < 2) {
    return fail(key, str(per) + " layer per segment leaves a stage without transformer blocks",
                "use fewer pipeline stages");
  }
  std::vector<int> out(static_cast<std::size_t>(segments), per);
  if (r.account_for_embedding) out.front() -= 1;
  if (r.account_for_loss) out.back() -= 1;
  return done(std::move(out));
}

}  // namespace

StageSplit split_pipeline_stages(const StageSplitRequest& r) {
  const bool listed = !r.stage_layers.empty();
  const bool first_last = r.first_stage_layers >= 0 || r.last_stage_layers >= 0;
  const bool accounted = r.account_for_embedding || r.account_for_loss;
  const int ways = (listed ? 1 : 0) + (first_last ? 1 : 0) + (accounted ? 1 : 0);
  const int segments = r.stages * r.chunks;
  // The key an error blames: the last given of the three ways.
  const char* given = "stage_layers";
  if (first_last) given = r.first_stage_layers >= 0 ? "first_stage_layers" : "last_stage_layers";
  if (accounted) given = r.account_for_embedding ? "account_for_embedding" : "account_for_loss";
  if (ways > 1) {
    return fail(given, "more than one way of splitting the stages is given",
                "give one of stage_layers, first_stage_layers / last_stage_layers, "
                "account_for_embedding / account_for_loss (Megatron refuses the last two "
                "together too)");
  }
  if (ways == 1 && r.stages < 2) {
    return fail(given, "a pipeline stage split needs strategy.pp >= 2",
                "set pp, or remove the key");
  }
  if (listed) return explicit_split(r);
  if (first_last) return first_last_split(r);
  if (accounted) return accounted_split(r);
  if (r.blocks % segments != 0) {
    return fail("pp", str(r.blocks) + " is not divisible by pp * virtual_stages = " + str(segments),
                "every pipeline chunk holds the same number of transformer blocks unless "
                "strategy.stage_layers, first_stage_layers / last_stage_layers or "
                "account_for_embedding / account_for_loss say otherwise");
  }
  return done(std::vector<int>(static_cast<std::size_t>(segments), r.blocks / segments));
}

}  // namespace csim::core
