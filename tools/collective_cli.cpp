// simrun collective (docs/collective.md): wiring only.
#include "tools/collective_cli.hpp"

#include <CLI/CLI.hpp>

#include "core/scenario/scenario.hpp"
#include "run/collective_bench.hpp"
#include "tools/simrun_app.hpp"

namespace csim::app {

int collective_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{
      "simrun collective: one collective alone on a cluster, as nccl-tests runs it, timed by the "
      "simulator's collective cost model; prints nccl-tests' columns per size "
      "(docs/collective.md).\n"
      "Example: simrun collective scenarios/clusters/dgx_h100.json --op all_reduce -b 1M -e 8G "
      "-f 2 --gpus 16",
      "simrun collective"};
  run::CollectiveBenchRequest rq;
  std::string op = "all_reduce", algo = "auto", proto = "auto", min_b = "8", max_b = "128M";
  std::string step_b;
  int factor = 2;
  app.add_option("cluster", rq.cluster_path,
                 "cluster file: a scenario's \"cluster\" object (scenarios/clusters/*.json)")
      ->required();
  app.add_option("--op", op,
                 "all_reduce, all_gather, reduce_scatter, broadcast, reduce or alltoall "
                 "(default all_reduce)");
  app.add_option("-b,--minbytes", min_b, "smallest size, bytes with K/M/G suffix (default 8)");
  app.add_option("-e,--maxbytes", max_b, "largest size (default 128M)");
  app.add_option("-f,--stepfactor", factor, "multiply the size by this per row (default 2)");
  app.add_option("-i,--stepbytes", step_b, "add this many bytes per row instead of -f");
  std::string
      algos;  // the scenario's spellings, from the one enum table (core/scenario/scenario.cpp)
  for (const std::string& a : core::collective_algo_names())
    algos += (algos.empty() ? "" : ", ") + a;
  app.add_option("--algo", algo, "NCCL_ALGO: " + algos);
  app.add_option("--proto", proto, "NCCL_PROTO: auto, ll, ll128 or simple");
  app.add_option("--gpus", rq.gpus,
                 "ranks: whole nodes (a multiple of gpus_per_node) or GPUs of one node; default "
                 "every GPU of the cluster")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("-d,--dtype", rq.dtype, "nccl-tests data type (default float)");
  app.add_option("--set", rq.overrides,
                 "override a cluster value: cluster.KEY=VALUE (e.g. cluster.nodes=4)");
  if (const int code = parse_command_line(app, args, "simrun collective", out, err); code >= 0)
    return code;
  return run_command("simrun collective", err, [&]() -> int {
    rq.kind = run::parse_collective_op(op, "--op");
    rq.algo = run::parse_collective_algo(algo, "--algo");
    rq.proto = run::parse_collective_proto(proto, "--proto");
    rq.min_bytes = run::parse_collective_size(min_b, "-b");
    rq.max_bytes = run::parse_collective_size(max_b, "-e");
    rq.factor = step_b.empty() ? factor : 0;
    rq.step_bytes = step_b.empty() ? 0 : run::parse_collective_size(step_b, "-i");
    const run::CollectiveBenchResult r = run::run_collective_bench(rq);
    for (const std::string& w : r.warnings) err << "simrun collective: warning: " << w << "\n";
    run::print_collective_bench(rq, r, out);
    return kExitOk;
  });
}

}  // namespace csim::app
