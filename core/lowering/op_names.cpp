#include "core/lowering/op_names.hpp"

namespace csim::core {

namespace op_names {

std::string micro_prefix(std::int64_t micro_batches) {
  return micro_batches > 1 ? std::string{'m', 'b', kNameField, ' '} : std::string();
}

NameRef layer_kernel(const std::string& prefix, int micro, const std::string& layer, StepPhase p) {
  const char* suffix = p == StepPhase::kBackward    ? ".bwd"
                       : p == StepPhase::kRecompute ? ".recompute"
                                                    : ".fwd";
  return NameRef::cat({prefix, layer, suffix}, micro);
}

NameRef collective(const char* dim, CollectiveKind k, const char* what) {
  if (what[0] == '\0') return NameRef::cat({dim, " ", to_string(k)});
  return NameRef::cat({dim, " ", to_string(k), " ", what});
}

NameRef p2p(bool send, bool forward) {
  return NameRef::cat({send ? "send " : "recv ", forward ? "activations" : "gradients"});
}

std::string p2p_group(bool forward, int src_rank, int dst_rank) {
  return std::string("pp ") + (forward ? "activations " : "gradients ") + std::to_string(src_rank) +
         "->" + std::to_string(dst_rank);
}

std::string rank_process(int rank, int dp, int tp, int pp, int cp) {
  return "python rank " + std::to_string(rank) + " (dp " + std::to_string(dp) + ", tp " +
         std::to_string(tp) + (cp >= 0 ? ", cp " + std::to_string(cp) : std::string()) + ", pp " +
         std::to_string(pp) + ")";
}

NameRef optimizer_step(OptimizerKind k) {
  return NameRef::cat({"optimizer.step (", to_string(k), ")"});
}

}  // namespace op_names
}  // namespace csim::core
