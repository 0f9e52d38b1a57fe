#include "core/lowering/op_names.hpp"

namespace csim::core {

const char* phase_name(StepPhase p) {
  switch (p) {
    case StepPhase::kForward:
      return "forward";
    case StepPhase::kBackward:
      return "backward";
    case StepPhase::kRecompute:
      return "recompute";
    case StepPhase::kLoss:
      return "loss";
    case StepPhase::kOptimizer:
      return "optimizer";
    case StepPhase::kSync:
      return "sync";
    case StepPhase::kMemory:
      return "memory";
  }
  return "?";
}

namespace op_names {

std::string micro_prefix(int micro, std::int64_t micro_batches) {
  return micro_batches > 1 ? "mb" + std::to_string(micro) + " " : std::string();
}

std::string layer_kernel(const std::string& prefix, const std::string& layer, StepPhase p) {
  const char* suffix = p == StepPhase::kBackward    ? ".bwd"
                       : p == StepPhase::kRecompute ? ".recompute"
                                                    : ".fwd";
  return prefix + layer + suffix;
}

std::string collective(const char* dim, CollectiveKind k, const char* what) {
  std::string name = std::string(dim) + " " + to_string(k);
  if (what[0] != '\0') name += std::string(" ") + what;
  return name;
}

std::string p2p(bool send, bool forward) {
  return std::string(send ? "send " : "recv ") + (forward ? "activations" : "gradients");
}

std::string p2p_group(bool forward, int src_rank, int dst_rank) {
  return std::string("pp ") + (forward ? "activations " : "gradients ") + std::to_string(src_rank) +
         "->" + std::to_string(dst_rank);
}

std::string dim_group(const char* dim, const char* other, int other_index, int stage) {
  return std::string(dim) + " (" + other + " " + std::to_string(other_index) + ", pp " +
         std::to_string(stage) + ")";
}

std::string rank_process(int rank, int dp, int tp, int pp) {
  return "python rank " + std::to_string(rank) + " (dp " + std::to_string(dp) + ", tp " +
         std::to_string(tp) + ", pp " + std::to_string(pp) + ")";
}

std::string optimizer_step(OptimizerKind k) {
  return std::string("optimizer.step (") + to_string(k) + ")";
}

}  // namespace op_names
}  // namespace csim::core
