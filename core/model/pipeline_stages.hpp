// Pipeline stage assignment: how many transformer blocks each pipeline segment holds
// (docs/scenario.md, "strategy: uneven pipeline stages"; docs/program.md, "Pipeline parallel").
// Plain arithmetic on counts, used by the parser (core/scenario/parse_parallel_stages.cpp) to
// validate the keys and by the lowering (partition_layers, core/lowering/pipeline.cpp) to cut the
// layers.
//
// Segment g = chunk * pp + stage (chunk = the model chunk on the stage, 0 without interleaving;
// DualPipeV: stage g or 2 pp - 1 - g, StageSplitRequest::v_shape).
// The embedding always joins segment 0 and the final norm + LM head the last segment (Megatron's
// pre_process / post_process stages; torchtitan's pipeline_module_split puts tok_embeddings on
// the first stage and norm + output on the last).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace csim::core {

// What the scenario asks for. At most one of the three ways may be used: an explicit list, the
// first / last stage counts, the embedding / loss accounting; none = the even split.
struct StageSplitRequest {
  int blocks = 0;  // transformer blocks of the model
  int stages = 1;  // pp
  int chunks = 1;  // v, model chunks per stage (interleaved schedule)
  // DualPipeV's V (chunks 2): stage st holds segments st and 2 * stages - 1 - st instead of
  // st and stages + st (core/lowering/pipeline_dualpipev.cpp)
  bool v_shape = false;
  // strategy.stage_layers: blocks per segment, pp * v entries in segment order (empty: not given)
  std::vector<int> stage_layers;
  int first_stage_layers = -1;         // Megatron decoder_first_pipeline_num_layers; -1: not given
  int last_stage_layers = -1;          // Megatron decoder_last_pipeline_num_layers; -1: not given
  bool account_for_embedding = false;  // Megatron account_for_embedding_in_pipeline_split
  bool account_for_loss = false;       // Megatron account_for_loss_in_pipeline_split
};

struct StageSplit {
  // Blocks per segment (pp * v entries, summing to the blocks); filled when error is empty.
  std::vector<int> blocks_per_segment;
  bool uneven = false;    // some segment differs from blocks / (pp * v)
  std::string error;      // "" = valid; else what is wrong
  std::string hint;       // how to fix it
  std::string blame_key;  // the strategy key the error is about ("pp" for the even split)
};

// The blocks of every segment (docs/scenario.md, "strategy: uneven pipeline stages"):
//   stage_layers          as given (each >= 1, sum = blocks, pp * v entries)
//   first / last          the first stage first/v per chunk, the last stage last/v, the other
//                         stages (blocks - first - last) / (their count * v) each (Megatron-Core
//                         get_num_layers_to_build with num_layers_in_first/last_pipeline_stage)
//   account_for_*         n = blocks + [embedding] + [loss] split evenly over pp * v segments,
//                         segment 0 holding one block fewer for the embedding, the last segment
//                         one fewer for the LM head and loss (Megatron-Core, the same function)
//   none                  blocks / (pp * v) each; refused when that does not divide
StageSplit split_pipeline_stages(const StageSplitRequest& r);

}  // namespace csim::core
