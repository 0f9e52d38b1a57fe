// Search placement simulation and schedulers (schedule.hpp; docs/hpo.md).
//
// Index: [SECTION] Names and checks, [SECTION] Placement, [SECTION] Schedulers,
//        [SECTION] Event loop, [SECTION] Totals
#include "hpo/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <queue>

#include "core/error.hpp"

namespace csim::hpo {

// [SECTION] Names and checks ---------------------------------------------------------------------

const char* to_string(SchedulerKind k) {
  switch (k) {
    case SchedulerKind::kFifo:
      return "fifo";
    case SchedulerKind::kAsha:
      return "asha";
    case SchedulerKind::kAshaStop:
      return "asha-stop";
  }
  return "?";
}

bool parse_scheduler(const std::string& s, SchedulerKind* out) {
  for (SchedulerKind k : {SchedulerKind::kFifo, SchedulerKind::kAsha, SchedulerKind::kAshaStop})
    if (s == to_string(k)) return *out = k, true;
  return false;
}

const char* to_string(Outcome o) {
  switch (o) {
    case Outcome::kCompleted:
      return "completed";
    case Outcome::kStoppedEarly:
      return "stopped early";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kNotRun:
      return "not run";
  }
  return "?";
}

std::vector<std::int64_t> rung_iterations(SchedulerKind s, const AshaParams& p) {
  std::vector<std::int64_t> r;
  if (s != SchedulerKind::kFifo)
    for (std::int64_t t = p.grace_period; t < p.max_t; t *= p.reduction_factor) r.push_back(t);
  r.push_back(p.max_t);
  return r;
}

void validate(const SearchOptions& o) {
  const std::string cl = "(command line)";
  const ClusterShape& c = o.cluster;
  const TrialResources& t = o.per_trial;
  if (t.gpus < 1 || t.cpus < 0)
    throw InputError(cl, "--gpus-per-trial", "a trial needs at least one GPU", "");
  if (t.gpus > c.nodes * c.gpus_per_node)
    throw InputError(cl, "--gpus-per-trial",
                     std::to_string(t.gpus) + " GPUs per trial, the cluster has " +
                         std::to_string(c.nodes * c.gpus_per_node),
                     "lower --gpus-per-trial or add nodes (--set cluster.nodes=N)");
  if (t.gpus > c.gpus_per_node && t.gpus % c.gpus_per_node != 0)
    throw InputError(cl, "--gpus-per-trial", "a trial larger than a node takes whole nodes",
                     "use a multiple of gpus_per_node = " + std::to_string(c.gpus_per_node));
  const int nodes_per_trial = t.gpus > c.gpus_per_node ? t.gpus / c.gpus_per_node : 1;
  if ((t.cpus + nodes_per_trial - 1) / nodes_per_trial > c.cpus_per_node)
    throw InputError(
        cl, "--cpus-per-trial",
        std::to_string(t.cpus) + " CPUs per trial, a node has " + std::to_string(c.cpus_per_node),
        "lower --cpus-per-trial or raise host.cpu_cores");
  if (o.asha.grace_period < 1)
    throw InputError(cl, "--grace-period", "must be at least 1 iteration", "");
  if (o.asha.reduction_factor < 2)
    throw InputError(cl, "--reduction-factor", "must be at least 2", "the paper uses 3 or 4");
  if (o.asha.max_t < o.asha.grace_period)
    throw InputError(cl, "--max-t", "must be at least --grace-period", "");
  if (o.startup_ns < 0) throw InputError(cl, "--startup-s", "must not be negative", "");
}

double percentile_linear(std::vector<double> v, double q) {
  CSIM_ASSERT(!v.empty());
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

namespace {

// [SECTION] Placement ----------------------------------------------------------------------------

// Free GPUs and cores per node. First fit: the lowest node that has room, its lowest free GPUs;
// a trial wider than a node takes the lowest whole free nodes.
class Cluster {
 public:
  explicit Cluster(const SearchOptions& o)
      : shape_(o.cluster),
        need_(o.per_trial),
        gpu_free_(static_cast<std::size_t>(shape_.nodes * shape_.gpus_per_node), true),
        cpus_free_(static_cast<std::size_t>(shape_.nodes), shape_.cpus_per_node) {}

  // The GPUs of one trial, or empty when it does not fit now.
  std::vector<int> place() {
    const int per_node = shape_.gpus_per_node;
    const int nodes_needed = need_.gpus > per_node ? need_.gpus / per_node : 1;
    const int gpus_per_node_needed = need_.gpus > per_node ? per_node : need_.gpus;
    const int cpus_per_node_needed = (need_.cpus + nodes_needed - 1) / nodes_needed;
    std::vector<int> taken;
    int nodes_taken = 0;
    for (int n = 0; n < shape_.nodes && nodes_taken < nodes_needed; ++n) {
      if (cpus_free_[static_cast<std::size_t>(n)] < cpus_per_node_needed) continue;
      std::vector<int> here;
      for (int g = n * per_node; g < (n + 1) * per_node; ++g)
        if (gpu_free_[static_cast<std::size_t>(g)] &&
            static_cast<int>(here.size()) < gpus_per_node_needed)
          here.push_back(g);
      if (static_cast<int>(here.size()) < gpus_per_node_needed) continue;
      taken.insert(taken.end(), here.begin(), here.end());
      ++nodes_taken;
    }
    if (nodes_taken < nodes_needed) return {};
    for (int g : taken) gpu_free_[static_cast<std::size_t>(g)] = false;
    for (int i = 0; i < nodes_needed; ++i)
      cpus_free_[static_cast<std::size_t>(
          taken[static_cast<std::size_t>(i * gpus_per_node_needed)] / per_node)] -=
          cpus_per_node_needed;
    return taken;
  }

  void release(const std::vector<int>& gpus) {
    const int per_node = shape_.gpus_per_node;
    const int nodes_needed = need_.gpus > per_node ? need_.gpus / per_node : 1;
    const int gpus_per_node_needed = need_.gpus > per_node ? per_node : need_.gpus;
    for (int g : gpus) gpu_free_[static_cast<std::size_t>(g)] = true;
    for (int i = 0; i < nodes_needed; ++i)
      cpus_free_[static_cast<std::size_t>(gpus[static_cast<std::size_t>(i * gpus_per_node_needed)] /
                                          per_node)] +=
          (need_.cpus + nodes_needed - 1) / nodes_needed;
  }

 private:
  ClusterShape shape_;
  TrialResources need_;
  std::vector<bool> gpu_free_;
  std::vector<int> cpus_free_;
};

// [SECTION] Schedulers ---------------------------------------------------------------------------

struct Job {
  int trial = -1;
  int rung = 0;
  bool promotion = false;
};

// One rung's results: (metric, trial), in completion order.
using Rung = std::vector<std::pair<double, int>>;

class Search {
 public:
  Search(const std::vector<TrialInput>& in, const CurveFn& metric, const SearchOptions& o)
      : in_(in), metric_(metric), options_(o), cluster_(o) {
    schedule_.rungs = rung_iterations(o.scheduler, o.asha);
    schedule_.gpus = o.cluster.nodes * o.cluster.gpus_per_node;
    schedule_.stopped_at_rung.assign(schedule_.rungs.size(), 0);
    recorded_.resize(schedule_.rungs.size());
    promoted_.assign(schedule_.rungs.size(), std::vector<bool>(in.size(), false));
    for (std::size_t i = 0; i < in.size(); ++i) {
      TrialResult t;
      t.id = static_cast<int>(i);
      t.step_ns = in[i].step_ns;
      t.failure = in[i].failure;
      schedule_.trials.push_back(t);
    }
  }

  Schedule run();

 private:
  // The next trial that can run, in trial order; failed ones are marked and skipped.
  int next_new_trial() {
    while (next_new_ < static_cast<int>(in_.size()) &&
           in_[static_cast<std::size_t>(next_new_)].failed)
      schedule_.trials[static_cast<std::size_t>(next_new_++)].outcome = Outcome::kFailed;
    return next_new_ < static_cast<int>(in_.size()) ? next_new_++ : -1;
  }

  // Li et al. 2020, Algorithm 2, get_job(): from the rung below the top down to rung 0, the best
  // configuration among the floor(|rung k| / eta) best of rung k that is not yet promoted goes
  // to rung k + 1; if there is none, a new configuration starts at rung 0. Ranks break ties by
  // trial id. FIFO and asha-stop only ever start new trials at rung 0.
  bool get_job(Job* job) {
    if (options_.scheduler == SchedulerKind::kAsha) {
      for (int k = static_cast<int>(schedule_.rungs.size()) - 2; k >= 0; --k) {
        Rung ranked = recorded_[static_cast<std::size_t>(k)];
        std::sort(ranked.begin(), ranked.end());
        const std::size_t top =
            ranked.size() / static_cast<std::size_t>(options_.asha.reduction_factor);
        for (std::size_t i = 0; i < top; ++i) {
          const int t = ranked[i].second;
          if (promoted_[static_cast<std::size_t>(k)][static_cast<std::size_t>(t)]) continue;
          promoted_[static_cast<std::size_t>(k)][static_cast<std::size_t>(t)] = true;
          *job = {t, k + 1, true};
          return true;
        }
      }
    }
    const int t = next_new_trial();
    if (t < 0) return false;
    // FIFO trains straight to max_t (its one rung); the ASHA variants to rung 0 first.
    *job = {t, 0, false};
    return true;
  }

  // Ray Tune _Bracket.on_result at milestone `rung`: cutoff = numpy.percentile of the rewards
  // recorded there so far at (1 - 1/rf) * 100; reward = -metric (Ray negates for mode "min");
  // STOP when reward < cutoff; the reward is recorded either way.
  bool ray_should_stop(int rung, int trial, double metric) {
    Rung& r = recorded_[static_cast<std::size_t>(rung)];
    bool stop = false;
    if (!r.empty()) {
      std::vector<double> rewards;
      for (const auto& [m, t] : r) rewards.push_back(-m);
      const double q = (1.0 - 1.0 / static_cast<double>(options_.asha.reduction_factor)) * 100.0;
      stop = -metric < percentile_linear(rewards, q);
    }
    r.emplace_back(metric, trial);
    return stop;
  }

  void start(const Job& job, std::vector<int> gpus, TimeNs now, bool with_startup);
  void finish(std::size_t segment, TimeNs now);

  struct Running {
    TimeNs end_ns;
    std::uint64_t seq;
    std::size_t segment;
    bool operator>(const Running& o) const {
      return end_ns != o.end_ns ? end_ns > o.end_ns : seq > o.seq;
    }
  };

  const std::vector<TrialInput>& in_;
  const CurveFn& metric_;
  const SearchOptions& options_;
  Cluster cluster_;
  Schedule schedule_;
  std::vector<Rung> recorded_;
  std::vector<std::vector<bool>> promoted_;  // [rung][trial]
  int next_new_ = 0;
  std::uint64_t seq_ = 0;
  std::priority_queue<Running, std::vector<Running>, std::greater<Running>> running_;
};

// [SECTION] Event loop ---------------------------------------------------------------------------

void Search::start(const Job& job, std::vector<int> gpus, TimeNs now, bool with_startup) {
  Segment seg;
  seg.trial = job.trial;
  seg.node = gpus.front() / options_.cluster.gpus_per_node;
  seg.gpus = std::move(gpus);
  seg.rung = job.rung;
  seg.promotion = job.promotion;
  seg.from_iter = job.rung == 0 ? 0 : schedule_.rungs[static_cast<std::size_t>(job.rung - 1)];
  seg.to_iter = schedule_.rungs[static_cast<std::size_t>(job.rung)];
  const TimeNs step = in_[static_cast<std::size_t>(job.trial)].step_ns;
  seg.start_ns = now;
  seg.end_ns =
      now + (with_startup ? options_.startup_ns : 0) + (seg.to_iter - seg.from_iter) * step;
  seg.metric = metric_(job.trial, seg.to_iter);
  TrialResult& t = schedule_.trials[static_cast<std::size_t>(job.trial)];
  if (t.start_ns < 0) t.start_ns = now;
  running_.push({seg.end_ns, seq_++, schedule_.segments.size()});
  schedule_.segments.push_back(std::move(seg));
}

// A job ends: record its result; asha-stop continues or stops the trial in place.
void Search::finish(std::size_t i, TimeNs now) {
  const Segment seg = schedule_.segments[i];
  TrialResult& t = schedule_.trials[static_cast<std::size_t>(seg.trial)];
  t.end_ns = now;
  t.rung = seg.rung;
  t.iterations = seg.to_iter;
  t.metric = seg.metric;
  const bool top = seg.rung + 1 == static_cast<int>(schedule_.rungs.size());
  if (options_.scheduler == SchedulerKind::kAshaStop && !top) {
    if (!ray_should_stop(seg.rung, seg.trial, seg.metric)) {
      start({seg.trial, seg.rung + 1, false}, seg.gpus, now, false);  // keeps its GPUs
      return;
    }
  } else if (!top) {
    recorded_[static_cast<std::size_t>(seg.rung)].emplace_back(seg.metric, seg.trial);
  }
  cluster_.release(seg.gpus);
}

Schedule Search::run() {
  TimeNs now = 0;
  while (true) {
    // Fill every free slot (the paper's "for each free worker do get_job()"): a job is drawn only
    // when a trial's resources are free, so no job waits holding a promotion.
    while (true) {
      std::vector<int> gpus = cluster_.place();
      if (gpus.empty()) break;
      Job job;
      if (!get_job(&job)) {
        cluster_.release(gpus);
        break;
      }
      start(job, std::move(gpus), now, true);
    }
    if (running_.empty()) break;
    // Every job that ends at the next end time, in start order, before any slot is refilled.
    now = running_.top().end_ns;
    while (!running_.empty() && running_.top().end_ns == now) {
      const std::size_t seg = running_.top().segment;
      running_.pop();
      finish(seg, now);
    }
  }

  // [SECTION] Totals
  const int top = static_cast<int>(schedule_.rungs.size()) - 1;
  for (TrialResult& t : schedule_.trials) {
    if (t.outcome == Outcome::kFailed) {
      ++schedule_.failed;
    } else if (t.rung < 0) {
      t.outcome = Outcome::kNotRun;
      ++schedule_.not_run;
    } else if (t.rung == top) {
      t.outcome = Outcome::kCompleted;
      ++schedule_.completed;
      if (schedule_.best_trial < 0 ||
          t.metric < schedule_.trials[static_cast<std::size_t>(schedule_.best_trial)].metric)
        schedule_.best_trial = t.id;
    } else {
      t.outcome = Outcome::kStoppedEarly;
      ++schedule_.stopped_early;
      ++schedule_.stopped_at_rung[static_cast<std::size_t>(t.rung)];
    }
  }
  for (const Segment& seg : schedule_.segments) {
    schedule_.wall_ns = std::max(schedule_.wall_ns, seg.end_ns);
    schedule_.gpu_busy_ns +=
        (seg.end_ns - seg.start_ns) * static_cast<std::int64_t>(seg.gpus.size());
  }
  schedule_.gpu_idle_ns =
      static_cast<std::int64_t>(schedule_.gpus) * schedule_.wall_ns - schedule_.gpu_busy_ns;
  return std::move(schedule_);
}

}  // namespace

Schedule simulate_search(const std::vector<TrialInput>& trials, const CurveFn& metric,
                         const SearchOptions& o) {
  validate(o);
  return Search(trials, metric, o).run();
}

}  // namespace csim::hpo
