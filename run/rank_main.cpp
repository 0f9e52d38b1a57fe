// run/rank_main.hpp.
#include "run/rank_main.hpp"

#include <signal.h>

#include <cstdio>
#include <memory>

#include "backends/common/module_loader.hpp"
#include "backends/real/coordinator.hpp"
#include "backends/real/rank_link.hpp"
#include "backends/real/standin_runtime.hpp"
#include "core/error.hpp"
#include "run/run.hpp"
#ifdef CSIM_CUDA_MODULE
#include "run/cuda_loader.hpp"
#endif

namespace csim::run {

std::string find_rank_executable(std::string* why) {
  backend::ModuleSpec spec;
  spec.what = "the rank executable";
  spec.file = kRankExecutable;
  spec.env_var = kRankExecutableEnv;
  return backend::find_module_file(spec, why);
}

real::RuntimeFactory rank_runtime_factory(const real::RankSetup& setup) {
  return [&setup](real::RankLink& link) -> std::unique_ptr<real::DeviceRuntime> {
    if (setup.runtime == real::RankRuntime::kStandin) {
      auto sr = std::make_unique<real::StandinRuntime>(setup.standin_busy_ns,
                                                       real::StandinOptions{setup.time_scale});
      sr->set_rendezvous(
          [&link](int instance, TimeNs start) { return link.arrive(instance, start); });
      return sr;
    }
#ifdef CSIM_CUDA_MODULE
    cuda::CudaOptions co;
    co.cupti = false;  // CUPTI per rank is not merged yet: --cupti runs in launch mode threads
    co.shared_nccl_id = [&link](int group, const std::function<std::string()>& make) {
      return link.shared_blob(group, make);
    };
    return require_cuda_module().make_runtime(co);
#else
    (void)link;
    throw BackendUnavailable(cuda_status_line() + "; use --backend sim or --backend standin");
#endif
  };
}

int rank_main(int argc, const char* const* argv) {
  // Ctrl-C at a terminal reaches the whole process group, the ranks too: a rank stops when its
  // launcher, which took the interrupt as a cancel, tells it to (its abort), keeping what
  // finished, not by dying at once.
  ::signal(SIGINT, SIG_IGN);
  real::RankArgs args;
  std::string why, bytes;
  core::Program program;
  real::RankSetup setup;
  if (!real::parse_rank_args(argc, argv, &args, &why) ||
      !real::read_job_fd(args.job_fd, &bytes, &why) ||
      !real::decode_rank_job(bytes, &program, &setup, &why)) {
    std::fprintf(stderr, "csim-rank: %s\n", why.c_str());
    return kExitBadInput;
  }
  bytes = std::string();  // the Program is decoded: the job's bytes are not needed any more
  const real::RuntimeFactory factory = rank_runtime_factory(setup);
  return real::run_rank(args.host, args.port, args.rank, args.clock_zero_ns, program, factory,
                        setup.options, core::RunControl{}, setup.heartbeat_ms);
}

}  // namespace csim::run
