// simrun sweep (docs/sweep.md): wiring only.
#include "tools/sweep_cli.hpp"

#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <unordered_set>

#include "core/error.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/atomic_file.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "run/run.hpp"
#include "run/scenario_loader.hpp"
#include "sweep/knob_check.hpp"
#include "sweep/results_io.hpp"
#include "sweep/sweep_file.hpp"
#include "sweep/sweep_runner.hpp"
#include "sweep/sweep_table.hpp"
#include "sweep/tune.hpp"
#include "tools/replay_sweep.hpp"
#include "tools/signals.hpp"
#include "tools/simrun_app.hpp"
#ifdef CSIM_HAVE_MPI
#include "backends/mpi/mpi_launcher.hpp"
#include "sweep/mpi_sweep.hpp"
#endif

namespace csim::app {
namespace {

// Progress on stderr: redrawn in place on a terminal, a line every few seconds otherwise.
std::function<void(const sweep::SweepProgress&)> progress_printer(std::ostream& err, bool quiet) {
  if (quiet) return {};
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto last_line = std::make_shared<double>(-1e9);
  return [&err, tty, last_line](const sweep::SweepProgress& p) {
    const bool final = p.done == p.total;
    if (tty) {
      err << "\rsweep: " << sweep::progress_line(p) << (final ? "\n" : "") << std::flush;
    } else if (final || p.elapsed_s - *last_line >= 5.0) {
      *last_line = p.elapsed_s;
      err << "sweep: " << sweep::progress_line(p) << "\n";
    }
  };
}

}  // namespace

int sweep_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "simrun sweep: simulate every variant of a scenario (a grid of knobs, or a random sample "
      "of it) on all cores and tabulate step time, throughput, MFU, peak memory and OOM per "
      "variant, best first (docs/sweep.md). Resumes from its -o file after an interruption.\n"
      "Example: simrun sweep scenarios/gpt2_small_8xa100.json --grid strategy.kind=ddp,zero "
      "--grid strategy.micro_batch_size=4,8,16 -o results.csv\n"
      "Under mpirun (mpirun -np N simrun sweep ...) the ranks share the variants and rank 0 "
      "writes the merged file.",
      "simrun sweep"};
  std::string scenario_path, results_path, sort = "throughput";
  std::vector<std::string> grid, base_sets;
  std::size_t random_n = 0, max_variants = 1000000;
  std::uint64_t seed = 1;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int top = 10;
  bool fresh = false, quiet = false;
  app.add_option("scenario", scenario_path,
                 "scenario JSON file (docs/scenario.md), or a PyTorch-profiler trace or folder of "
                 "them to sweep the replay's what-ifs (docs/replay.md, \"Sweeping a replay\")")
      ->required();
  app.add_option("--grid", grid, "KEY=V1,V2,...: a knob (a scenario path, as --set) and its values")
      ->required();
  app.add_option("--random", random_n, "simulate N variants drawn at random from the grid");
  app.add_option("--seed", seed, "random seed for --random (default 1)");
  app.add_option("--set", base_sets,
                 "override a scenario value for every variant (as simrun --set)");
  std::string hf_config;
  add_hf_config_option(app, hf_config);
  app.add_option("-o,--output", results_path,
                 "results file, .csv or .json; resumed when it exists (see --fresh)");
  app.add_option("-j,--jobs", jobs, "worker threads (default: all cores)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--sort", sort,
                 "order of the rows: throughput (default), step_time, mfu, memory, index")
      ->check(CLI::IsMember({"throughput", "step_time", "mfu", "memory", "index"}));
  app.add_option("--top", top, "rows to print (default 10; the file has all)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--max-variants", max_variants, "refuse larger grids (default 1,000,000)");
  app.add_flag("--fresh", fresh, "ignore an existing -o file instead of resuming from it");
  app.add_flag("-q,--quiet", quiet, "no progress bar");
  bool op_level = false;
  app.add_flag("--op-level", op_level,
               "evaluate every variant with the op-level simulator instead of the block path "
               "(docs/block-eval.md; slower, the figures a timeline shows to the nanosecond)");
  double checkpoint_every_s = 2.0;
  app.add_option("--checkpoint-every", checkpoint_every_s,
                 "seconds between checkpoints of the -o file while the sweep runs (default 2; 0: "
                 "at every progress check, about 20 a second)")
      ->check(CLI::Range(0.0, 86400.0));
  if (const int code = parse_command_line(app, args, "simrun sweep", out, err); code >= 0)
    return code;
  return run_command("simrun sweep", err, [&]() -> int {
    check_output_files({{"-o", results_path}});
    if (is_trace_source(scenario_path)) {  // a replayed trace (docs/replay.md, "Sweeping a replay")
      if (!hf_config.empty() || op_level)
        throw InputError("(command line)", hf_config.empty() ? "--op-level" : "--hf-config",
                         "a trace replays as recorded: no model to change, no block path",
                         "sweep its what-ifs: --grid replay.dp_scale=1,2,4 --grid cluster.gpu=...");
      ReplaySweepArgs ra;
      ra.source = scenario_path;
      ra.grid = grid;
      ra.base_sets = base_sets;
      ra.random_n = random_n;
      ra.seed = seed;
      ra.max_variants = max_variants;
      ra.top = top;
      ra.results_path = results_path;
      return replay_sweep(ra, out, err);
    }
    const run::ScenarioLoader loader =
        run::ScenarioLoader::from_file(scenario_path, {}, base_sets, hf_config);
    (void)loader.load();  // the base must be valid
    const nlohmann::json& doc = loader.document();
    base_sets = loader.overrides();  // --hf-config's model first, then --set
    std::vector<sweep::Knob> knobs;
    for (const std::string& g : grid) knobs.push_back(sweep::parse_knob(g));
    sweep::check_knobs(doc, scenario_path, base_sets, knobs);
    std::vector<sweep::Variant> variants = random_n > 0
                                               ? sweep::random_variants(knobs, random_n, seed)
                                               : sweep::grid_variants(knobs, max_variants);
    sweep::SortKey key = sweep::SortKey::kThroughput;
    sweep::parse_sort_key(sort, &key);

    sweep::ResultsHeader header;
    header.scenario = scenario_path;
    header.base = sweep::base_fingerprint(base_sets);
    for (const sweep::Knob& k : knobs) header.keys.push_back(k.key);
    header.variants_total = variants.size();
    // Resume: rows of an earlier run of the same sweep are kept, their variants skipped.
    sweep::SweepFile file(results_path, header, knobs, variants, key, fresh);
    const std::vector<sweep::Variant>& pending = file.pending();
    if (!file.kept().empty() && !quiet)
      err << "simrun sweep: resuming " << results_path << ": " << file.kept().size()
          << " variants already done, " << pending.size() << " to go\n";
    auto merged = [&](const std::vector<sweep::VariantResult>& fresh_rows) {
      return file.merged(fresh_rows);
    };
    auto write = [&](const std::vector<sweep::VariantResult>& rows, bool complete) {
      set_writing(!results_path.empty());
      file.write(rows, complete);
      set_writing(false);
    };
    if (results_path.empty())
      say_on_interrupt("simrun sweep",
                       "the variants under way finish and the finished ones are printed",
                       "the finished variants are lost (no -o file)");
    else
      say_on_interrupt(
          "simrun sweep",
          "the variants under way finish, then the finished ones are written to " + results_path +
              ", marked incomplete (the same command resumes)",
          results_path + " keeps its last checkpoint (the same command resumes from it)");
    sweep::SweepRunOptions opt;
    opt.threads = jobs;
    if (op_level) opt.evaluation = run::Evaluation::kOpLevel;
    opt.cancel = cancel_flag();
    opt.on_progress = progress_printer(err, quiet);
    opt.checkpoint_every_s = checkpoint_every_s;
    opt.on_checkpoint = [&](const std::vector<sweep::VariantResult>& rows) {
      write(merged(rows), false);
    };
    sweep::SweepRunOutcome run;
#ifdef CSIM_HAVE_MPI
    if (mpi::started_by_mpirun()) {
      sweep::MpiSweepResult m = sweep::run_variants_mpi(
          doc, scenario_path, base_sets, knobs, pending, opt,
          [&](const std::vector<sweep::VariantResult>& rows) { write(merged(rows), false); });
      if (!m.writer) {
        if (!quiet)
          out << "simrun sweep: MPI rank " << m.rank << " simulated " << m.simulated
              << " variants; rank 0 writes the results\n";
        return m.complete ? kExitOk : kExitInterrupted;
      }
      run = std::move(m.outcome);
    } else
#endif
      run = sweep::run_variants(doc, scenario_path, base_sets, knobs, pending, opt);
    const std::vector<sweep::VariantResult> rows = merged(run.rows);
    write(rows, run.complete);
    if (!quiet) {
      sweep::print_sweep_table(rows, file.header(), top, out);
      char line[200];
      std::snprintf(
          line, sizeof line, "%zu variants simulated in %.2f s (%.0f variants/s, %d threads)%s\n",
          run.rows.size(), run.wall_s,
          run.wall_s > 0 ? static_cast<double>(run.rows.size()) / run.wall_s : 0.0, jobs,
          run.complete ? ""
                       : "; interrupted: the results file keeps what finished, marked incomplete");
      out << line;
    }
    return run.complete ? kExitOk : kExitInterrupted;
  });
}

int tune_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "simrun tune: search dp x tp x pp, micro-batch size and count, pipeline schedule, ZeRO "
      "stage, activation recompute and DDP bucket size for the fastest layout that fits in "
      "memory; candidates that cannot fit or cannot be fast are pruned before simulation "
      "(docs/sweep.md, \"Tune\"). Opt-in: attention kernel, precision, compile, sharding "
      "family, sequence parallelism, recompute policies, rank order, uneven stages.\n"
      "Example: simrun tune scenarios/gpt3_175b_1024xa100_3d.json --top 5",
      "simrun tune"};
  std::string scenario_path;
  std::vector<std::string> base_sets;
  sweep::TuneOptions opt;
  opt.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int top = 5, rejected = 8;
  bool quiet = false;
  app.add_option("scenario", scenario_path, "scenario JSON file (docs/scenario.md)")->required();
  app.add_option("--gpus", opt.gpus, "GPUs to lay out (default: the whole cluster)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--top", top, "fitting layouts to print (default 5)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--rejected", rejected, "rejected layouts to print with their reason (default 8)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--set", base_sets, "override a scenario value first (as simrun --set)");
  std::string hf_config;
  add_hf_config_option(app, hf_config);
  app.add_option("-j,--jobs", opt.threads, "simulations at once (default: all cores)")
      ->check(CLI::Range(1, 1024));
  app.add_flag("-q,--quiet", quiet, "no progress line");
  bool op_level = false;
  app.add_flag("--op-level", op_level,
               "evaluate layouts with the op-level simulator instead of the block path "
               "(docs/block-eval.md)");
  // The other knobs (docs/sweep.md, "Tune: the other knobs"): each off unless given.
  sweep::TuneSpace& sp = opt.space;
  app.add_option("--attention", sp.attention,
                 "attention kernels to search: eager, flash2, flash3, cudnn, or all (those the "
                 "GPU runs); model.transformer / model.hf_config only (default: the scenario's)")
      ->delimiter(',')
      ->check(CLI::IsMember({"eager", "flash2", "flash3", "cudnn", "all"}));
  app.add_option("--precisions", sp.precisions,
                 "precisions to search: bf16, fp8 (the scenario's training.fp8.recipe) or "
                 "fp8:RECIPE (delayed, current, block, mxfp8, nvfp4, rowwise); FP8 changes "
                 "numerics, so it is searched only when named (default: the scenario's)")
      ->delimiter(',')
      ->check(CLI::IsMember({"bf16", "fp16", "fp32", "amp", "fp8", "fp8:delayed", "fp8:current",
                             "fp8:block", "fp8:mxfp8", "fp8:nvfp4", "fp8:rowwise"}));
  std::vector<std::string> compile;
  app.add_option("--compile", compile,
                 "training.compile values to search: off, on (default: the scenario's)")
      ->delimiter(',')
      ->check(CLI::IsMember({"off", "on"}));
  app.add_option("--sharding", sp.sharding,
                 "sharding families: zero (ZeRO 0-3, default), distopt (Megatron's distributed "
                 "optimizer), megatron_fsdp, fsdp1 (dp only), fsdp2 (with tp, pp, HSDP)")
      ->delimiter(',')
      ->check(CLI::IsMember({"zero", "distopt", "megatron_fsdp", "fsdp1", "fsdp2"}));
  app.add_flag("--sequence-parallel", sp.sequence_parallel,
               "also try Megatron's sequence parallelism wherever tp > 1");
  app.add_option("--recompute", sp.recompute,
                 "activation recompute policies: none, selective, selective_op, full, full:K "
                 "(every K-th block) (default none,selective,full)")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "none" || v == "selective" || v == "selective_op" || v == "full") return {};
            if (v.rfind("full:", 0) == 0 && v.size() > 5 &&
                v.find_first_not_of("0123456789", 5) == std::string::npos &&
                std::stoll(v.substr(5, 9)) >= 1)
              return {};
            return "'" + v + "' is not none, selective, selective_op, full or full:K (K >= 1)";
          },
          "POLICY"));
  app.add_option("--rank-orders", sp.rank_orders,
                 "rank orders to search, fastest-varying first: tp-dp-pp, dp-tp-pp, tp-pp-dp, "
                 "...; with --cp, cp goes after tp unless named (default: the scenario's, "
                 "Megatron's tp-cp-ep-dp-pp)")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            std::vector<std::string> seen;
            std::size_t pos = 0;
            while (true) {
              const std::size_t dash = v.find('-', pos);
              const std::string part = v.substr(pos, dash == std::string::npos ? dash : dash - pos);
              const bool dim =
                  part == "tp" || part == "cp" || part == "ep" || part == "dp" || part == "pp";
              if (!dim || std::find(seen.begin(), seen.end(), part) != seen.end())
                return "'" + v + "' is not a permutation of tp, dp, pp (and cp, ep)";
              seen.push_back(part);
              if (dash == std::string::npos) break;
              pos = dash + 1;
            }
            for (const char* need : {"tp", "dp", "pp"})
              if (std::find(seen.begin(), seen.end(), need) == seen.end())
                return "'" + v + "' leaves out " + need;
            return {};
          },
          "ORDER"));
  app.add_option("--cp", sp.cp,
                 "context-parallel sizes to search, e.g. 1,2,4,8 (each dividing the GPUs and the "
                 "sequence into 2 cp chunks; default 1: none)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--cp-comm", sp.cp_comm,
                 "K/V exchanges to search for cp > 1: p2p (ring attention, default), all_gather, "
                 "a2a (Ulysses), a2a+p2p:A (Megatron's hierarchical CP, a2a groups of A)")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "p2p" || v == "all_gather" || v == "a2a") return {};
            if (v.rfind("a2a+p2p:", 0) == 0 && v.size() > 8 &&
                v.find_first_not_of("0123456789", 8) == std::string::npos)
              return {};
            return "'" + v + "' is not p2p, all_gather, a2a or a2a+p2p:A (A: the a2a groups' size)";
          },
          "COMM"));
  app.add_option("--ep", sp.ep,
                 "expert-parallel sizes to search for a mixture of experts, e.g. 1,8 (each "
                 "dividing the experts and tp x cp x dp; default: 1 and every divisor of the "
                 "experts)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--dispatcher", sp.moe_dispatchers,
                 "MoE token dispatchers to try where ep > 1, e.g. alltoall,deepep (default: the "
                 "scenario's strategy.moe_dispatcher)")
      ->delimiter(',')
      ->check(CLI::IsMember({"alltoall", "allgather", "deepep"}));
  app.add_option("--offload", sp.optimizer_offload,
                 "optimizer offload fractions to try with Megatron's optimizer, e.g. 0,0.5,1 "
                 "(strategy.optimizer_offload, Megatron-Core's --optimizer-offload-fraction; 0: "
                 "none; default: the scenario's)")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1.0));
  std::vector<std::string> tp_overlap;
  app.add_option("--tp-overlap", tp_overlap,
                 "TP communication overlap to try where tp > 1 without sequence parallelism: off, "
                 "on (strategy.tp_comm_overlap, Megatron's async TP all-reduce; default: none "
                 "searched)")
      ->delimiter(',')
      ->check(CLI::IsMember({"off", "on"}));
  app.add_option("--act-offload", sp.activation_offload,
                 "activation offload block counts to try where pp is 1 and recompute none, e.g. "
                 "0,4 (strategy.activation_offload, Megatron-Core's cpu_offloading_num_layers; 0: "
                 "none; default: none searched)")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 16));
  app.add_flag("--uneven-stages", sp.uneven_stages,
               "also try pp that does not divide the blocks, with Megatron's first/last stage "
               "split");
  std::string json_path, timeline_path;
  app.add_option("-o,--output", json_path,
                 "write the report as JSON (counts, the top layouts with their knobs)");
  app.add_option("--timeline", timeline_path,
                 "also simulate the best layout at op level and write its trace (Chrome Trace "
                 "Event JSON) to this file; the search itself builds no timeline");
  if (const int code = parse_command_line(app, args, "simrun tune", out, err); code >= 0)
    return code;
  if (op_level) opt.evaluation = run::Evaluation::kOpLevel;
  for (const std::string& c : compile) sp.compile.push_back(c == "on" ? 1 : 0);
  for (const std::string& t : tp_overlap) sp.tp_comm_overlap.push_back(t == "on" ? 1 : 0);
  return run_command("simrun tune", err, [&]() -> int {
    check_output_files({{"-o", json_path}, {"--timeline", timeline_path}});
    const run::ScenarioLoader loader =
        run::ScenarioLoader::from_file(scenario_path, {}, base_sets, hf_config);
    const nlohmann::json& doc = loader.document();
    base_sets = loader.overrides();  // --hf-config's model first, then --set
    opt.cancel = cancel_flag();
    {
      std::string outputs = json_path;
      if (!timeline_path.empty()) outputs += (outputs.empty() ? "" : " and ") + timeline_path;
      say_on_interrupt("simrun tune",
                       "stopping the search; the layouts ranked so far are printed" +
                           (json_path.empty() ? std::string() : " and written to " + json_path),
                       outputs.empty() ? std::string("the ranking so far is not printed")
                                       : "nothing written to " + outputs);
    }
    if (!quiet)
      opt.on_progress = [&err, last = std::chrono::steady_clock::time_point{}](
                            std::size_t done, std::size_t n, double best) mutable {
        const auto now = std::chrono::steady_clock::now();
        if (now - last < std::chrono::seconds(2) && done < n) return;  // a line every 2 s
        last = now;
        char line[200];
        std::snprintf(line, sizeof line,
                      "tune: %zu %% (%zu simulated of at most %zu: the compute bound ends the "
                      "search early), best %.2f ms\n",
                      n > 0 ? 100 * done / n : std::size_t{100}, done, n, best * 1e3);
        err << line;
      };
    const sweep::TuneResult r = sweep::tune(doc, scenario_path, base_sets, opt);
    sweep::print_tune_report(r, top, rejected, out);
    if (const std::vector<std::size_t> rank = r.ranking();
        !timeline_path.empty() && !rank.empty()) {
      // The timeline on request (docs/sweep.md, "Tune"): the best layout through run(), as simrun
      // -o would write it.
      const sweep::TuneCandidate& best = r.candidates[rank.front()];
      const core::Scenario sc = run::load_scenario_document(doc, scenario_path, best.sets);
      core::check_trace_limit(sc);
      run::RunRequest rq;
      rq.scenario = &sc;
      rq.control.cancel = cancel_flag();
      const run::RunResult run = run::run(rq);
      set_writing(true);
      prof::write_chrome_trace_file(run.trace, timeline_path);
      set_writing(false);
      if (!quiet) out << "timeline of " << best.label << ": " << timeline_path << "\n";
    }
    if (!json_path.empty()) {
      set_writing(true);
      prof::write_file_atomically(json_path, [&](std::ostream& f) {
        f << sweep::tune_report_json(r, std::max(top, 1)).dump(2) << "\n";
      });
      set_writing(false);
    }
    return r.complete ? kExitOk : kExitInterrupted;
  });
}

}  // namespace csim::app
