// Summary of a training run computed from its Trace alone, so that simulated and measured
// (PyTorch-profiler) traces are summarised the same way. Every figure's formula is in
// docs/summary.md; the section named beside each field is where.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/progress.hpp"
#include "core/units.hpp"
#include "profiler/comm_by_group.hpp"
#include "profiler/trace.hpp"

namespace csim::prof {

// One GPU during one step (docs/summary.md, "Utilisation over time"): what GPUtil's
// showUtilization prints, for every step of the run.
struct StepUtilisation {
  std::int64_t step = 0;     // N of ProfilerStep#N (1 when the trace has no steps)
  double busy_fraction = 0;  // (compute + comm + copy) / the step's length
  Bytes peak_bytes = 0;      // allocated, at most (0 without memory data)
};

struct GpuSummary {                      // one GPU (trace process); times are seconds per step
  std::int32_t pid = 0;                  // trace process id
  std::string name;                      // "node 0 / GPU 1" ("rank 3 / GPU 0" for imported traces)
  int rank = -1, node = -1, gpu = -1;    // from ProcessInfo (gpu = global index)
  Bytes peak_bytes = 0;                  // max of the "allocated" memory counter and of the
                                         //   steady-state peak (docs: Memory)
  Bytes first_step_peak_bytes = 0;       // metadata memory_peaks (0: unknown, e.g. imported)
  Bytes steady_peak_bytes = 0;           //   from step 2 on (projected for one-step runs)
  bool steady_projected = false;         // the steady state was projected from a one-step run
  Bytes peak_reserved_bytes = 0;         // max of the "memory reserved" counter's reserved series
  bool has_reserved_data = false;        // the GPU has caching-allocator counters
  Bytes capacity_bytes = 0;              // usable memory (0: unknown)
  bool has_memory_data = false;          // the GPU has memory counters
  double busy_fraction = 0;              // (compute + comm + copy) / window (docs: Time split)
  double compute_s = 0;                  // exclusive split, priority compute > comm > copy >
  double comm_s = 0;                     //   host-wait > idle; the five sum to the window
  double copy_s = 0;                     //   length per step
  double host_wait_s = 0;                // GIL waits on this process's host threads
  double idle_s = 0;                     // none of the above
  double exposed_comm_s = 0;             // communication not overlapped by compute (= comm_s)
  double overlapped_comm_s = 0;          // communication ∩ compute
  std::vector<GroupComm> comm_by_group;  // per process group (docs: Communication by group)
  int stands_for = 1;                    // rank symmetry: GPUs this row's figures count for (itself
                       //   incl.); 0 for a mirror's row (counted by its representative)
  int mirror_of = -1;  // rank symmetry: the representative GPU whose figures these are
  std::vector<StepUtilisation> by_step;  // every step, the first included
  // The "memory" counter's other series (by category: params, grads, optimizer, activations, ...)
  // at the first sample where its "allocated" series peaks (empty without them; docs: Memory).
  std::map<std::string, Bytes> peak_by_category;
};

struct OomVerdict {
  int gpu = -1;                   // GPU index
  std::string op;                 // op whose allocation did not fit ("" when unknown)
  Bytes shortfall_bytes = 0;      // the first failing allocation: allocated after it − capacity
  TimeNs at_ns = 0;               // when the allocation failed / first exceeded capacity
  Bytes would_be_peak_bytes = 0;  // the GPU's peak had nothing failed (0: unknown)
  Bytes over_capacity_bytes = 0;  //   minus its capacity: how far the step would exceed it
  bool steady_state = false;      // from the steady-state projection of a one-step run
  // The caching allocator's verdict (docs/memory.md, "OOM verdict"): the allocated bytes fit,
  // the segment a request needs does not; shortfall = reserved + segment - capacity, and the
  // would-be peak is the peak reserved.
  bool allocator = false;
  bool expandable_segments = false;
  Bytes reserved_bytes = 0, segment_bytes = 0, allocated_bytes = 0;
};

// Memory that grows every step on one GPU (docs/summary.md, "Memory growth").
struct MemoryGrowth {
  int gpu = -1;
  int first_step = 0, last_step = 0;   // steps N whose end-of-step memory was compared
  double bytes_per_step = 0;           // (allocated at end of last - at end of first) / steps
  std::string category;                // the series that grows the most ("" when none named)
  double category_bytes_per_step = 0;  // its growth per step
  Bytes last_step_peak_bytes = 0;      // peak allocated during the last step
  Bytes capacity_bytes = 0;            // 0: unknown
  std::int64_t oom_step = -1;          // first step whose peak exceeds capacity (-1: unknown)
};

struct Summary {
  std::string scenario, strategy, backend;  // from trace metadata ("" when absent)
  std::vector<TimeNs> step_times_ns;        // per ProfilerStep#N, in step order (docs: Steps)
  double step_time_s = 0;                   // median of steps 2..N (step 1 only if N == 1)
  std::int64_t samples_per_step = 0;        // metadata["samples_per_step"] (0: unknown)
  double samples_per_s = 0;                 // samples_per_step / step_time_s (0 when unknown)
  double mfu = 0;             // model FLOPs utilisation (0: unknown; docs: MFU and HFU)
  double hfu = 0;             // hardware FLOPs utilisation, recompute included
  double tflops_per_gpu = 0;  // achieved model TFLOP/s per GPU (0: unknown)

  // Decoder transformers whose metadata has "transformer" (docs/summary.md, "Tokens and FLOPs per
  // token"); all 0 otherwise.
  std::int64_t model_params = 0;         // the model's parameter count N
  std::int64_t model_active_params = 0;  // of N, those a token uses (a mixture of experts)
  // Of N and of the active ones, the multi-token-prediction depths' (docs/transformer.md,
  // "Multi-token prediction"); 0 without them.
  std::int64_t mtp_params = 0;
  std::int64_t mtp_active_params = 0;
  // Expert parallelism's routing (docs/summary.md, "Routing"): its kind ("" without ep), MoE
  // blocks x micro-batches sampled, max / mean tokens per expert and per EP rank (mean over the
  // samples, and the worst), and the EP rank that was busiest most often.
  std::string moe_routing;
  int moe_routing_samples = 0;
  double tokens_per_expert_max_over_mean = 0, worst_tokens_per_expert_max_over_mean = 0;
  double tokens_per_ep_rank_max_over_mean = 0, worst_tokens_per_ep_rank_max_over_mean = 0;
  int busiest_ep_rank = -1, busiest_ep_rank_count = 0;
  // Under a capacity factor (0: dropless): the share of routed token copies dropped, mean over
  // the samples and the worst.
  double moe_capacity_factor = 0;
  double dropped_token_share = 0, worst_dropped_token_share = 0;
  std::int64_t tokens_per_step = 0;       // samples_per_step x seq_len
  double tokens_per_s = 0;                // tokens_per_step / step_time_s
  double tokens_per_s_per_gpu = 0;        // tokens_per_s / gpus
  double flops_per_token_model = 0;       // the MFU numerator per token
  double flops_per_token_6n = 0;          // 6 N + 12 l a d s (PaLM)
  double flops_per_token_megatron = 0;    // Megatron-LM's count
  double flops_per_token_torchtitan = 0;  // torchtitan's count

  double window_s = 0;   // mean length of the steps the per-GPU split covers
  int window_steps = 0;  // how many steps the per-GPU split averages over
  double imbalance = 0;  // max / mean of the GPUs' peak bytes (0: no memory data)
  bool has_memory_data = false;
  std::optional<OomVerdict> oom;
  std::vector<MemoryGrowth> memory_growth;  // GPUs whose memory grows every step
  std::vector<GpuSummary> per_gpu;  // GPU processes with GPU work, sorted by pid (= GPU); under
                                    //   rank symmetry mirrored GPUs too, repeating their figures
  int gpus = 0;                     // GPUs the run used: sum of per_gpu's stands_for
  bool symmetric = false;           // metadata["rank_symmetry"] named mirrored GPUs
  int device_ids0 = -1;             // DataParallel: device_ids[0] (-1 otherwise)
  int output_device = -1;           // DataParallel: output_device (-1 otherwise)
  double exposed_comm_s = 0;        // sum over GPUs, per step
  double overlapped_comm_s = 0;     // sum over GPUs, per step
  std::vector<GroupComm> comm_by_group;  // per process group, sums over GPUs, per step
  // The GPU that bounds the step (docs/summary.md, "Bounding GPU"): the most compute + copy time
  // per step (the others wait for it in collectives); -1 without GPUs.
  int bounding_gpu = -1, bounding_rank = -1;
  double bounding_busy_s = 0;      // its compute + copy per step
  double median_busy_s = 0;        // the median GPU's
  std::vector<std::string> notes;  // caveats ("no memory data", "no ProfilerStep#N", …)
};

// With `progress`, the phases "summarising" (events indexed) and "summarising GPUs"
// (docs/limits.md, "Progress").
Summary summarize(const Trace& trace, core::Progress* progress = nullptr);

// JSON with every figure above (seconds, bytes); dump(2) writes "key": value.
nlohmann::json summary_to_json(const Summary& s);

// Human-readable aligned table (docs/summary.md, "Table").
void print_summary_table(const Summary& s, std::ostream& out);

}  // namespace csim::prof
