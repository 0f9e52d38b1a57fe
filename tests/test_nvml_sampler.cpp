// NvmlSampler (profiler/nvml_sampler.hpp): without a driver it says why and samples nothing;
// with one it samples every device; to_counters turns samples into per-GPU counters.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "profiler/nvml_sampler.hpp"

using namespace csim;
using prof::NvmlSample;

namespace {

const prof::CounterSample* counter(const prof::Trace& t, int pid, const std::string& name,
                                   TimeNs ts) {
  for (const prof::CounterSample& c : t.counters)
    if (c.pid == pid && c.name == name && c.ts_ns == ts) return &c;
  return nullptr;
}

double series(const prof::CounterSample& c, const std::string& name) {
  for (const auto& [k, v] : c.values)
    if (k == name) return v;
  FAIL("no series " << name);
  return 0;
}

}  // namespace

TEST_CASE("NVML sampler: unavailable without a driver, samples every device with one",
          "[nvml][cupti]") {
  prof::NvmlSampler nvml;
  INFO(nvml.why_unavailable());
  if (!nvml.available()) {
    // This build machine has no driver: dlopen fails and the reason names the library.
    CHECK(nvml.why_unavailable().find("libnvidia-ml.so.1") != std::string::npos);
    CHECK(nvml.why_unavailable().find('\n') == std::string::npos);
    CHECK(nvml.device_count() == 0);
    nvml.start(10);  // does nothing
    nvml.stop();
    CHECK(nvml.samples().empty());
    return;
  }
  CHECK(nvml.why_unavailable().empty());
  REQUIRE(nvml.device_count() > 0);
  nvml.start(20);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  nvml.stop();
  nvml.stop();  // idempotent
  const std::vector<NvmlSample> s = nvml.samples();
  INFO(s.size() << " samples");
  // One sample per device at start, every 20 ms, and at stop: at least 2 rounds.
  CHECK(s.size() >= 2 * static_cast<std::size_t>(nvml.device_count()));
  for (const NvmlSample& x : s) {
    CHECK(x.gpu_util_pct >= 0);
    CHECK(x.gpu_util_pct <= 100);
    CHECK(x.memory_used_bytes > 0);  // the driver's own reservation at least
    CHECK(x.memory_total_bytes >= x.memory_used_bytes);
  }
  CHECK(s.back().t_ns >= s.front().t_ns);
}

TEST_CASE("NVML counters: utilisation and used memory per GPU, by NVML index or mapped",
          "[nvml][cupti]") {
  const std::vector<NvmlSample> samples = {
      {0, 100, 35.0, 10.0, 2 * kMiB, 80 * kMiB},
      {1, 100, 90.0, 40.0, 7 * kMiB, 80 * kMiB},
      {0, 200, 50.0, 20.0, 3 * kMiB, 80 * kMiB},
  };
  prof::Trace t;
  // Two counters per sample: utilisation and memory.
  CHECK(prof::to_counters(samples, &t) == 6);
  REQUIRE(t.counters.size() == 6);
  const prof::CounterSample* u = counter(t, 1, "GPU utilisation %", 100);
  REQUIRE(u != nullptr);
  CHECK(series(*u, "GPU utilisation %") == 90.0);
  CHECK(series(*u, "memory utilisation %") == 40.0);
  const prof::CounterSample* m = counter(t, 0, "device memory (NVML)", 200);
  REQUIRE(m != nullptr);
  CHECK(series(*m, "memory used (NVML)") == static_cast<double>(3 * kMiB));
  // Not named "memory...": summaries read those as the Program's allocations.
  for (const prof::CounterSample& c : t.counters) CHECK(c.name.rfind("memory", 0) != 0);

  // NVML device 1 is the run's GPU 5; device 0 is not one of its GPUs and is left out.
  prof::Trace mapped;
  CHECK(prof::to_counters(samples, &mapped, {{1, 5}}) == 2);
  REQUIRE(mapped.counters.size() == 2);
  CHECK(mapped.counters[0].pid == 5);
  CHECK(series(mapped.counters[1], "memory used (NVML)") == static_cast<double>(7 * kMiB));
}
