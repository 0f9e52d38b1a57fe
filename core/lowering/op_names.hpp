// The names of the ops (and the groups and processes) the parallel lowerings emit (pipeline,
// tensor_parallel, 3d, zero, fsdp; docs/program.md, "Names"), made in one place. An op's name is a
// NameRef of borrowed pieces that the op factory interns into the Program's pool: no std::string
// is built per op (the pieces outlive the factory call: literals, the layer's name, the pass's
// micro-batch prefix). Groups and processes, made once each, are plain strings.
#pragma once

#include <cstdint>
#include <string>

#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

// Op::phase of the step's ops (core/program/program.hpp): kForward, kBackward, kRecompute, kLoss,
// kOptimizer, kSync, kMemory.
using StepPhase = Phase;

namespace op_names {

// "mb3 " in front of a micro-batch's ops when a step has several micro-batches, else "": as a
// pattern, "mb\x1f " (kNameField), whose names carry the micro-batch index as their field
// (core/program/string_pool.hpp), so one pattern serves every micro-batch.
std::string micro_prefix(std::int64_t micro_batches);
// A layer's kernel: "mb3 h.0.attn.qkv.fwd", ".bwd", ".recompute" (`prefix` micro_prefix's
// pattern, `micro` its field).
NameRef layer_kernel(const std::string& prefix, int micro, const std::string& layer, StepPhase p);
// A collective of a parallel dimension: "tp all_reduce", "dp all_reduce grads",
// "zero all_gather params" (dim "tp", "dp", "zero"; what "" / "grads" / "params").
NameRef collective(const char* dim, CollectiveKind k, const char* what);
// A pipeline transfer: "send activations", "recv gradients".
NameRef p2p(bool send, bool forward);
// Its 2-GPU group: "pp activations 3->4".
std::string p2p_group(bool forward, int src_rank, int dst_rank);
// The process of a rank of the grid: "python rank 5 (dp 0, tp 1, pp 1)"; with context
// parallelism (cp >= 0) "python rank 5 (dp 0, tp 1, cp 1, pp 1)". (A dimension's group:
// Emitter::group_name.)
std::string rank_process(int rank, int dp, int tp, int pp, int cp = -1);
// optimizer.step() on every strategy: "optimizer.step (adam)".
NameRef optimizer_step(OptimizerKind k);

}  // namespace op_names
}  // namespace csim::core
