// Per-GPU utilisation and memory counters from NVML (docs/real-execution.md, "CUPTI and NVML").
// NVML is loaded at run time with dlopen("libnvidia-ml.so.1"), never linked: the library comes
// with the driver, and binaries must start on machines without one. Without it the sampler says
// why (available() false) and a run records no counters.
//
// NVML reads what the driver already tracks: utilisation is the fraction of the driver's last
// sample period (1/6 s to 1 s by product) during which a kernel ran, not an occupancy; memory used
// is everything allocated on the device (every process, the CUDA contexts, the runtime's buffers),
// not what the Program's allocations hold.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/units.hpp"
#include "profiler/trace.hpp"

namespace csim::prof {

struct NvmlSample {
  int device = 0;              // NVML device index (all GPUs of the machine, PCI order)
  TimeNs t_ns = 0;             // host steady clock, ns since the sampler's clock zero
  double gpu_util_pct = 0;     // nvmlUtilization_t.gpu
  double memory_util_pct = 0;  // nvmlUtilization_t.memory: time the memory interface was busy
  Bytes memory_used_bytes = 0;
  Bytes memory_total_bytes = 0;
};

class NvmlSampler {
 public:
  // Loads NVML and initialises it; never throws (a failure is why_unavailable()).
  NvmlSampler();
  ~NvmlSampler();  // stops the thread, shuts NVML down, unloads it
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  bool available() const { return api_ != nullptr; }
  // "libnvidia-ml.so.1 not found: <dlerror>", "nvmlInit_v2 failed: <nvmlErrorString>", ...
  const std::string& why_unavailable() const { return why_; }
  int device_count() const { return static_cast<int>(uuids_.size()); }
  // NVML's UUID of each device ("GPU-8c3f..."), "" where NVML does not say; to match NVML's
  // devices with CUDA's, whose order differs unless CUDA_DEVICE_ORDER=PCI_BUS_ID.
  const std::vector<std::string>& uuids() const { return uuids_; }

  // Starts a thread that samples every device each `period_ms` (the first sample at once).
  // Times are the host steady clock minus `clock_zero_ns`. Does nothing when !available().
  void start(std::int64_t period_ms, std::int64_t clock_zero_ns = 0);
  // Takes a last sample and joins the thread. Idempotent.
  void stop();
  std::vector<NvmlSample> samples() const;
  // Devices whose queries failed, one line each (a device NVML lists but cannot read).
  std::vector<std::string> problems() const;

 private:
  struct Api;
  void sample_once();
  void run(std::int64_t period_ms);

  std::unique_ptr<Api> api_;
  std::string why_;
  std::vector<std::string> uuids_;
  std::int64_t clock_zero_ns_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<NvmlSample> samples_;
  std::map<int, std::string> problems_;
};

// Appends the samples to `trace` as counters per GPU, written like trace_builder's memory
// counters (one CounterSample per time and GPU process): "GPU utilisation %" with series
// "GPU utilisation %" and "memory utilisation %", and "device memory (NVML)" with series
// "memory used (NVML)" in bytes. That counter's name does not start with "memory", which
// summaries and simview read as the Program's allocations. `pid_of_device` maps NVML device
// indices to trace processes (GPU indices); devices it leaves out are skipped, and an empty map
// takes NVML index i as GPU i. Returns the number of CounterSamples added.
std::int64_t to_counters(const std::vector<NvmlSample>& samples, Trace* trace,
                         const std::map<int, int>& pid_of_device = {});

}  // namespace csim::prof
