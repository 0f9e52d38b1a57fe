// Synthetic Kineto traces for the replay tests (tests/test_replay*.cpp): events as Kineto writes
// them (µs), written to a scratch folder of this process, replayed through replay::replay().
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "replay/replay_run.hpp"

namespace csim::test {

// One Kineto event; `args` is JSON text without braces.
inline std::string ev(const std::string& cat, const std::string& name, long pid, long tid,
                      double ts, double dur, const std::string& args = "") {
  std::ostringstream o;
  o << R"({"ph":"X","cat":")" << cat << R"(","name":")" << name << R"(","pid":)" << pid
    << R"(,"tid":)" << tid << R"(,"ts":)" << ts << R"(,"dur":)" << dur << R"(,"args":{)" << args
    << "}}";
  return o.str();
}
inline std::string launch(double ts, double dur, int corr,
                          const std::string& name = "cudaLaunchKernel") {
  return ev("cuda_runtime", name, 100, 100, ts, dur, R"("correlation":)" + std::to_string(corr));
}
inline std::string kernel(const std::string& name, int stream, double ts, double dur, int corr) {
  return ev("kernel", name, 0, stream, ts, dur,
            R"("device":0,"stream":)" + std::to_string(stream) + R"(,"correlation":)" +
                std::to_string(corr));
}
inline std::string step(int n, double ts, double dur) {
  return ev("user_annotation", "ProfilerStep#" + std::to_string(n), 100, 100, ts, dur);
}
inline std::string trace(const std::vector<std::string>& events,
                         const std::string& gpu = "NVIDIA A100-SXM4-40GB") {
  std::string s =
      R"({"schemaVersion":1,"deviceProperties":[{"id":0,"name":")" + gpu + R"("}],"traceEvents":[)";
  for (std::size_t i = 0; i < events.size(); ++i) s += (i ? "," : "") + events[i];
  return s + "]}";
}

// A folder of this process's own (CTest runs the cases in parallel, build trees side by side).
inline std::filesystem::path scratch() {
  return std::filesystem::temp_directory_path() /
         ("csim_tests_replay_" + std::to_string(::getpid()));
}

inline std::filesystem::path write(const std::string& name, const std::string& text) {
  const std::filesystem::path dir = scratch();
  std::filesystem::create_directories(dir);
  const std::filesystem::path p = dir / name;
  std::ofstream(p) << text;
  return p;
}

inline replay::ReplayOutcome run_replay(const std::string& name, const std::string& text,
                                        const std::vector<std::string>& sets = {}) {
  replay::ReplayRequest rq;
  rq.inputs = {write(name, text).string()};
  rq.sets = sets;
  return replay::replay(rq);
}

constexpr TimeNs kUs = 1000;

// The measured duration the replay kept for its first collective kernel (-1: none).
inline TimeNs collective_ns(const replay::ReplayOutcome& o) {
  for (const replay::GpuOpInfo& k : o.imported.gpu_ops)
    if (k.cls == replay::KernelClass::kCollective)
      return o.imported.program.ops[static_cast<std::size_t>(k.op)].fixed_ns;
  return -1;
}

}  // namespace csim::test
