// The emitter behind the pipeline, tensor_parallel, 3d, zero and fsdp lowerings (hybrid_3d.cpp),
// shared with the files that add to its step: hybrid_leaks.cpp (docs/memory.md, "Scenario
// switches"). Internal to core/lowering.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/lowering/parallel_plan.hpp"
#include "core/lowering/program_builder.hpp"

namespace csim::core::hybrid {

struct RankState {
  int rank = 0, gpu = 0, node = 0;
  bool emitted = true;  // false: a mirror image of a representative (rank symmetry)
  RankCoord c;
  int thread = 0;
  int compute = 0, dp = 0, copy = 0, send_next = 0, recv_prev = 0, send_prev = 0, recv_next = 0;
  int tp_group = -1, dp_group = -1;
  OpId last_compute = kNoOp;       // last op issued on the compute stream
  std::int64_t params = 0;         // parameters of its segments after the TP split
  std::unique_ptr<DataFeed> feed;  // first stage only
};

// A unit: the layers whose gradients are reduced (and, with sharded parameters, gathered)
// together: a transformer block, the embedding, the head; other models one layer with
// parameters plus the parameter-free layers after it.
struct Unit {
  int first = 0, end = 0;
  std::int64_t params = 0;  // after the TP split
};

class Emitter {
 public:
  Emitter(const Scenario& s, ProgramBuilder& b)
      : s_(s), ps_(s.strategy.parallel), b_(b), grid_(ps_), pb_(b.precision()) {}
  void build(const std::string& label);

 private:
  const Scenario& s_;
  const ParallelSpec& ps_;
  ProgramBuilder& b_;
  RankGrid grid_;
  PrecisionBytes pb_;
  int segments_ = 1;
  std::vector<Segment> segs_;
  std::vector<ShardedLayer> sharded_;
  std::vector<int> unit_of_layer_;
  std::vector<Unit> units_;
  std::vector<double> stored_per_sample_;  // per segment
  std::vector<RankState> ranks_;
  bool params_sharded_ = false, reshard_after_forward_ = false;
  std::unordered_map<std::int64_t, int> seq_;  // (group, rank) -> next index
  std::unordered_map<std::int64_t, std::pair<int, int>>
      open_;                                          // (group, index) -> instance, ops left
  std::unordered_map<std::int64_t, int> p2p_groups_;  // (src, dst, dir) -> group
  bool symmetric_ = false;                            // rank symmetry (docs/program.md)
  std::vector<char> emitted_gpu_;                     // per world GPU

  void set_up_symmetry();

  int instance_for(int rank, int group);
  OpId coll(RankState& r, int stream, const std::string& name, CollectiveKind k, int group,
            Bytes bytes, std::vector<Dep> deps, const char* phase);
  OpId tp_coll(RankState& r, TpComm c, Bytes bytes, const char* phase);
  OpId reduce_grads(RankState& r, Bytes grads, std::vector<Dep> deps);
  OpId p2p(RankState& r, int peer_rank, bool send, bool forward, Bytes bytes,
           std::vector<Dep> deps);
  int rank_of_segment(const RankState& r, int seg) const {
    return grid_.rank({r.c.dp, r.c.tp, seg % ps_.pp});
  }
  Bytes p2p_bytes(int seg) const;
  // The receive of segment seg's input activation from the previous segment's rank (issued after
  // this rank's last compute), as the dependency its first op waits on.
  Dep recv_from_previous_segment(RankState& r, int seg) {
    std::vector<Dep> rd;
    if (r.last_compute != kNoOp) rd.push_back({r.last_compute, DepKind::kStreamWaits});
    return {p2p(r, rank_of_segment(r, seg - 1), false, true, p2p_bytes(seg - 1), std::move(rd)),
            DepKind::kStreamWaits};
  }
  OpId forward_layer(RankState& r, int i, std::vector<Dep> deps, const std::string& prefix,
                     bool recompute);
  void emit_step(RankState& r, int step);
  // hybrid_leaks.cpp: what the training script does after the step ends (docs/memory.md,
  // "Scenario switches", "Under pipeline, tensor, 3D, ZeRO and FSDP").
  void emit_step_end(RankState& r, int step);
  void eval_forward(RankState& r);  // keep_outputs: a forward without no_grad, kept
};

}  // namespace csim::core::hybrid
