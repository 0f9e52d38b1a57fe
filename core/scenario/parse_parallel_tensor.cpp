// Tensor parallelism's keys (core/scenario/parse_parallel.hpp): tp > 1 splits the transformer's
// GEMMs, so it needs model.gpt and a divisor of its heads; sequence_parallel needs tp > 1.
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

void validate_tensor_parallel(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const ModelSpec& m = in.model;
  // Tensor parallelism needs the transformer's column/row split.
  if (ps.tp > 1 && !in.gpt()) {
    ctx.fail(o.at("tp"), "tensor parallelism splits transformer GEMMs: it needs model.gpt",
             "use tp 1 for this model");
  }
  const std::string model_key = m.transformer_config.layers > 0 ? "model.transformer" : "model.gpt";
  if (ps.tp > 1 && m.transformer.heads % ps.tp != 0) {
    ctx.fail_conflict(
        {o.at("tp"), model_key + ".heads"},
        "tp " + std::to_string(ps.tp) + " does not divide " + model_key + ".heads " +
            std::to_string(m.transformer.heads),
        "each tensor-parallel rank takes heads / tp attention heads: pick a divisor of heads");
  }
  // Grouped-query attention: each rank holds kv_heads / tp key/value heads (Megatron requires
  // num_query_groups % tp == 0).
  if (ps.tp > 1 && m.transformer.kv_heads > 0 && m.transformer.kv_heads % ps.tp != 0) {
    ctx.fail_conflict({o.at("tp"), model_key + ".kv_heads"},
                      "tp " + std::to_string(ps.tp) + " does not divide " + model_key +
                          ".kv_heads " + std::to_string(m.transformer.kv_heads),
                      "each tensor-parallel rank takes kv_heads / tp key/value heads: pick a "
                      "divisor of kv_heads");
  }
  ps.sequence_parallel = o.boolean("sequence_parallel", false);
  if (ps.sequence_parallel && ps.tp == 1) {
    ctx.fail(o.at("sequence_parallel"),
             "sequence parallelism splits the sequence over the tensor-parallel ranks: it needs "
             "strategy.tp > 1",
             "set strategy.tp > 1 or remove sequence_parallel");
  }
  ps.tp_comm_overlap = o.boolean("tp_comm_overlap", false);
}

}  // namespace csim::core::parse
