// simrun calibrate's model side (docs/calibration.md).
//
// Index: [SECTION] Series, [SECTION] Model predictions, [SECTION] Running, [SECTION] Fits
#include "calibration/calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "core/cost/collective_cost.hpp"
#include "core/cost/compute_cost.hpp"
#include "core/error.hpp"
#include "core/hardware/topology.hpp"

namespace csim::calibration {

using core::CollectiveKind;
using core::CopyKind;
using core::Dtype;
using core::Op;
using core::OpKind;

const char* to_string(SeriesKind k) {
  switch (k) {
    case SeriesKind::kOverhead:
      return "overhead";
    case SeriesKind::kLaunchLatency:
      return "launch_latency";
    case SeriesKind::kGemm:
      return "gemm";
    case SeriesKind::kElementwise:
      return "elementwise";
    case SeriesKind::kCopy:
      return "copy";
    case SeriesKind::kCollective:
      return "collective";
  }
  return "?";
}

namespace {

// A short op's lead (docs/calibration.md, "Micro-Programs"): ops the model times below
// kLeadBelowS get a lead op lasting kHostEnqueueS per repetition behind it, a generous bound on
// what the host spends enqueueing one op (event record, launch, event record: a few us each).
constexpr double kLeadBelowS = 50e-6;
constexpr double kHostEnqueueS = 10e-6;

// The bytes the overhead and launch-latency series move: 4 KiB, a copy of no consequence.
constexpr double kTinyBytes = 4096;
// The tiny GEMM of the overhead series: n = 64, the runtime's GEMM alignment.
constexpr double kTinyGemmN = 64;

std::vector<double> geometric(double from, double to, double factor) {
  std::vector<double> v;
  for (double x = from; x <= to * (1 + 1e-9); x *= factor) v.push_back(x);
  return v;
}

Dtype compute_dtype(const core::Scenario& s) {
  return core::precision_bytes(s.training.precision, s.training.amp_dtype).compute;
}

std::string bytes_label(double b) {
  char buf[32];
  if (b >= static_cast<double>(kGiB))
    std::snprintf(buf, sizeof buf, "%g GiB", b / static_cast<double>(kGiB));
  else if (b >= static_cast<double>(kMiB))
    std::snprintf(buf, sizeof buf, "%g MiB", b / static_cast<double>(kMiB));
  else
    std::snprintf(buf, sizeof buf, "%g KiB", b / static_cast<double>(kKiB));
  return buf;
}

// "h2d pinned": the Program's name of the copy kind (core/program/program.cpp), spaced for the
// table.
std::string copy_name(CopyKind k) {
  std::string s = core::to_string(k);
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

// The op a series repeats at `size` (docs/calibration.md, "Series").
Op series_op(const Series& s, double size) {
  Op op;
  op.gpu = 0;
  switch (s.kind) {
    case SeriesKind::kGemm:
      // Square n x n x n: 2n^3 FLOPs, as the CUDA runtime runs it (m = n = k). Bytes 0: the fit
      // is of the FLOP term alone.
      op.kind = OpKind::kCompute;
      op.compute_kind = core::ComputeKind::kGemm;
      op.dtype = s.dtype;
      op.flops = 2.0 * size * size * size;
      break;
    case SeriesKind::kOverhead:
    case SeriesKind::kLaunchLatency:
    case SeriesKind::kElementwise:
      op.kind = OpKind::kCompute;
      op.compute_kind = core::ComputeKind::kElementwise;
      op.dtype = Dtype::kFp32;  // no FLOPs: the dtype only has to exist
      op.bytes = static_cast<Bytes>(std::llround(size));
      break;
    case SeriesKind::kCopy:
      op.kind = OpKind::kCopy;
      op.copy_kind = s.copy_kind;
      op.bytes = static_cast<Bytes>(std::llround(size));
      if (s.copy_kind == CopyKind::kPeer) {
        op.gpu = 1;  // destination
        op.peer_gpu = 0;
      } else if (s.copy_kind == CopyKind::kD2D) {
        op.peer_gpu = 0;
      }
      break;
    case SeriesKind::kCollective:
      op.kind = OpKind::kCollective;
      op.collective = s.collective;
      op.bytes = static_cast<Bytes>(std::llround(size));
      break;
  }
  return op;
}

std::vector<int> node_group(int gpus) {
  std::vector<int> g;
  for (int i = 0; i < gpus; ++i) g.push_back(i);
  return g;
}

}  // namespace

// [SECTION] Series -------------------------------------------------------------------------------

core::Scenario calibration_node(const core::Scenario& s) {
  core::Scenario n = s;
  n.cluster.nodes = 1;
  n.cluster.stragglers.clear();
  n.cluster.degraded_links.clear();
  n.simulation.symmetry = false;
  return n;
}

std::vector<PlannedSeries> plan_series(const core::Scenario& node, bool quick) {
  const int gpus = node.cluster.gpus_per_node;
  const int warmup = quick ? 1 : 2, repeats = quick ? 3 : 5;
  const std::vector<double> gemm_n =
      quick ? std::vector<double>{512, 2048, 8192} : geometric(256, 8192, 2);
  const std::vector<double> sizes =
      quick ? geometric(1.0 * kMiB, 1.0 * kGiB, 16) : geometric(64.0 * kKiB, 1.0 * kGiB, 4);
  const std::vector<double> coll_sizes =
      quick ? geometric(1.0 * kMiB, 256.0 * kMiB, 16) : geometric(64.0 * kKiB, 1.0 * kGiB, 4);
  const core::GpuSpec& g = node.cluster.gpu;
  const double stream_bw = g.mem_bw_bytes_per_s * g.mem_bw_efficiency;

  std::vector<PlannedSeries> out;
  auto point = [&](const Series& s, double size, const std::string& label, const Op& op) {
    PlannedPoint pp;
    pp.size = size;
    pp.spec.op = op;
    pp.spec.label = label;
    pp.spec.warmup = warmup;
    pp.spec.repeats = repeats;
    if (op.kind == OpKind::kCollective) pp.spec.group = node_group(gpus);
    if (s.kind == SeriesKind::kLaunchLatency) {
      pp.spec.idle_between = true;  // each repetition to an idle stream, no lead
    } else if (model_seconds(node, pp.spec) < kLeadBelowS) {
      const double lead_s = kHostEnqueueS * (warmup + repeats);
      pp.spec.lead_bytes = static_cast<Bytes>(std::llround(lead_s * stream_bw));
    }
    return pp;
  };
  auto add = [&](Series s, const std::vector<double>& at) {
    PlannedSeries ps;
    ps.series = s;
    for (double size : at) {
      const std::string label =
          s.name + " " +
          (s.kind == SeriesKind::kGemm ? "n=" + std::to_string(std::llround(size))
                                       : bytes_label(size));
      ps.points.push_back(point(s, size, label, series_op(s, size)));
    }
    out.push_back(std::move(ps));
  };

  // Kernel overhead: the smallest ops a real run launches, a 4 KiB element-wise op (a device
  // copy on CUDA) and an n = 64 GEMM in the training dtype; the shorter one counts.
  {
    PlannedSeries ps;
    ps.series.name = "kernel overhead";
    ps.series.kind = SeriesKind::kOverhead;
    ps.series.dtype = compute_dtype(node);
    ps.points.push_back(point(ps.series, kTinyBytes, "overhead elementwise 4 KiB",
                              series_op(ps.series, kTinyBytes)));
    Series gemm = ps.series;
    gemm.kind = SeriesKind::kGemm;
    ps.points.push_back(point(gemm, kTinyGemmN, "overhead gemm n=64", series_op(gemm, kTinyGemmN)));
    out.push_back(std::move(ps));
  }
  {
    Series s;
    s.name = "launch latency";
    s.kind = SeriesKind::kLaunchLatency;
    add(s, {kTinyBytes});
  }
  for (Dtype d : {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16, Dtype::kBf16}) {
    if (!(g.peak_flops_per_s(d) > 0)) continue;  // the GPU lacks the dtype
    Series s;
    s.name = std::string("gemm ") + core::to_string(d);
    s.kind = SeriesKind::kGemm;
    s.dtype = d;
    add(s, gemm_n);
  }
  {
    Series s;
    s.name = "elementwise";
    s.kind = SeriesKind::kElementwise;
    add(s, sizes);
  }
  for (CopyKind k :
       {CopyKind::kH2DPinned, CopyKind::kH2DPageable, CopyKind::kD2H, CopyKind::kD2D}) {
    Series s;
    s.name = copy_name(k);
    s.kind = SeriesKind::kCopy;
    s.copy_kind = k;
    add(s, sizes);
  }
  if (gpus >= 2) {
    Series peer;
    peer.name = "peer";
    peer.kind = SeriesKind::kCopy;
    peer.copy_kind = CopyKind::kPeer;
    peer.gpus = 2;
    add(peer, sizes);
    for (CollectiveKind k :
         {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter}) {
      Series s;
      s.name = core::to_string(k);
      s.kind = SeriesKind::kCollective;
      s.collective = k;
      s.gpus = gpus;
      add(s, coll_sizes);
    }
  }
  return out;
}

// [SECTION] Model predictions --------------------------------------------------------------------

// docs/cost-model.md, "Compute" and "Copies"; "Communication" for collectives. The same
// functions the simulator calls for one op alone on the node.
double model_seconds(const core::Scenario& node, const MicroSpec& spec) {
  const Op& op = spec.op;
  const core::GpuSpec& g = node.cluster.gpu;
  switch (op.kind) {
    case OpKind::kCompute:
      return ns_to_s(core::op_compute_ns(g, op));
    case OpKind::kCopy: {
      if (op.copy_kind == CopyKind::kD2D)  // a memory-bound kernel reading and writing S
        return ns_to_s(core::compute_duration_ns(g, core::ComputeKind::kElementwise, Dtype::kFp32,
                                                 0, 2 * op.bytes));
      const core::Topology topo(node.cluster);
      core::Endpoint src = core::Endpoint::host(0), dst = core::Endpoint::gpu(op.gpu);
      if (op.copy_kind == CopyKind::kPeer) src = core::Endpoint::gpu(op.peer_gpu);
      if (op.copy_kind == CopyKind::kD2H) std::swap(src, dst);
      return ns_to_s(core::plan_copy(topo, core::comm_params_for(node), op.copy_kind, src, dst,
                                     static_cast<double>(op.bytes))
                         .predicted_ns);
    }
    case OpKind::kCollective: {
      const core::Topology topo(node.cluster);
      return ns_to_s(core::plan_collective(topo, core::comm_params_for(node), op.collective,
                                           core::CollectiveAlgo::kAuto, spec.group, -1,
                                           static_cast<double>(op.bytes))
                         .predicted_ns);
    }
    default:
      break;
  }
  CSIM_ASSERT_MSG(false, "micro-Programs repeat compute, copy or collective ops");
  return 0;
}

double model_seconds(const core::Scenario& node, const Series& series, double size) {
  MicroSpec spec;
  spec.op = series_op(series, size);
  if (series.kind == SeriesKind::kCollective) spec.group = node_group(series.gpus);
  return model_seconds(node, spec);
}

// [SECTION] Running ------------------------------------------------------------------------------

// docs/calibration.md, "Measurement": per timed repetition
//   compute, copy:   end - start                      (the op on its stream)
//   collective:      max end - max start over members (the transfer once all have arrived)
//   launch latency:  start - ready                    (ready: the enqueue begins, the stream idle)
// divided by the backend's time_scale; the point is the median over repetitions, or the fastest
// when the backend's noise only adds time (the stand-in).
Point measure_point(const Series& series, const PlannedPoint& planned, const MicroProgram& mp,
                    const MicroRun& run) {
  const std::vector<core::OpTiming>& t = run.result.timings;
  CSIM_ASSERT(t.size() == mp.program.ops.size() && run.time_scale > 0);
  const double to_s = 1e-9 / run.time_scale;
  Point p;
  p.size = planned.size;
  p.flops = planned.spec.op.flops;
  p.bytes = static_cast<double>(planned.spec.op.bytes);
  std::vector<double> enqueue;
  for (const std::vector<core::OpId>& ids : mp.timed) {
    TimeNs start = -1, end = -1;
    for (core::OpId id : ids) {
      const core::OpTiming& o = t[static_cast<std::size_t>(id)];
      if (o.start_ns < 0 || o.end_ns < 0)
        throw std::runtime_error("calibration op '" + mp.program.name_of(id) + "' did not run");
      start = std::max(start, o.start_ns);
      end = std::max(end, o.end_ns);
    }
    const core::OpTiming& first = t[static_cast<std::size_t>(ids.front())];
    if (series.kind == SeriesKind::kLaunchLatency) {
      p.samples_s.push_back(static_cast<double>(first.start_ns - first.ready_ns) * to_s);
      enqueue.push_back(static_cast<double>(first.issue_end_ns - first.ready_ns) * to_s);
    } else {
      p.samples_s.push_back(static_cast<double>(end - start) * to_s);
    }
  }
  if (run.fastest) {
    p.seconds = *std::min_element(p.samples_s.begin(), p.samples_s.end());
    if (!enqueue.empty()) p.enqueue_s = *std::min_element(enqueue.begin(), enqueue.end());
  } else {
    p.seconds = median(p.samples_s);
    if (!enqueue.empty()) p.enqueue_s = median(enqueue);
  }
  if (!(p.seconds > 0)) return p;
  switch (series.kind) {
    case SeriesKind::kGemm:
      p.rate = p.flops / p.seconds;
      break;
    case SeriesKind::kElementwise:
    case SeriesKind::kCopy:
      p.rate = p.bytes / p.seconds;
      break;
    case SeriesKind::kCollective:
      p.algbw = algbw_bytes_per_s(p.bytes, p.seconds);
      p.rate = busbw_bytes_per_s(series.collective, series.gpus, p.bytes, p.seconds);
      break;
    case SeriesKind::kOverhead:
    case SeriesKind::kLaunchLatency:
      break;
  }
  return p;
}

Calibration run_calibration(const core::Scenario& node, const MicroRunner& run,
                            const Options& options) {
  Calibration c;
  using Clock = std::chrono::steady_clock;
  for (const PlannedSeries& ps : plan_series(node, options.quick)) {
    Series s = ps.series;
    const Clock::time_point t0 = Clock::now();
    for (const PlannedPoint& pp : ps.points) {
      const MicroProgram mp = build_micro_program(pp.spec, node.cluster.gpus_per_node);
      MicroRun r;
      try {
        r = run(mp);
      } catch (const BackendUnavailable& e) {
        // The first single-GPU series decides whether the device runs at all; a multi-GPU
        // series may need more GPUs than this machine has.
        if (s.gpus < 2) throw;
        s.points.clear();
        s.skipped = e.what();
        break;
      }
      if (!r.result.complete) {
        c.complete = false;
        return c;
      }
      if (c.backend.empty()) {
        c.backend = r.result.backend;
        c.measured = r.result.measured;
        c.runtime = r.runtime;
        c.notes = r.result.notes;
        c.estimator = r.fastest ? "fastest" : "median";
      }
      s.points.push_back(measure_point(s, pp, mp, r));
    }
    if (options.progress) {
      char line[256];
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      if (s.skipped.empty())
        std::snprintf(line, sizeof line, "%s: %zu points in %.1f s", s.name.c_str(),
                      s.points.size(), secs);
      else
        std::snprintf(line, sizeof line, "%s: skipped (%s)", s.name.c_str(), s.skipped.c_str());
      options.progress(line);
    }
    c.series.push_back(std::move(s));
  }
  return c;
}

// [SECTION] Fits ---------------------------------------------------------------------------------

// docs/calibration.md, "Fits".
Fits fit_series(const core::Scenario& node, const std::vector<Series>& series) {
  Fits f;
  const core::GpuSpec& g = node.cluster.gpu;
  // Kernel overhead: the shortest op of the overhead series.
  for (const Series& s : series) {
    if (s.kind != SeriesKind::kOverhead) continue;
    for (const Point& p : s.points)
      if (p.seconds > 0 && (f.kernel_overhead_s < 0 || p.seconds < f.kernel_overhead_s))
        f.kernel_overhead_s = p.seconds;
  }
  const double overhead = std::max(0.0, f.kernel_overhead_s);
  const double peak_max = std::max({g.peak_fp32_flops_per_s, g.peak_tf32_flops_per_s,
                                    g.peak_fp16_flops_per_s, g.peak_bf16_flops_per_s});
  const Dtype want = compute_dtype(node);
  for (const Series& s : series) {
    switch (s.kind) {
      case SeriesKind::kGemm: {
        // t_compute = t - kernel_overhead (docs/cost-model.md, "Compute": duration = t_compute +
        // kernel_overhead); H at peak_max = H_d * peak_max / peak(d).
        std::vector<GemmPoint> pts;
        for (const Point& p : s.points) pts.push_back({p.flops, p.seconds - overhead});
        GemmDtypeFit gf;
        gf.dtype = s.dtype;
        gf.fit = fit_gemm_curve(pts, g.peak_flops_per_s(s.dtype));
        gf.half_flops_at_peak_max = gf.fit.half_flops * peak_max / g.peak_flops_per_s(s.dtype);
        if (s.dtype == want && gf.fit.ok) f.gemm_for_overrides = static_cast<int>(f.gemm.size());
        f.gemm.push_back(gf);
        break;
      }
      case SeriesKind::kElementwise:
      case SeriesKind::kCopy: {
        // Achieved memory bandwidth in the model's form, traffic / (t - kernel_overhead), over
        // streaming points: element-wise ops move their bytes, D2D copies read and write them.
        const bool d2d = s.kind == SeriesKind::kCopy && s.copy_kind == CopyKind::kD2D;
        if (s.kind == SeriesKind::kElementwise || d2d) {
          for (const Point& p : s.points) {
            const double traffic = d2d ? 2 * p.bytes : p.bytes;
            if (traffic < kStreamingMinBytes || !(p.seconds > overhead)) continue;
            f.mem_bw_bytes_per_s = std::max(f.mem_bw_bytes_per_s, traffic / (p.seconds - overhead));
          }
        }
        if (s.kind == SeriesKind::kCopy && !s.points.empty()) {
          CopyFit cf;
          cf.name = s.name;
          cf.kind = s.copy_kind;
          std::vector<double> bytes, secs, model;
          for (const Point& p : s.points) {
            bytes.push_back(p.bytes);
            secs.push_back(p.seconds);
            model.push_back(model_seconds(node, s, p.size));
          }
          cf.measured = fit_bandwidth(bytes, secs);
          cf.model = fit_bandwidth(bytes, model);
          f.copies.push_back(cf);
        }
        break;
      }
      case SeriesKind::kLaunchLatency:
        if (!s.points.empty()) {
          f.launch_latency_s = s.points.front().seconds;
          f.enqueue_s = s.points.front().enqueue_s;
        }
        break;
      case SeriesKind::kCollective: {
        if (s.points.empty()) break;
        CollectiveFit cf;
        cf.name = s.name;
        cf.kind = s.collective;
        cf.ranks = s.gpus;
        for (const Point& p : s.points) {
          if (p.rate > cf.peak_busbw) {
            cf.peak_busbw = p.rate;
            cf.at_bytes = p.bytes;
          }
        }
        if (cf.at_bytes > 0)
          cf.model_busbw = busbw_bytes_per_s(s.collective, s.gpus, cf.at_bytes,
                                             model_seconds(node, s, cf.at_bytes));
        f.collectives.push_back(cf);
        break;
      }
      case SeriesKind::kOverhead:
        break;
    }
  }
  if (f.mem_bw_bytes_per_s > 0 && g.mem_bw_bytes_per_s > 0)
    f.mem_bw_efficiency = f.mem_bw_bytes_per_s / g.mem_bw_bytes_per_s;
  return f;
}

}  // namespace csim::calibration
