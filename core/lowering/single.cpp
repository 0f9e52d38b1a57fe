// Single GPU: the baseline every other strategy is compared with (docs/program.md, "single").
// One Python process; the main thread issues data loading, forward, loss and the optimizer;
// backward runs on autograd's device thread; one compute stream (+ a copy stream for pinned H2D).
#include "core/lowering/lowering.hpp"
#include "core/lowering/program_builder.hpp"

namespace csim::core {

Program lower_single(const Scenario& s, Progress* progress) {
  ProgramBuilder b(s, progress);
  Program& p = b.program();
  const int gpu = s.strategy.device_ids.empty() ? 0 : s.strategy.device_ids.front();
  const int node = gpu / s.cluster.gpus_per_node;
  p.strategy_label = "single GPU";
  p.active_gpus = {gpu};
  p.samples_per_step = s.training.global_batch;

  const int proc = b.add_process(node, "python (GPU " + std::to_string(gpu) + ")", true);
  const int main = b.add_thread(proc, gpu, "main");
  const int autograd = b.add_thread(proc, gpu, "autograd device " + std::to_string(gpu));
  const int compute = b.add_stream(gpu, StreamRole::kCompute, "compute");
  const int copy = b.add_stream(gpu, StreamRole::kCopy, "copy");
  const Lane lane{main, gpu, compute};
  const Lane bwd_lane{autograd, gpu, compute};

  b.set_step(0);
  emit_model_setup(b, lane);
  DataFeed feed(b, node, main, gpu, copy, "");
  for (int step = 1; step <= s.training.steps; ++step) {
    b.set_step(step);
    const std::int64_t samples = batch_for_step(s.training.global_batch, s.training.dataset_size, step);
    const auto micro = torch_chunk_sizes(samples, s.training.gradient_accumulation);
    std::vector<std::pair<Bytes, Bytes>> kept;  // del_temporaries false: (output, input) to step end
    for (std::size_t m = 0; m < micro.size(); ++m) {
      const FedBatch in = feed.next_batch(micro[m], lane);
      const ForwardOps fwd = b.forward(lane, micro[m], {{in.copy, DepKind::kStreamWaits}}, "");
      const OpId loss = emit_loss(b, lane, micro[m], fwd.output_bytes, {});
      // backward(): autograd's device thread starts once the main thread handed it the graph.
      const OpId go = b.marker(main, gpu, "loss.backward()", {}, Phase::kBackward);
      if (m == 0) {
        const OpId g = b.alloc(autograd, compute, gpu, MemCategory::kGrads, b.grad_bytes(), ".grad");
        p.ops[g].deps = {{go, DepKind::kHostWaits}};
      }
      b.backward(bwd_lane, micro[m], fwd, {{loss, DepKind::kStreamWaits}, {go, DepKind::kHostWaits}}, "", {});
      const OpId done = b.marker(autograd, gpu, "autograd done", {}, Phase::kBackward);
      b.marker(main, gpu, "backward() returns", {{done, DepKind::kHostWaits}}, Phase::kBackward);
      if (s.training.del_temporaries) {
        release_after_backward(b, lane, fwd.output_bytes, in.bytes);
      } else {
        kept.emplace_back(fwd.output_bytes, in.bytes);
      }
    }
    emit_optimizer_and_sync(b, lane, {}, step == 1, b.grad_bytes());
    for (const auto& [out, input] : kept) release_after_backward(b, lane, out, input);
    emit_step_end(b, lane, step, samples);
  }
  return b.take();
}

}  // namespace csim::core
