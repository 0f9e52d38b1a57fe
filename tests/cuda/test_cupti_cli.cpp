// simrun --cupti end to end, in-process: ignored with a warning off --backend cuda, reported as
// backend unavailable (exit 3) without a GPU, and on a GPU a trace with CUPTI lanes, per-op
// kernel times and NVML counters (or the note saying why there are none).
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "tests/test_support.hpp"
#include "tools/simrun_app.hpp"

using namespace csim;
namespace fs = std::filesystem;

namespace {

struct Result {
  int code;
  std::string out, err;
};

Result simrun(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = app::simrun_main(args, out, err);
  return {code, out.str(), err.str()};
}

fs::path fresh_dir(const std::string& name) {
  return test::fresh_dir("csim_cupti_cli_", name);
}

bool have_gpu() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  return ok;
}

}  // namespace

TEST_CASE("simrun --cupti: a warning off --backend cuda, exit 3 without a GPU", "[cuda][cli]") {
  const fs::path d = fresh_dir("standin");
  const Result s = simrun({test::scenario_path("single_gpu_linear.json"), "--backend", "standin",
                           "--cupti", "-q", "-o", (d / "t.json").string()});
  INFO(s.err);
  CHECK(s.code == 0);
  CHECK(s.err.find("simrun: warning: --cupti traces --backend cuda only; ignored") !=
        std::string::npos);
  CHECK(test::read_file((d / "t.json").string()).find("CUPTI stream") == std::string::npos);
  CHECK(simrun({"--help"}).out.find("--cupti") != std::string::npos);
  if (have_gpu()) return;
  // The H200 scenario: an older GPU's would stop at the compute-capability check first.
  const Result c = simrun({test::scenario_path("mlp_1xh200.json"), "--backend", "cuda", "--cupti"});
  INFO(c.err);
  CHECK(c.code == 3);
  CHECK(c.err.find("simrun: backend unavailable: no usable CUDA GPU") == 0);
}

TEST_CASE("simrun --backend cuda --cupti: CUPTI lanes, per-op kernel times, NVML", "[gpu]") {
  if (!have_gpu()) {
    std::cout << "SKIPPED: no CUDA GPU" << std::endl;
    std::exit(77);
  }
  const fs::path d = fresh_dir("cuda");
  const Result r = simrun({test::scenario_path("mlp_1xh200.json"), "--set", "training.steps=1",
                           "--backend", "cuda", "--cupti", "-q", "-o", (d / "t.json").string()});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string trace = test::read_file((d / "t.json").string());
  CHECK(trace.find("\"CUPTI stream ") != std::string::npos);
  CHECK(trace.find("\"cupti_kernel_ns\"") != std::string::npos);
  CHECK(trace.find("\"ac2g\"") != std::string::npos);
  // NVML comes with the driver; where it cannot be loaded the trace says why.
  const bool counters = trace.find("\"GPU utilisation %\"") != std::string::npos;
  const bool noted = trace.find("no NVML: utilisation counters not sampled") != std::string::npos;
  CHECK(counters != noted);
}
