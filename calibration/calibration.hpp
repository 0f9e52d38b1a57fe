// simrun calibrate's model side (docs/calibration.md): which micro-Programs to run, how their
// timings become series of points, and how the series become the cost model's constants. The
// device is reached through a MicroRunner that the tool supplies (tools/calibrate.cpp: the
// DeviceRuntime + RealExecutor a real run uses), so nothing here knows CUDA or the stand-in.
//
// Index: [SECTION] Series, [SECTION] Running, [SECTION] Fits, [SECTION] Model predictions
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "calibration/fit.hpp"
#include "calibration/micro_program.hpp"
#include "core/program/executor.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::calibration {

// [SECTION] Series -------------------------------------------------------------------------------

enum class SeriesKind {
  kOverhead,       // the smallest ops: kernel_overhead
  kLaunchLatency,  // a tiny op issued to an idle stream: host launch latency
  kGemm,           // square GEMMs of 2n^3 FLOPs, one dtype
  kElementwise,    // memory-bound compute ops (flops 0): achieved memory bandwidth
  kCopy,           // cudaMemcpyAsync of one kind
  kCollective      // NCCL over every GPU of the node
};
const char* to_string(SeriesKind k);

struct Point {
  double size = 0;       // GEMM: edge n; others: bytes (collectives: nccl-tests' "size")
  double flops = 0;      // compute ops: FLOPs of one op
  double bytes = 0;      // bytes of one op (compute: memory traffic; copy, collective: payload)
  double seconds = 0;    // over the timed repetitions: the median (or the fastest, MicroRun::
                         // fastest), device time (real / time_scale); launch latency series:
                         // start - ready on an idle stream
  double rate = 0;       // achieved: FLOP/s (gemm), bytes/s (elementwise, copies),
                         // busbw bytes/s (collectives); 0 where it has no meaning
  double algbw = 0;      // collectives: bytes / seconds
  double enqueue_s = 0;  // launch latency series: issue_end - ready (the enqueue call itself)
  std::vector<double> samples_s;  // each timed repetition, device time
};

struct Series {
  std::string name;  // "gemm bf16", "h2d pinned", "all_reduce"
  SeriesKind kind = SeriesKind::kGemm;
  core::Dtype dtype = core::Dtype::kFp32;                              // gemm
  core::CopyKind copy_kind = core::CopyKind::kD2D;                     // copies
  core::CollectiveKind collective = core::CollectiveKind::kAllReduce;  // collectives
  int gpus = 1;                                                        // GPUs the series' ops use
  std::vector<Point> points;
  std::string skipped;  // non-empty: why the series has no points
};

// What one series point runs.
struct PlannedPoint {
  double size = 0;
  MicroSpec spec;
};
struct PlannedSeries {
  Series series;  // without points
  std::vector<PlannedPoint> points;
};

// The one-node scenario the calibration measures: the scenario's node (its GPU, gpus_per_node,
// intra-node links, host), one node, no stragglers or degraded links, rank symmetry off.
core::Scenario calibration_node(const core::Scenario& s);

// The series to run on `node` (docs/calibration.md, "Series"), in order: kernel overhead, launch
// latency, GEMM per dtype the GPU has, element-wise, copies, and with two GPUs or more peer
// copies and all_reduce / all_gather / reduce_scatter. `quick`: fewer sizes and repetitions.
std::vector<PlannedSeries> plan_series(const core::Scenario& node, bool quick);

// [SECTION] Running ------------------------------------------------------------------------------

// What a device run of one micro-Program returns. A backend that stretches device time (the
// stand-in: simulated durations x time_scale) says so; measured times are divided by it.
struct MicroRun {
  core::ExecutionResult result;
  double time_scale = 1.0;
  // true: the backend's timing noise only adds time (the stand-in: a sleep never ends early), so
  // a point is its fastest repetition; false: the median (docs/calibration.md, "Measurement").
  bool fastest = false;
  std::map<std::string, std::string> runtime;  // RuntimeInfo::metadata (GPU, driver, versions)
};
// Runs one micro-Program. Throws csim::BackendUnavailable when the device cannot run it; a
// multi-GPU series that cannot run (fewer GPUs here than in the node) is skipped with the reason.
using MicroRunner = std::function<MicroRun(const MicroProgram&)>;

struct Options {
  bool quick = false;
  std::function<void(const std::string&)> progress;  // one line per finished series
};

struct Calibration {
  std::vector<Series> series;
  std::string backend;  // ExecutionResult::backend of the runs ("cuda", "cpu-standin")
  bool measured = false;
  std::map<std::string, std::string> runtime;
  std::vector<std::string> notes;  // the backend's caveats, once
  std::string estimator;           // "median" or "fastest" (MicroRun::fastest)
  bool complete = true;            // false: cancelled part-way
};

// Runs every planned series through `run` (docs/calibration.md, "Measurement").
Calibration run_calibration(const core::Scenario& node, const MicroRunner& run,
                            const Options& options);

// One point from a run of its micro-Program (docs/calibration.md, "Measurement").
Point measure_point(const Series& series, const PlannedPoint& planned, const MicroProgram& mp,
                    const MicroRun& run);

// [SECTION] Fits ---------------------------------------------------------------------------------

struct GemmDtypeFit {
  core::Dtype dtype = core::Dtype::kFp32;
  GemmFit fit;                        // half_flops at this dtype's peak
  double half_flops_at_peak_max = 0;  // as the cost model states it (docs/cost-model.md)
};

struct CopyFit {
  std::string name;
  core::CopyKind kind = core::CopyKind::kD2D;
  BandwidthFit measured;
  BandwidthFit model;  // the same fit on the simulator's predicted times
};

struct CollectiveFit {
  std::string name;
  core::CollectiveKind kind = core::CollectiveKind::kAllReduce;
  int ranks = 0;
  double peak_busbw = 0;   // bytes/s, the largest over sizes
  double at_bytes = 0;     // the size it was reached at
  double model_busbw = 0;  // the simulator's prediction at that size
};

struct Fits {
  double kernel_overhead_s = -1;  // < 0: not measured
  std::vector<GemmDtypeFit> gemm;
  int gemm_for_overrides = -1;    // index into gemm: the scenario's compute dtype
  double mem_bw_bytes_per_s = 0;  // best streaming bandwidth (model form), 0: none
  double mem_bw_efficiency = 0;   // mem_bw_bytes_per_s / catalog mem_bw
  double launch_latency_s = -1;   // < 0: not measured
  double enqueue_s = -1;          // the enqueue call (issue_end - ready)
  std::vector<CopyFit> copies;
  std::vector<CollectiveFit> collectives;
};

// docs/calibration.md, "Fits".
Fits fit_series(const core::Scenario& node, const std::vector<Series>& series);

// Element-wise and D2D points count as streaming from this much memory traffic: beyond any GPU's
// L2 (H100 50 MB, B200 126 MB), so they measure HBM, not the cache.
inline constexpr double kStreamingMinBytes = 256.0 * 1024 * 1024;

// [SECTION] Model predictions
// ----------------------------------------------------------------------

// The simulator's duration of one op of `spec` alone on `node` (docs/cost-model.md): compute ops
// and D2D copies by compute_duration_ns, other copies and collectives by their uncontended plan
// (predicted_ns), as the simulator times them.
double model_seconds(const core::Scenario& node, const MicroSpec& spec);
// The same for the op `series` runs at `size`.
double model_seconds(const core::Scenario& node, const Series& series, double size);

}  // namespace csim::calibration
