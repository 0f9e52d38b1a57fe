// The memory switches under pipeline, tensor_parallel, 3d, zero and fsdp (docs/memory.md,
// "Scenario switches", "Under pipeline, tensor, 3D, ZeRO and FSDP"): what each rank's training
// script does after its step ends. One process per GPU, so each rank does it on its own device:
//   loss_as_tensor  the last pipeline stage (the only one with a loss) keeps, per micro-batch,
//                   the graph of its own segment (the graph is cut where the stage received its
//                   input) and the loss scalar;
//   keep_outputs    an evaluation forward without no_grad over the step's micro-batches: every
//                   rank keeps the activations its own segments save, the last stage the logits;
//                   sharded parameters are gathered per unit and freed again (FSDP frees the
//                   storage itself, whoever references it);
//   empty_cache     one torch.cuda.empty_cache() per rank, after its step end.
// del_temporaries is handled by the pipeline piece (the last stage keeps its logits).
#include <algorithm>
#include <cmath>

#include "core/lowering/hybrid_emitter.hpp"
#include "core/program/caching_allocator.hpp"

namespace csim::core {

std::int64_t tp_mapping_nodes(const ModelSpec& m, Segment seg, int tp) {
  // Megatron's column- and row-parallel layers wrap their GEMM in one autograd Function each:
  // copy_to / reduce_from_tensor_model_parallel_region (with sequence parallelism gather_from /
  // reduce_scatter_to_sequence_parallel_region), one node per layer and forward.
  if (tp <= 1) return 0;
  std::int64_t n = 0;
  for (int i = seg.first; i < seg.end; ++i) {
    const TpRole role = m.layers[static_cast<std::size_t>(i)].tp_role;
    n += role == TpRole::kColumn || role == TpRole::kRow || role == TpRole::kVocabInput ||
                 role == TpRole::kVocabOutput
             ? 1
             : 0;
  }
  return n;
}

std::int64_t hybrid_loss_graph_nodes(const Scenario& s) {
  // docs/memory.md, "Under pipeline, tensor, 3D, ZeRO and FSDP": per micro-batch, one node per
  // framework op of the last segment's layers, its TP mapping functions, 3 for the loss and 1 for
  // the `+=`; m micro-batches per step.
  const ParallelSpec& ps = s.strategy.parallel;
  const std::vector<Segment> segs =
      partition_layers(s.model, ps.pp * ps.virtual_stages, ps.segment_blocks);
  const Segment last = segs.back();
  double ops = 0;
  for (int i = last.first; i < last.end; ++i)
    ops += s.model.layers[static_cast<std::size_t>(i)].kernels;
  const std::int64_t per_micro =
      static_cast<std::int64_t>(std::llround(ops)) + tp_mapping_nodes(s.model, last, ps.tp) + 3 + 1;
  return ps.micro_batches * per_micro;
}

namespace hybrid {

void Emitter::emit_step_end(StepState& st) {
  RankState& r = st.r;
  const TrainingSpec& t = s_.training;
  // The loss is computed by the last segment, pp * v - 1: on the last stage, on the first under
  // DualPipeV's V.
  if (t.leak_loss_as_tensor &&
      r.c[ParallelDim::kPp] == pipeline_stage_of_segment(ps_, plan_.segments - 1)) {
    // total_loss += loss for each micro-batch's loss (torch.distributed.pipelining hands the
    // script the last stage's per-micro-batch losses, graph attached): backward freed the saved
    // tensors; the nodes and the m loss scalars stay reachable.
    b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kAutogradGraph,
             hybrid_loss_graph_nodes(s_) * kAutogradNodeBytes, "autograd graph kept by total_loss");
    for (std::int64_t j = 0; j < ps_.micro_batches; ++j) {
      b_.alloc(r.thread, r.compute, r.gpu, MemCategory::kAutogradGraph, kLossScalarBytes,
               "loss scalar kept by total_loss");
    }
  }
  if (t.leak_keep_outputs) eval_forward(st);
  if (t.empty_cache_every > 0 && st.step % t.empty_cache_every == 0) {
    // After the step end the host has waited for its GPU work; each process empties the cache
    // of its own device.
    b_.marker(r.thread, r.gpu, kEmptyCacheOpName, {}, StepPhase::kMemory);
  }
}

void Emitter::eval_forward(StepState& st) {
  // The step's micro-batches, forward only, each through every chunk of this stage: the same
  // point-to-point sends and receives and TP collectives as training, in an order every stage
  // shares (micro-batch, then chunk), so sender and receiver pair up. Every piece sees an
  // evaluation pass: the pipeline keeps what the segment saves for the backward that never comes
  // (recompute included: a checkpointed block saves its input only) and the logits; sharded
  // parameters are gathered per unit and freed again (FSDP frees the storage itself, whoever
  // references it).
  const int v = ps_.virtual_stages, m = static_cast<int>(ps_.micro_batches);
  for (int j = 0; j < m; ++j) {
    for (int chunk = 0; chunk < v; ++chunk) {
      const int seg = pipeline_segment(ps_, chunk, st.r.c[ParallelDim::kPp]);
      SegmentPass sp{st, seg, plan_.segs[static_cast<std::size_t>(seg)], j, true, true};
      sp.prefix = "eval (grad on): " + op_names::micro_prefix(m);
      emit_forward(sp);
    }
  }
}

}  // namespace hybrid
}  // namespace csim::core
