// docs/sweep.md, "MPI".
#include "sweep/mpi_sweep.hpp"

#include <algorithm>
#include <chrono>

#include "backends/mpi/mpi_comm.hpp"
#include "backends/mpi/mpi_launcher.hpp"
#include "sweep/results_io.hpp"

namespace csim::sweep {
namespace {

// Every rank's text on rank 0 (MPI_Gather of the lengths, then MPI_Gatherv, through the MPI
// module: backends/mpi/mpi_comm.hpp).
std::vector<std::string> gather_text(const std::string& mine, int rank, int size) {
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size));
  const mpi::MpiComm& comm = mpi::mpi_comm();
  comm.gather_int(len, lens.data(), 0);
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      displs[static_cast<std::size_t>(r)] = total;
      total += lens[static_cast<std::size_t>(r)];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  comm.gatherv_chars(mine.data(), len, all.data(), lens.data(), displs.data(), 0);
  std::vector<std::string> out;
  if (rank == 0)
    for (int r = 0; r < size; ++r)
      out.push_back(all.substr(static_cast<std::size_t>(displs[static_cast<std::size_t>(r)]),
                               static_cast<std::size_t>(lens[static_cast<std::size_t>(r)])));
  return out;
}

}  // namespace

MpiSweepResult run_variants_mpi(
    const nlohmann::json& doc, const std::string& scenario_name,
    const std::vector<std::string>& base_sets, const std::vector<Knob>& knobs,
    const std::vector<Variant>& pending, const SweepRunOptions& options,
    const std::function<void(const std::vector<VariantResult>&)>& checkpoint) {
  const auto t0 = std::chrono::steady_clock::now();
  const mpi::MpiWorld w = mpi::mpi_world();
  MpiSweepResult res;
  res.rank = w.rank;
  res.size = w.size;
  res.writer = w.rank == 0;
  std::vector<Variant> mine;
  for (std::size_t j = static_cast<std::size_t>(w.rank); j < pending.size();
       j += static_cast<std::size_t>(w.size))
    mine.push_back(pending[j]);
  // The same round count on every rank: about 32 checkpoints over the sweep.
  const std::size_t max_share =
      (pending.size() + static_cast<std::size_t>(w.size) - 1) / static_cast<std::size_t>(w.size);
  const std::size_t rounds = std::min<std::size_t>(max_share, 32);
  const std::size_t per_round = rounds ? (max_share + rounds - 1) / rounds : 0;
  SweepRunOptions local = options;
  local.on_progress = nullptr;  // rank 0 reports the whole sweep after each round
  local.on_checkpoint = nullptr;
  std::size_t oom = 0, invalid = 0;
  for (std::size_t round = 0; round < rounds; ++round) {
    const std::size_t a = std::min(mine.size(), round * per_round);
    const std::size_t b = std::min(mine.size(), a + per_round);
    const std::vector<Variant> slice(mine.begin() + static_cast<long>(a),
                                     mine.begin() + static_cast<long>(b));
    SweepRunOutcome o = run_variants(doc, scenario_name, base_sets, knobs, slice, local);
    res.simulated += o.rows.size();
    const std::vector<std::string> texts = gather_text(rows_to_text(o.rows), w.rank, w.size);
    if (res.writer) {
      for (const std::string& t : texts)
        for (VariantResult& r : rows_from_text(t)) {
          oom += r.status == VariantStatus::kOom;
          invalid += r.status == VariantStatus::kInvalid;
          res.outcome.rows.push_back(std::move(r));
        }
      if (checkpoint && round + 1 < rounds) checkpoint(res.outcome.rows);
      if (options.on_progress)
        options.on_progress(
            {res.outcome.rows.size(), pending.size(), oom, invalid,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    } else {
      res.outcome.rows.insert(res.outcome.rows.end(), o.rows.begin(), o.rows.end());
    }
    int stop = (!o.complete || (options.cancel && options.cancel->load())) ? 1 : 0, any = 0;
    mpi::mpi_comm().allreduce_max_int(stop, &any);
    if (any) {
      res.complete = false;
      break;
    }
  }
  mpi::mpi_finish();
  res.outcome.complete = res.complete && (!res.writer || res.outcome.rows.size() == pending.size());
  res.outcome.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace csim::sweep
