// Hyper-parameter search costing (docs/hpo.md): a discrete-event simulation of how a search's
// trials are placed on a cluster, run, promoted or stopped early, and what it costs in wall time
// and idle GPUs. Step times come in from outside (the tool simulates each variant); metrics come
// from curves.hpp. Deterministic: ties are broken by insertion order.
//
// Index: [SECTION] Inputs, [SECTION] Results, [SECTION] Entry points
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.hpp"
#include "hpo/curves.hpp"

namespace csim::hpo {

// [SECTION] Inputs -------------------------------------------------------------------------------

enum class SchedulerKind {
  kFifo,      // every trial runs to max_t, in trial order
  kAsha,      // Li et al. 2020, Algorithm 2: asynchronous successive halving by promotion
  kAshaStop,  // Ray Tune AsyncHyperBandScheduler (brackets=1): stop at a milestone when below
              // the rung's cutoff; trials start in FIFO order and keep their resources
};
const char* to_string(SchedulerKind k);
bool parse_scheduler(const std::string& s, SchedulerKind* out);

struct ClusterShape {
  int nodes = 1;
  int gpus_per_node = 1;
  int cpus_per_node = 1;  // host cores per node
};

struct TrialResources {
  int gpus = 1;  // per trial; <= gpus_per_node: on one node; else whole nodes
  int cpus = 1;  // per trial (spread evenly over a multi-node trial's nodes, rounded up)
};

struct AshaParams {
  std::int64_t grace_period = 1;      // r: iterations of rung 0, >= 1
  std::int64_t reduction_factor = 3;  // eta, >= 2
  std::int64_t max_t = 9;             // R: iterations of a completed trial, >= grace_period
};

struct SearchOptions {
  ClusterShape cluster;
  TrialResources per_trial;
  SchedulerKind scheduler = SchedulerKind::kAsha;
  AshaParams asha;        // max_t also bounds FIFO trials
  TimeNs startup_ns = 0;  // per job start (process launch, checkpoint restore), GPUs held
};

struct TrialInput {
  TimeNs step_ns = 0;   // one iteration (the unit of grace_period, max_t): steps x step time
  bool failed = false;  // the variant cannot run (OOM, invalid): reported, takes no time
  std::string failure;  // why
};

// [SECTION] Results ------------------------------------------------------------------------------

enum class Outcome { kCompleted, kStoppedEarly, kFailed, kNotRun };
const char* to_string(Outcome o);

// One job: a trial trained from from_iter to to_iter iterations on `gpus`.
struct Segment {
  int trial = 0;
  int node = 0;           // first node
  std::vector<int> gpus;  // global GPU indices
  TimeNs start_ns = 0, end_ns = 0;
  int rung = 0;  // the rung this job trains the trial to
  std::int64_t from_iter = 0, to_iter = 0;
  double metric = 0;       // the trial's metric at to_iter
  bool promotion = false;  // kAsha: a promotion of an existing trial (else a new trial)
};

struct TrialResult {
  int id = 0;
  TimeNs step_ns = 0;
  Outcome outcome = Outcome::kNotRun;
  std::string failure;
  TimeNs start_ns = -1, end_ns = -1;  // first job start, last job end
  int rung = -1;                      // highest rung completed (-1: none)
  std::int64_t iterations = 0;        // trained in all
  double metric = 0;                  // at `iterations`
};

struct Schedule {
  std::vector<std::int64_t> rungs;  // iterations of rung k; the last one is max_t
  std::vector<TrialResult> trials;
  std::vector<Segment> segments;  // in start order
  TimeNs wall_ns = 0;             // end of the last job (the search starts at 0)
  std::int64_t gpu_busy_ns = 0;   // GPU-ns held by jobs: sum of (end - start) x GPUs
  std::int64_t gpu_idle_ns = 0;   // G x wall_ns - gpu_busy_ns
  int gpus = 0;                   // G, the cluster's GPUs
  int completed = 0, stopped_early = 0, failed = 0, not_run = 0;
  std::vector<int> stopped_at_rung;  // per rung: trials stopped early there
  int best_trial = -1;               // lowest metric among completed trials (ties: lowest id)
};

// [SECTION] Entry points -------------------------------------------------------------------------

// Rung resources: grace_period * eta^k for every k where that is below max_t, then max_t
// (docs/hpo.md, "Rungs"). FIFO has the one rung max_t.
std::vector<std::int64_t> rung_iterations(SchedulerKind s, const AshaParams& p);

// Throws InputError (file "(command line)", the option, a hint) when the options cannot run: a
// trial that does not fit the cluster, eta < 2, grace_period < 1, max_t < grace_period.
void validate(const SearchOptions& o);

Schedule simulate_search(const std::vector<TrialInput>& trials, const CurveFn& metric,
                         const SearchOptions& o);

// numpy.percentile(values, q) with its default linear interpolation, q in [0, 100]: Ray Tune's
// rung cutoff. values must not be empty.
double percentile_linear(std::vector<double> values, double q);

}  // namespace csim::hpo
