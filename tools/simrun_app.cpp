#include "tools/simrun_app.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>

#include "backends/common/run_summary.hpp"
#include "backends/common/trace_builder.hpp"
#include "core/error.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/atomic_file.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/per_rank_traces.hpp"
#include "profiler/rank_symmetry.hpp"
#include "profiler/summary.hpp"
#include "run/mpi_launch.hpp"
#include "run/scenario_loader.hpp"
#include "tools/calibrate.hpp"
#include "tools/collective_cli.hpp"
#include "tools/compare.hpp"
#include "tools/hpo.hpp"
#include "tools/oom_advice.hpp"
#include "tools/replay_cli.hpp"
#include "tools/run_progress.hpp"
#include "tools/signals.hpp"
#include "tools/sweep_cli.hpp"

namespace csim::app {
namespace {

constexpr const char* kExitCodes = R"(
Exit codes:
  0    ok
  1    internal error (a bug: please report it with the scenario)
  2    bad input: scenario, --set override, option or output path (one line names the file,
       JSON path or option and the fix or OS error); inputs (missing, a directory, binary,
       JSON nested past 256 levels) and outputs are checked before any work, nothing is
       written (docs/limits.md, "Bad input")
  3    backend unavailable (e.g. --backend cuda on a machine without a GPU or CUDA build)
  4    OOM verdict, with --fail-on-oom (a GPU's peak memory exceeds its usable memory)
  5    real run failed (a rank died or hung): outputs keep what completed, marked incomplete
  130  interrupted (Ctrl-C / SIGTERM): outputs keep the steps that completed, marked
       incomplete ("complete": false), announced before they are written; a second Ctrl-C
       exits at once and says which outputs are lost; no half-written output is left behind
)";

}  // namespace

const run::MpiLauncher* mpi_support() {
#ifdef CSIM_HAVE_MPI
  return &run::mpi_launcher();
#else
  return nullptr;
#endif
}

run::Backend backend_of(const std::string& name) {
  run::Backend b = run::Backend::kSim;
  if (!run::parse_backend(name, &b))
    throw InputError("(command line)", "--backend", "unknown backend '" + name + "'",
                     "sim, standin or cuda");
  return b;
}

run::Launch launch_of(const std::string& name) {
  run::Launch l = run::Launch::kThreads;
  if (!run::parse_launch(name, &l))
    throw InputError("(command line)", "--launch", "unknown launch mode '" + name + "'",
                     "threads, processes or mpi");
  return l;
}

void add_hf_config_option(CLI::App& app, std::string& path) {
  app.add_option(
      "--hf-config", path,
      "replace the scenario's model with this Hugging Face config.json (path relative to the "
      "working directory), keeping the scenario's seq_len; applied before the --set ones (e.g. "
      "--set model.seq_len=8192); docs/scenario.md, \"model.hf_config\"");
}

namespace {

// Options of the real backends given with the simulator (docs/real-execution.md): refused rather
// than ignored, since a user who typed them expected them to change something (docs/limits.md,
// "Exit codes"). --cupti is the exception: a warning (a CUPTI trace is an addition, not a mode).
void refuse_real_only_options(const CLI::App& app) {
  struct RealOnly {
    const char* option;
    const char* what;
  };
  for (const RealOnly& r :
       {RealOnly{"--ranks", "runs one GPU for real"},
        RealOnly{"--launch",
                 "launches the real backends' ranks (threads, processes or mpi); the simulator "
                 "launches nothing: the launch it models is the scenario's (strategy.kind, "
                 "strategy.ddp.launcher)"},
        RealOnly{"--time-scale", "stretches the stand-in's ops; the simulator has none"},
        RealOnly{"--no-gil-emulation",
                 "turns off the real backends' GIL mutex; the simulated GIL is the scenario's "
                 "host.gil"}}) {
    if (app.count(r.option) > 0)
      throw InputError("(command line)", r.option,
                       std::string("applies to the real backends only: it ") + r.what,
                       "add --backend standin (CPU stand-in) or --backend cuda, or drop it");
  }
}

// What --per-rank wrote (docs/trace-format.md, "Per-rank files"). The simulated GPUs' files only
// are always said, even with -q: the folder then holds fewer files than the run has ranks.
void report_per_rank(const prof::PerRankResult& r, const std::string& dir, int steps, bool quiet,
                     std::ostream& out, std::ostream& err) {
  std::size_t mirrored = 0, standing = 0;
  std::vector<int> ranks;
  for (const prof::PerRankFile& f : r.files) {
    mirrored += f.mirrored ? 1 : 0;
    standing += f.stands_for.size() > 1 ? 1 : 0;
    ranks.push_back(f.rank);
  }
  if (standing > 0) {
    err << "simrun: --per-rank-representatives: " << r.files.size() << " files in " << dir
        << " for " << r.world_size << " ranks: ";
    for (std::size_t i = 0; i < r.files.size() && i < 3; ++i)
      err << (i ? "; " : "") << "rank-" << r.files[i].rank << ".json stands for ranks "
          << prof::rank_ranges(r.files[i].stands_for);
    err << (r.files.size() > 3 ? "; ..." : "")
        << " (clustersim.rank_symmetry.stands_for in each file); HTA reads " << r.files.size()
        << " ranks: without --per-rank-representatives every rank gets its file\n";
  } else if (!quiet) {
    out << "per-rank: " << r.files.size() << " files in " << dir << " (ranks "
        << prof::rank_ranges(ranks) << ")";
    if (mirrored > 0)
      out << ", " << mirrored << " of them mirrored GPUs written from their simulated "
          << "representative's events";
    out << "\n";
  }
  if (steps < 3 && !quiet)
    err << "simrun: note: Holistic Trace Analysis leaves out a trace's last ProfilerStep: with "
        << steps << (steps == 1 ? " step" : " steps") << " it analyses " << steps - 1
        << "; --set training.steps=3 gives it two (docs/trace-format.md, \"Holistic Trace "
           "Analysis\")\n";
}

}  // namespace

int simrun_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (!args.empty() && args.front() == "compare")
    return compare_main(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  if (!args.empty() && args.front() == "calibrate")
    return calibrate_main(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  if (!args.empty() && args.front() == "hpo")
    return hpo_main(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  if (!args.empty() && args.front() == "sweep")
    return sweep_main(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  if (!args.empty() && args.front() == "collective")
    return collective_main(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  if (!args.empty() && args.front() == "replay")
    return replay_main(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  if (!args.empty() && args.front() == "tune")
    return tune_main(std::vector<std::string>(args.begin() + 1, args.end()), out, err);
  CLI::App app{
      "simrun: simulate a training scenario and print its summary; optionally write the trace "
      "(Chrome/Perfetto JSON, Kineto conventions) and a summary JSON.\n"
      "Example: simrun scenarios/dp_vs_ddp_4x1080ti.json --set strategy.kind=ddp -o ddp.json\n"
      "Also: simrun compare SCENARIO --backend cuda|standin (simulated vs real; see "
      "simrun compare --help); simrun calibrate SCENARIO (measure the GPU, write a device "
      "profile; see simrun calibrate --help); simrun hpo SCENARIO --space KEY=V1,V2 --trials N "
      "(cost a hyper-parameter search, FIFO or ASHA; see simrun hpo --help); simrun sweep "
      "SCENARIO --grid KEY=V1,V2 (every variant, best first); simrun tune SCENARIO (the fastest "
      "parallel layout that fits); simrun collective CLUSTER --op all_reduce -b 1M -e 8G (one "
      "collective as nccl-tests runs it; see simrun collective --help)",
      "simrun"};
  std::string scenario_path, trace_path, per_rank_dir, summary_path, backend = "sim";
  std::string device_profile;
  std::vector<std::string> overrides;
  bool fail_on_oom = false, quiet = false;
  app.add_option("scenario", scenario_path, "scenario JSON file (docs/scenario.md)")->required();
  app.add_option("-o,--output", trace_path,
                 "write the trace (Chrome Trace Event JSON) to this file");
  app.add_option("--per-rank", per_rank_dir,
                 "also write one Kineto-style trace per rank into this directory (every rank, "
                 "rank symmetry's mirrored GPUs included; docs/trace-format.md, \"Per-rank "
                 "files\")");
  bool per_rank_reps = false;
  app.add_flag("--per-rank-representatives", per_rank_reps,
               "with --per-rank on a run simulated with rank symmetry: write only the simulated "
               "GPUs' files, each naming the ranks it stands for (for runs too large to write "
               "every rank: limits.max_per_rank_events, docs/limits.md)");
  app.add_option("--summary", summary_path, "write the summary as JSON to this file");
  app.add_option("--set", overrides,
                 "override a scenario value: dotted.path=VALUE (VALUE read as JSON if it parses)");
  app.add_option("--device-profile", device_profile,
                 "apply a device profile's overrides (simrun calibrate -o FILE) before the --set "
                 "ones");
  std::string hf_config;
  add_hf_config_option(app, hf_config);
  std::string launch = "threads";
  run::RunRequest rq;
  app.add_option("--backend", backend,
                 "executor: sim (default); cuda (real GPUs); standin (the real executor on CPU "
                 "threads standing in for GPUs, durations from the simulator)")
      ->check(CLI::IsMember({"sim", "cuda", "standin"}));
  app.add_option("--launch", launch,
                 "real backends: threads (one process, one thread per GPU), processes (one "
                 "process per Program process, coordinated over loopback TCP) or mpi (under "
                 "mpirun -np <processes>: one MPI rank per Program process, any number of nodes)")
      ->check(CLI::IsMember({"threads", "processes", "mpi"}));
  app.add_flag("--cupti", rq.cupti,
               "cuda: trace every kernel, memcpy and NCCL launch with CUPTI (lanes 'CUPTI stream "
               "S', each mapped to its op) and sample NVML utilisation counters");
  app.add_option("--time-scale", rq.time_scale,
                 "standin: run each op for its simulated duration x this")
      ->check(CLI::Range(1e-3, 1e3));
  app.add_option("--ranks", rq.rank,
                 "real backends: run only this GPU's ops for real, the rest of the cluster "
                 "simulated (its collectives become their simulated durations)")
      ->check(CLI::Range(0, (1 << 20) - 1));
  bool no_gil = false;
  app.add_flag("--no-gil-emulation", no_gil,
               "real backends: do not serialise Python time with an emulated GIL");
  app.add_flag("--fail-on-oom", fail_on_oom, "exit with 4 when the OOM verdict is not empty");
  bool no_advice = false;
  app.add_flag("--no-advice", no_advice,
               "with an OOM verdict, do not re-simulate the usual fixes (smaller micro-batches, "
               "recompute, ZeRO, more stages, a bigger GPU, DDP) to rank them");
  app.add_flag("-q,--quiet", quiet, "do not print the summary table nor the progress line");
  bool progress_lines = false;
  app.add_flag("--progress", progress_lines,
               "print the progress line on stderr even when it is not a terminal (a line a "
               "second; on a terminal it is redrawn in place by default)");
  bool expand_mirrors = false;
  app.add_flag("--expand-mirrors", expand_mirrors,
               "rank symmetry: give every mirrored GPU its representative's events in the written "
               "trace (docs/cost-model.md, \"Rank symmetry\")");
  app.footer(kExitCodes);
  if (const int code = parse_command_line(app, args, "simrun", out, err); code >= 0) return code;
  return run_command("simrun", err, [&]() -> int {
    check_output_files({{"-o", trace_path}, {"--summary", summary_path}});
    if (!per_rank_dir.empty()) prof::check_output_dir("--per-rank", per_rank_dir);
    rq.backend = backend_of(backend);
    if (rq.backend == run::Backend::kSim) refuse_real_only_options(app);
    // The scenario as loaded (device profile, then --set); OOM advice adds further --set values.
    const run::ScenarioLoader loader =
        run::ScenarioLoader::from_file(scenario_path, device_profile, overrides, hf_config);
    const core::Scenario scenario = loader.load();
    const bool writes_trace = !trace_path.empty() || !per_rank_dir.empty();
    if (writes_trace) core::check_trace_limit(scenario);
    if (!per_rank_dir.empty() && !per_rank_reps) core::check_per_rank_limit(scenario);
    rq.scenario = &scenario;
    rq.launch = launch_of(launch);
    rq.mpi = mpi_support();
    rq.control.cancel = cancel_flag();
    if (rq.cupti && rq.backend != run::Backend::kCuda)
      err << "simrun: warning: --cupti traces --backend cuda only; ignored\n";
    rq.emulate_gil = !no_gil;
    // The summary is read from the trace where one is built; the simulator's summary alone needs
    // none (backend::summarize_run, docs/summary.md "Without a trace"): the trace is built for
    // -o and --per-rank, and for a real run's summary.
    const bool wants_summary = !summary_path.empty() || !quiet;
    rq.trace = writes_trace || (wants_summary && rq.backend != run::Backend::kSim);
    // A simulated trace that is only written to -o (no per-rank files, no mirrors to expand) is
    // formatted while it is built (docs/trace-format.md, "Formatting while building"); its summary
    // is then the run's own (backend::summarize_run, the same Summary).
    rq.format_trace = rq.backend == run::Backend::kSim && !trace_path.empty() &&
                      per_rank_dir.empty() && !expand_mirrors;
    // The progress line (docs/limits.md, "Progress") through every phase; stopped while stdout
    // is printed.
    const ProgressMode mode = progress_mode(quiet, progress_lines);
    RunProgress progress(err, mode, "lowering");
    // Nothing counts when nothing is shown.
    core::Progress* const shown = mode == ProgressMode::kOff ? nullptr : &progress;
    rq.control.progress = shown;
    // What a Ctrl-C does and loses, said by the signal handler (tools/signals.hpp), in the order
    // the outputs are written below.
    InterruptNotes notes(
        "simrun", {{"-o", trace_path}, {"--per-rank", per_rank_dir}, {"--summary", summary_path}});
    notes.running();
    run::RunResult run = run::run(rq);
    if (!run.writer) {
      progress.stop();
      if (!quiet)
        out << "simrun: MPI rank " << run.mpi_rank
            << " finished its share; rank 0 prints the summary and writes the outputs\n";
      return kExitOk;
    }
    // Ctrl-C / SIGTERM: write what completed (whole steps, "complete": false), then exit 130.
    const bool interrupted = !run.result.complete && run.failure.empty();
    const prof::Summary summary =
        rq.trace && !run.trace_formatted ? prof::summarize(run.trace, shown)
        : wants_summary
            ? backend::summarize_run(scenario, run.program, run.result, run.memory, shown)
            : prof::Summary{};
    // An OOM verdict comes with ranked advice, each change re-simulated (docs/memory.md).
    std::vector<AdviceItem> advice;
    const bool advise = run.memory.oom && rq.backend == run::Backend::kSim && !no_advice &&
                        !quiet && !cancel_flag()->load();
    if (advise) advice = oom_advice(loader, scenario, rq.control);
    progress.stop();
    if (!quiet) prof::print_summary_table(summary, out);
    if (advise) print_oom_advice(advice, summary.step_time_s, out);
    if (expand_mirrors && writes_trace) {
      const int added = prof::expand_mirrored_gpus(run.trace);
      if (!quiet) out << "trace: " << added << " mirrored GPUs expanded\n";
    }
    for (const std::string& w : run.warnings) err << "simrun: warning: " << w << "\n";
    // A partial trace of a large run takes seconds to write: say so before (docs/limits.md):
    // "simrun: interrupted; writing the partial trace (3 of 12 steps) to t.json and the summary
    // to s.json...".
    if (interrupted && notes.any()) {
      const std::string steps = " (" +
                                std::to_string(backend::completed_steps(run.program, run.result)) +
                                " of " + std::to_string(run.program.steps) + " steps)";
      std::vector<std::string> parts;
      if (!trace_path.empty()) parts.push_back("trace" + steps + " to " + trace_path);
      if (!per_rank_dir.empty())
        parts.push_back("per-rank traces" + (parts.empty() ? steps : "") + " to " + per_rank_dir);
      if (!summary_path.empty())
        parts.push_back("summary" + (parts.empty() ? steps : "") + " to " + summary_path);
      err << "simrun: interrupted; writing the partial " << parts[0];
      for (std::size_t i = 1; i < parts.size(); ++i)
        err << (i + 1 == parts.size() ? " and the " : ", the ") << parts[i];
      err << "..." << std::endl;
    }
    std::size_t written = 0;
    progress.resume();
    set_writing(true);
    if (!trace_path.empty()) {
      notes.writing(written++);
      run::write_trace_file(run, scenario, trace_path, shown);
    }
    if (!per_rank_dir.empty()) {
      notes.writing(written++);
      report_per_rank(
          prof::write_per_rank_traces(run.trace, per_rank_dir,
                                      per_rank_reps ? prof::PerRankMirrors::kRepresentatives
                                                    : prof::PerRankMirrors::kEveryRank,
                                      shown),
          per_rank_dir, run.program.steps, quiet, out, err);
    }
    if (!summary_path.empty()) {
      notes.writing(written++);
      prof::write_file_atomically(summary_path, [&](std::ostream& os) {
        nlohmann::json j = prof::summary_to_json(summary);
        if (interrupted) j["complete"] = false;
        os << j.dump(2) << "\n";
      });
    }
    notes.done();
    set_writing(false);
    progress.stop();
    if (interrupted || cancel_flag()->load()) {
      const bool none = trace_path.empty() && summary_path.empty() && per_rank_dir.empty();
      if (interrupted)
        err << "simrun: interrupted after " << backend::completed_steps(run.program, run.result)
            << " of " << run.program.steps << " steps; "
            << (none ? "nothing to write" : "the outputs keep them, marked incomplete") << "\n";
      else
        err << "simrun: interrupted after the run finished; "
            << (none ? "nothing to write" : "the outputs are complete") << "\n";
      return kExitInterrupted;
    }
    if (!run.failure.empty()) {
      err << "simrun: real run failed: " << run.failure
          << (trace_path.empty() ? "" : "; the trace keeps what completed, marked incomplete")
          << "\n";
      return kExitRunFailed;
    }
    if (fail_on_oom && run.memory.oom) return kExitOom;
    return kExitOk;
  });
}

int parse_command_line(CLI::App& app, const std::vector<std::string>& args, const std::string& tool,
                       std::ostream& out, std::ostream& err) {
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    err << tool << ": " << e.what() << " (hint: " << tool << " --help)\n";
    return kExitBadInput;
  }
  return -1;
}

void check_output_files(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (const auto& [option, path] : outputs)
    if (!path.empty()) prof::check_output_file(option, path);
}

int run_command(const std::string& tool, std::ostream& err, const std::function<int()>& body) {
  try {
    return body();
  } catch (const InputError& e) {
    err << tool << ": " << e.what() << "\n";
    return kExitBadInput;
  } catch (const BackendUnavailable& e) {
    err << tool << ": backend unavailable: " << e.what() << "\n";
    return kExitBackendUnavailable;
  } catch (const std::exception& e) {
    set_writing(false);
    err << tool << ": error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace csim::app
