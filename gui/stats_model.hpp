// Statistics shown by the viewer: the per-GPU step split of profiler/summary (docs/summary.md,
// "Time split"), plus the figures docs/simview.md defines — achieved FLOP/s, MFU, bubble fraction —
// and the table comparing two or three traces. Plain C++, tested headless.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "gui/event_style.hpp"
#include "gui/timeline_model.hpp"
#include "profiler/summary.hpp"
#include "profiler/trace.hpp"

namespace csim::gui {

struct GpuStats {
  std::string name;                         // "node 0 / GPU 0"
  std::array<double, kPartCount> part_s{};  // seconds per step by Part (host stays 0: GPU lanes)
  double window_s = 0;                      // the split's window (sum of part_s)
  double bubble_fraction = 0;               // idle / window (docs/simview.md, "Bubble")
  std::string role;                         // "device_ids[0] + output_device", "" otherwise
};

struct StatsModel {
  prof::Summary summary;
  std::vector<GpuStats> gpus;
  double executed_flops_per_step = 0;  // Σ "flops" args of compute events / steps
  double achieved_flops_per_s = 0;     // executed_flops_per_step / step_time_s (all GPUs)
  double peak_flops_per_gpu =
      0;            // catalog dense peak for the trace's GPU and precision (0: unknown)
  double mfu = -1;  // achieved / (GPUs × peak); −1 when unknown (docs/simview.md, "MFU")
  double bubble_fraction = 0;  // mean of the GPUs' bubble fractions
  // Two different GIL figures (docs/simview.md, "Statistics"):
  // - gpu_gil_wait_s: Σ over GPUs of the summary's exclusive "host wait" part per step, the time
  //   a GPU has nothing to run while its host threads wait for the GIL. 0 when the GIL waits
  //   hide behind GPU work (a GPU-bound DataParallel run);
  // - host_gil_wait_s: Σ over host threads of their "GIL wait" events (cat gil_wait) per step,
  //   what the threads themselves lose to the GIL, whatever the GPUs do meanwhile.
  // Both per step over the summary's window (steps 2..N; the one step when there is one).
  double gpu_gil_wait_s = 0;
  double host_gil_wait_s = 0;
  struct ThreadWait {
    std::string name;   // "node 0 / GPU 1 / replica 1 [python, GIL]"
    double wait_s = 0;  // GIL wait per step
  };
  std::vector<ThreadWait> gil_wait_by_thread;  // threads with GIL waits, most waiting first
  std::string label;  // "data_parallel (4 GPUs, …)" from metadata, else the scenario name
};

StatsModel build_stats(const prof::Trace& trace, const prof::Summary& summary);

// [SECTION] Compare
// ---------------------------------------------------------------------------------

struct CompareRow {
  std::string metric;               // "step time"
  std::vector<std::string> values;  // one per trace, formatted
  std::vector<double> raw;          // one per trace (NaN-free; 0 when unknown)
  std::string delta;                // last vs first: "−42.1 %" or "" when meaningless
  bool lower_is_better = true;      // for colouring the delta
};

// Rows: step time, samples/s, mean GPU busy, exposed communication, GIL wait of the host threads,
// GPU idle on GIL wait, bubble, MFU, peak memory (max over GPUs), memory imbalance; when some run
// has expert parallelism (Summary::moe_routing) also tokens/s per GPU, max/mean tokens per EP
// rank and the exposed communication of the "ep" group (the all-to-alls).
std::vector<CompareRow> compare_table(const std::vector<const StatsModel*>& runs);

// The summary's exposed communication of process group `group` ("ep"), per step, summed over
// GPUs; 0 when the run has no such group.
double exposed_group_comm_s(const prof::Summary& s, std::string_view group);

// Aligning compared traces (docs/simview.md, "Compare"): a simulated and a real run of one
// scenario start at different offsets (start-up, warm-up), so the compare view can line them up
// at the start of a training step instead of their first events.
// The step numbers (ProfilerStep#N) every trace has, ascending.
std::vector<std::int64_t> common_steps(const std::vector<const TimelineModel*>& traces);
// Per trace: how far after its first event step `step`'s start is (ns), so that view i =
// shared view shifted by offsets[i] puts every trace's step start at the same x; all 0 for
// step 0 (align the first events) or a step some trace lacks.
std::vector<double> align_offsets_ns(const std::vector<const TimelineModel*>& traces,
                                     std::int64_t step);

}  // namespace csim::gui
