// Block-level (summary-only) evaluation benchmark (not a test; docs/block-eval.md, "Speed"): CPU
// time per evaluation of the block path and of the op-level simulator on the 3D workloads (issue
// 17's target: under 5 ms for GPT-3 175B on 1,024 GPUs at batch 1,536), lowering timed apart,
// with the three figures of both paths and their differences. Prints a table; figures are quoted
// as measured, never asserted.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "backends/block/block_eval.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "run/allocator.hpp"

namespace {

using namespace csim;

const char* kHelp =
    "bench_block_eval: CPU ms per evaluation, block path vs op-level simulator\n"
    "\n"
    "usage: bench_block_eval [--reps N] [--no-op-level] [--sweep-only] [--program-digest]\n"
    "                        [--markdown-accuracy | --markdown-speed]\n"
    "                        [SCENARIO.json [key=value ...]] ...\n"
    "\n"
    "  --reps N        evaluations of the block path per scenario (default 20); the op-level\n"
    "                  simulator and the lowering run once each\n"
    "  --no-op-level   skip the op-level simulation (no accuracy columns)\n"
    "  --sweep-only    only the sweep's evaluation (block::evaluate_scenario), N times: its CPU "
    "ms\n"
    "                  and its exact figures (step and exposed ns, every GPU's peak bytes, the\n"
    "                  OOM verdict; why the whole Program was lowered where it was), to\n"
    "                  profile it alone and to compare two builds' figures\n"
    "  --program-digest  per scenario, the lowered Program's op count and a digest of every\n"
    "                  field of every op (its name as text, its deps), its groups, streams,\n"
    "                  threads and rank symmetry: two builds whose digests\n"
    "                  agree lowered the same Program\n"
    "  --markdown-accuracy  docs/block-eval.md's accuracy table (no timings; deterministic;\n"
    "                  adds the pipeline, ZeRO-3, FSDP and FSDP2 (x PP, FP8) scenarios)\n"
    "  --markdown-speed     docs/block-eval.md's speed table (CPU ms, as measured)\n"
    "  --help          this text\n"
    "\n"
    "Without a scenario: the bundled 3D scenarios and GPT-3 175B at global batch 1,536.\n"
    "Columns: lower_ms (core::lower), scan_ms (one pass over the ops reading the fields the\n"
    "block path needs: the floor of any evaluator of the Program), block_ms (block::evaluate,\n"
    "mean of N), sweep_ms (block::evaluate_scenario, what a sweep runs per variant: lowering\n"
    "included, two short pipelines where the periodic steady state applies; mean of N), op_ms\n"
    "(block::evaluate_op_level), and the step time, largest peak and exposed communication\n"
    "(the summary's sum over GPUs per step), op-level -> block path, with the difference in %.\n"
    "The largest peak is compared here; tests/test_block_eval.cpp compares every GPU's.\n";

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// The floor of any evaluator that reads the Program: one pass over the ops touching the fields the
// block path needs (docs/block-eval.md, "Speed").
double scan_ms(const core::Program& p, int reps) {
  const double t = cpu_ms();
  std::int64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    for (const core::Op& op : p.ops) {
      sink += op.stream + static_cast<std::int64_t>(op.deps.size()) + op.python_ns +
              op.dispatch_ns + op.bytes + static_cast<std::int64_t>(op.flops) + op.step;
    }
  }
  const double ms = (cpu_ms() - t) / reps;
  if (sink == 42) std::printf(" ");
  return ms;
}

double pct(double a, double b) {
  return b != 0 ? 100.0 * (a - b) / b : 0.0;
}

struct Case {
  std::string scenario;
  std::vector<std::string> sets;
};

enum class Format { kText, kAccuracy, kSpeed };

std::string name_of(const Case& c) {
  std::string name = c.scenario;
  for (const std::string& s : c.sets) name += " " + s;
  return name;
}

std::string fmt(const char* f, double a, double b, double c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

std::string path_of(const Case& c) {
  return c.scenario.find('/') == std::string::npos
             ? std::string(CSIM_SOURCE_DIR) + "/scenarios/" + c.scenario
             : c.scenario;
}

// --sweep-only: what a sweep pays per variant, and its figures to the nanosecond and byte.
void run_sweep_only(const Case& c, int reps) {
  const core::Scenario sc = core::parse_scenario_file(path_of(c), c.sets);
  block::EvalResult r;
  const double t = cpu_ms();
  for (int i = 0; i < reps; ++i) r = block::evaluate_scenario(sc);
  const double sweep_ms = (cpu_ms() - t) / reps;
  std::printf("%s: sweep_ms %.2f  %s", name_of(c).c_str(), sweep_ms, block::to_string(r.path));
  if (r.periodic())
    std::printf(" (periodic: m %d, %d)", r.periodic_micro_batches[0], r.periodic_micro_batches[1]);
  else
    std::printf(" (whole: %s)", r.periodic_reason.c_str());
  if (r.oom)
    std::printf("  oom GPU %d at '%s'%s", r.oom->gpu, r.oom->op_name.c_str(),
                r.oom->steady_state ? " (steady state)" : "");
  std::printf("  step_ns %lld exposed_ns %lld peaks", static_cast<long long>(r.step_time_ns),
              static_cast<long long>(r.exposed_comm_ns));
  for (const block::GpuPeak& g : r.peaks)
    std::printf(" %d:%lld", g.gpu, static_cast<long long>(g.peak_bytes));
  std::printf("\n");
}

// --program-digest: FNV-1a over every field of every op, in order.
struct Digest {
  std::uint64_t h = 1469598103934665603ull;
  template <typename T>
  void add(const T& v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    for (unsigned char x : b) h = (h ^ x) * 1099511628211ull;
  }
  void add_str(const std::string& s) {
    add(s.size());
    for (unsigned char x : s) h = (h ^ x) * 1099511628211ull;
  }
};

void run_program_digest(const Case& c) {
  const core::Scenario sc = core::parse_scenario_file(path_of(c), c.sets);
  const core::Program p = core::lower(sc);
  Digest d;
  std::string name;
  for (const core::Op& op : p.ops) {
    name.clear();
    p.append_name(op, name);
    d.add_str(name);
    d.add(op.id);
    d.add(op.kind);
    d.add(op.thread);
    d.add(op.stream);
    d.add(op.gpu);
    d.add(op.step);
    d.add(op.python_ns);
    d.add(op.dispatch_ns);
    d.add(op.deps.size());
    for (const core::Dep& dep : op.deps) {
      d.add(dep.op);
      d.add(dep.kind);
    }
    // As 4-byte ints, their width before Op was packed (core/program/program.hpp): digests stay
    // comparable with earlier binaries'.
    d.add(static_cast<std::int32_t>(op.compute_kind));
    d.add(static_cast<std::int32_t>(op.dtype));
    d.add(op.flops);
    d.add(op.max_efficiency);
    d.add(op.gemm.batch);
    d.add(op.gemm.m);
    d.add(op.gemm.n);
    d.add(op.gemm.k);
    d.add(op.gemm_pass);
    d.add(op.bytes);
    d.add(op.copy_kind);
    d.add(op.peer_gpu);
    d.add(op.collective);
    d.add(op.algo);
    d.add(op.group);
    d.add(op.root);
    d.add(op.instance);
    d.add(op.mem_category);
    d.add(op.record_stream);
    d.add(op.fixed_ns);
    d.add(op.batch);
    d.add(op.phase);
  }
  d.add(p.names.size());
  // The Program's structure: groups, streams, threads, the rank symmetry.
  for (const core::CommGroup& g : p.groups) {
    d.add_str(g.name);
    for (int gpu : g.gpus) d.add(gpu);
  }
  for (const core::StreamDesc& st : p.streams) {
    d.add(st.gpu);
    d.add(st.role);
    d.add_str(st.name);
  }
  for (const core::ThreadDesc& t : p.threads) {
    d.add(t.process);
    d.add(t.gpu);
    d.add_str(t.name);
  }
  for (const std::vector<int>& img : p.symmetry.images)
    for (int g : img) d.add(g);
  for (int w : p.symmetry.weight_of_gpu) d.add(w);
  d.add(p.collective_instances);
  std::printf("%s: %zu ops, %zu names, digest %016llx\n", name_of(c).c_str(), p.ops.size(),
              p.names.size(), static_cast<unsigned long long>(d.h));
}

void run_case(const Case& c, int reps, bool op_level, Format format) {
  const core::Scenario sc = core::parse_scenario_file(path_of(c), c.sets);
  double t = cpu_ms();
  const core::Program p = core::lower(sc);
  const double lower_ms = cpu_ms() - t;
  block::EvalResult fast;
  t = cpu_ms();
  for (int i = 0; i < reps; ++i) fast = block::evaluate(sc, p);
  const double block_ms = (cpu_ms() - t) / reps;
  const double read_ms = format == Format::kAccuracy ? 0.0 : scan_ms(p, reps);
  // What a sweep evaluates (docs/block-eval.md, "Periodic steady state"); its figures are the
  // ones compared when it is periodic.
  block::EvalResult swept;
  t = cpu_ms();
  for (int i = 0; i < reps; ++i) swept = block::evaluate_scenario(sc);
  const double sweep_ms = (cpu_ms() - t) / reps;
  if (swept.periodic()) fast = swept;
  char periodic[64] = "";
  if (swept.periodic())
    std::snprintf(periodic, sizeof periodic, " (periodic: m %d, %d)",
                  swept.periodic_micro_batches[0], swept.periodic_micro_batches[1]);
  const std::string name = name_of(c);
  block::EvalResult ref;
  double op_ms = 0;
  if (op_level) {
    t = cpu_ms();
    ref = block::evaluate_op_level(sc, p);
    op_ms = cpu_ms() - t;
  }
  const double gib = static_cast<double>(kGiB);
  const double step_err =
      pct(static_cast<double>(fast.step_time_ns), static_cast<double>(ref.step_time_ns));
  const double exposed_err =
      pct(static_cast<double>(fast.exposed_comm_ns), static_cast<double>(ref.exposed_comm_ns));
  double peak_err = 0;  // the largest over GPUs
  for (std::size_t k = 0; k < fast.peaks.size() && k < ref.peaks.size(); ++k) {
    const double e = pct(static_cast<double>(fast.peaks[k].peak_bytes),
                         static_cast<double>(ref.peaks[k].peak_bytes));
    if (std::fabs(e) > std::fabs(peak_err)) peak_err = e;
  }
  if (format == Format::kAccuracy) {
    std::printf(
        "| %s | %s%s | %s | %s | %s |\n", name.c_str(), block::to_string(fast.path), periodic,
        fmt("%.4f → %.4f s (%+.3f %%)", ref.step_time_ns * 1e-9, fast.step_time_ns * 1e-9, step_err)
            .c_str(),
        fmt("%.3f → %.3f (%+.3f %%)", static_cast<double>(ref.max_peak_bytes()) / gib,
            static_cast<double>(fast.max_peak_bytes()) / gib, peak_err)
            .c_str(),
        fmt("%.4f → %.4f s (%+.3f %%)", ref.exposed_comm_ns * 1e-9, fast.exposed_comm_ns * 1e-9,
            exposed_err)
            .c_str());
    return;
  }
  if (format == Format::kSpeed) {
    std::printf("| %s | %zu | %.1f | %.2f | %.2f | %.2f%s | %.0f | %.0f× |\n", name.c_str(),
                p.ops.size(), lower_ms, read_ms, block_ms, sweep_ms, periodic, op_ms,
                sweep_ms > 0 ? op_ms / sweep_ms : 0.0);
    return;
  }
  std::printf("%-58s %9zu %9.1f %9.2f %9.2f %9.2f", name.c_str(), p.ops.size(), lower_ms, read_ms,
              block_ms, sweep_ms);
  if (!op_level) {
    std::printf("  %s%s step %.4f s %s\n", block::to_string(fast.path), periodic,
                fast.step_time_ns * 1e-9, fast.fallback_reason.c_str());
    return;
  }
  std::printf(
      " %9.1f  %-8s step %.4f -> %.4f s (%+.3f%%)  peak %.3f -> %.3f GiB (%+.3f%%)  "
      "exposed %.4f -> %.4f s (%+.3f%%) %s%s\n",
      op_ms, block::to_string(fast.path), ref.step_time_ns * 1e-9, fast.step_time_ns * 1e-9,
      step_err, static_cast<double>(ref.max_peak_bytes()) / gib,
      static_cast<double>(fast.max_peak_bytes()) / gib, peak_err, ref.exposed_comm_ns * 1e-9,
      fast.exposed_comm_ns * 1e-9, exposed_err, fast.fallback_reason.c_str(), periodic);
}

}  // namespace

int main(int argc, char** argv) {
  csim::run::configure_allocator();  // as simrun does (run/allocator.hpp)
  int reps = 20;
  bool op_level = true, sweep_only = false, digest = false;
  Format format = Format::kText;
  std::vector<Case> cases;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--no-op-level") == 0) {
      op_level = false;
    } else if (std::strcmp(argv[i], "--sweep-only") == 0) {
      sweep_only = true;
    } else if (std::strcmp(argv[i], "--program-digest") == 0) {
      digest = true;
    } else if (std::strcmp(argv[i], "--markdown-accuracy") == 0) {
      format = Format::kAccuracy;
      reps = 1;
    } else if (std::strcmp(argv[i], "--markdown-speed") == 0) {
      format = Format::kSpeed;
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "bench_block_eval: unknown option '%s' (see --help)\n", argv[i]);
      return 2;
    } else if (std::strchr(argv[i], '=') != nullptr && !cases.empty()) {
      cases.back().sets.push_back(argv[i]);
    } else {
      cases.push_back({argv[i], {}});
    }
  }
  if (cases.empty()) {
    cases = {{"gpt_20b_64xa100_3d.json", {}},
             {"llama3_70b_512xh100_3d.json", {}},
             {"gpt3_175b_1024xa100_3d.json", {}},
             {"gpt_1t_3072xa100_3d.json", {}},
             {"gpt3_175b_1024xa100_3d.json", {"training.global_batch=1536"}}};
    if (format == Format::kAccuracy) {
      cases.push_back({"gpt_pipeline_8xa100.json", {}});
      cases.push_back({"gpt_20b_64xa100_zero3.json", {}});
      cases.push_back({"gpt_20b_64xa100_zero3.json", {"training.global_batch=256"}});
      cases.push_back({"llama3_8b_64xh100_fsdp.json", {}});
      // The two layouts the block path refused until main 3bdb1dc (docs/block-eval.md, "Scope").
      cases.push_back({"llama3_1_405b_512xh100_3d.json", {}});
      cases.push_back({"llama3_1_405b_512xh100_3d.json", {"training.global_batch=256"}});
      cases.push_back({"llama3_1_8b_8xh100_fsdp2_fp8.json", {}});
      // Context parallelism (issue 33): every cp_comm, and CP x TP x FSDP2 across nodes.
      cases.push_back({"llama3_1_8b_8xh100_cp8_p2p.json", {}});
      cases.push_back({"llama3_1_8b_8xh100_cp8_all_gather.json", {}});
      cases.push_back({"llama3_1_8b_8xh100_cp8_a2a.json", {}});
      cases.push_back({"llama3_1_8b_8xh100_cp8_p2p.json",
                       {"strategy.cp=4", "strategy.cp_comm=a2a+p2p", "strategy.cp_a2a=2",
                        "training.global_batch=2"}});
      cases.push_back({"llama3_1_70b_64xh100_tp8_cp2_fsdp2.json", {}});
    }
  }
  if (digest) {
    for (const Case& c : cases) run_program_digest(c);
    return 0;
  }
  if (sweep_only) {
    for (const Case& c : cases) run_sweep_only(c, reps);
    return 0;
  }
  if (format == Format::kAccuracy) {
    std::printf(
        "| scenario | path | step time, op-level → block | largest peak GiB (worst GPU) | "
        "exposed comm, op-level → block |\n| --- | --- | --- | --- | --- |\n");
  } else if (format == Format::kSpeed) {
    std::printf(
        "| scenario | ops | lowering ms | read the ops ms | block path ms | sweep evaluation ms | "
        "op-level ms | speed-up |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  } else {
    std::printf("%-58s %9s %9s %9s %9s %9s %9s  figures (block path, vs op-level)\n", "scenario",
                "ops", "lower_ms", "scan_ms", "block_ms", "sweep_ms", "op_ms");
  }
  for (const Case& c : cases) run_case(c, reps, op_level, format);
  return 0;
}
