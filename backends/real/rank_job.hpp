// What a rank of launch mode processes is given (docs/real-execution.md, "Processes"): the
// launcher starts each rank by exec of the rank executable (csim-rank, tools/csim_rank.cpp), never
// by a bare fork of itself, and hands it this job through an inherited file descriptor: the
// Program to run (program_codec.hpp), which device runtime to build and what it needs, and the
// real executor's options. The rank rebuilds nothing: it runs the very Program the launcher
// lowered (or imported from a profiler trace).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backends/real/real_executor.hpp"
#include "core/program/program.hpp"

namespace csim::real {

enum class RankRuntime : std::uint8_t {
  kStandin,  // the CPU stand-in device (standin_runtime.hpp), busy for standin_busy_ns
  kCuda,     // the CUDA backend module, loaded by the rank
};

struct RankSetup {
  RankRuntime runtime = RankRuntime::kStandin;
  std::vector<TimeNs> standin_busy_ns;  // kStandin: per op, from the launcher's simulation
  double time_scale = 1.0;              // kStandin: durations x this
  RealOptions options;                  // the real executor's (the emulated GIL)
  int heartbeat_ms = 200;               // each rank says it is alive this often
};

// The job's bytes: a header (a magic, the format version, the sizes of the wire's records, so
// that a rank executable of another build refuses it with one line), the setup, the Program.
std::string encode_rank_job(const core::Program& program, const RankSetup& setup);
// False, with *why one line, for bytes that are not a job of this build.
bool decode_rank_job(std::string_view bytes, core::Program* program, RankSetup* setup,
                     std::string* why);

// The rank executable's command line: csim-rank --coordinator HOST:PORT --rank R
// --clock-zero-ns Z --job-fd FD (the job's bytes are read from FD, inherited from the launcher).
struct RankArgs {
  std::string host = "127.0.0.1";
  int port = 0;
  int rank = 0;
  std::int64_t clock_zero_ns = 0;  // the launcher's steady-clock origin (CLOCK_MONOTONIC)
  int job_fd = -1;
};
std::vector<std::string> rank_argv(const std::string& exe, const RankArgs& a);
// False, with *why one line, for anything else (the usage is in the line).
bool parse_rank_args(int argc, const char* const* argv, RankArgs* a, std::string* why);
// The whole content of `fd` from offset 0 (pread: the ranks share one open file).
bool read_job_fd(int fd, std::string* bytes, std::string* why);

}  // namespace csim::real
