// simrun replay (docs/replay.md): wiring only.
#include "tools/replay_cli.hpp"

#include <CLI/CLI.hpp>

#include "core/error.hpp"
#include "replay/replay_run.hpp"
#include "run/run.hpp"
#include "tools/simrun_app.hpp"

namespace csim::app {

int replay_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "simrun replay: a PyTorch-profiler (Kineto) trace per rank becomes a Program that the "
      "simulator replays; prints per step measured vs replayed, per stream busy time and the "
      "import stats; --set changes the hardware or the host (docs/replay.md).\n"
      "Example: simrun replay rank0.json.gz --set cluster.gpu=H100-SXM5-80GB --explain",
      "simrun replay"};
  replay::ReplayRequest rq;
  std::string output, backend = "sim";
  bool explain = false;
  app.add_option("traces", rq.inputs, "trace files (.json or .json.gz), one per rank, or a folder")
      ->required();
  app.add_option("--set", rq.sets,
                 "what-if: cluster.gpu=NAME, host.gil=false, replay.python_scale=F, "
                 "replay.dispatch_scale=F, replay.source_gpu=NAME, replay.dp_scale=K, "
                 "cluster=FILE, cluster.gpus_per_node=G and other cluster.* keys (collectives "
                 "re-costed), "
                 "replay.source_gpus_per_node=G, or any scenario key");
  app.add_option("-o,--output", output, "write the replayed run's trace (Chrome JSON)");
  app.add_option("--backend", backend, "sim (default), standin or cuda");
  app.add_flag("--explain", explain, "list each kernel name's class and scaling rule");
  if (const int code = parse_command_line(app, args, "simrun replay", out, err); code >= 0)
    return code;
  return run_command("simrun replay", err, [&]() -> int {
    if (!run::parse_backend(backend, &rq.backend))
      throw csim::InputError("(command line)", "--backend", "unknown backend '" + backend + "'",
                             "sim, standin or cuda");
    rq.trace = !output.empty();
    const replay::ReplayOutcome o = replay::replay(rq);
    replay::print_replay(o, out, explain);
    if (!output.empty()) run::write_trace_file(o.run, o.scenario, output);
    return run::kExitOk;
  });
}

}  // namespace csim::app
