// NvmlSampler (nvml_sampler.hpp). nvml.h is not included (the driver's development files may be
// missing where this builds): the few functions and structs used are declared here as NVML's ABI
// defines them, and resolved with dlsym. NVML's _v2 entry points have been stable since 2015.
#include "profiler/nvml_sampler.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>

namespace csim::prof {
namespace {

// NVML's ABI, as in nvml.h.
using nvmlReturn_t = int;  // an enum; NVML_SUCCESS = 0
constexpr nvmlReturn_t kNvmlSuccess = 0;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlUtilization_t {
  unsigned int gpu;     // % of the last sample period a kernel was running
  unsigned int memory;  // % of it device memory was being read or written
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr unsigned kUuidBytes = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using GetCountFn = nvmlReturn_t (*)(unsigned int*);
using GetHandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using GetUtilFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using GetMemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using GetUuidFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct NvmlSampler::Api {
  void* lib = nullptr;
  bool initialised = false;
  ShutdownFn shutdown = nullptr;
  GetUtilFn utilization = nullptr;
  GetMemoryFn memory = nullptr;
  ErrorStringFn error_string = nullptr;
  std::vector<nvmlDevice_t> devices;

  std::string error(const char* call, nvmlReturn_t r) const {
    const char* s = error_string != nullptr ? error_string(r) : nullptr;
    return std::string(call) + " failed: " + (s != nullptr ? s : "NVML error") + " (" +
           std::to_string(r) + ")";
  }
  ~Api() {
    if (initialised && shutdown != nullptr) shutdown();
    if (lib != nullptr) dlclose(lib);
  }
};

NvmlSampler::NvmlSampler() {
  auto api = std::make_unique<Api>();
  // RTLD_LOCAL: NVML's symbols stay out of the global namespace of this process.
  api->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (api->lib == nullptr) {
    const char* e = dlerror();
    why_ = std::string("libnvidia-ml.so.1 not found: ") + (e != nullptr ? e : "dlopen failed");
    return;
  }
  const auto sym = [&](const char* name) { return dlsym(api->lib, name); };
  const auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  api->shutdown = reinterpret_cast<ShutdownFn>(sym("nvmlShutdown"));
  const auto count = reinterpret_cast<GetCountFn>(sym("nvmlDeviceGetCount_v2"));
  const auto handle = reinterpret_cast<GetHandleFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  api->utilization = reinterpret_cast<GetUtilFn>(sym("nvmlDeviceGetUtilizationRates"));
  api->memory = reinterpret_cast<GetMemoryFn>(sym("nvmlDeviceGetMemoryInfo"));
  api->error_string = reinterpret_cast<ErrorStringFn>(sym("nvmlErrorString"));
  const auto uuid = reinterpret_cast<GetUuidFn>(sym("nvmlDeviceGetUUID"));  // optional
  const std::pair<const char*, bool> needed[] = {
      {"nvmlInit_v2", init != nullptr},
      {"nvmlShutdown", api->shutdown != nullptr},
      {"nvmlDeviceGetCount_v2", count != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", handle != nullptr},
      {"nvmlDeviceGetUtilizationRates", api->utilization != nullptr},
      {"nvmlDeviceGetMemoryInfo", api->memory != nullptr},
      {"nvmlErrorString", api->error_string != nullptr}};
  for (const auto& [name, found] : needed) {
    if (!found) {
      why_ = std::string("libnvidia-ml.so.1 has no ") + name + " (an NVML older than 2015?)";
      return;
    }
  }
  if (const nvmlReturn_t r = init(); r != kNvmlSuccess) {
    why_ = api->error("nvmlInit_v2", r);
    return;
  }
  api->initialised = true;
  unsigned int n = 0;
  if (const nvmlReturn_t r = count(&n); r != kNvmlSuccess) {
    why_ = api->error("nvmlDeviceGetCount_v2", r);
    return;
  }
  if (n == 0) {
    why_ = "NVML lists no GPU";
    return;
  }
  for (unsigned int i = 0; i < n; ++i) {
    nvmlDevice_t d = nullptr;
    if (const nvmlReturn_t r = handle(i, &d); r != kNvmlSuccess) {
      why_ = api->error("nvmlDeviceGetHandleByIndex_v2", r) + " (device " + std::to_string(i) + ")";
      return;
    }
    char text[kUuidBytes] = {};
    uuids_.push_back(uuid != nullptr && uuid(d, text, kUuidBytes) == kNvmlSuccess ? text : "");
    api->devices.push_back(d);
  }
  api_ = std::move(api);
}

NvmlSampler::~NvmlSampler() {
  stop();
}

void NvmlSampler::sample_once() {
  const TimeNs t = steady_now_ns() - clock_zero_ns_;
  std::vector<NvmlSample> got;
  std::map<int, std::string> bad;
  for (std::size_t i = 0; i < api_->devices.size(); ++i) {
    nvmlUtilization_t u{};
    nvmlMemory_t m{};
    const nvmlReturn_t ru = api_->utilization(api_->devices[i], &u);
    const nvmlReturn_t rm = api_->memory(api_->devices[i], &m);
    const int dev = static_cast<int>(i);
    if (ru != kNvmlSuccess || rm != kNvmlSuccess) {
      bad[dev] = "NVML device " + std::to_string(i) + ": " +
                 (ru != kNvmlSuccess ? api_->error("nvmlDeviceGetUtilizationRates", ru)
                                     : api_->error("nvmlDeviceGetMemoryInfo", rm));
      continue;
    }
    got.push_back({dev, t, static_cast<double>(u.gpu), static_cast<double>(u.memory),
                   static_cast<Bytes>(m.used), static_cast<Bytes>(m.total)});
  }
  std::lock_guard lock(mu_);
  samples_.insert(samples_.end(), got.begin(), got.end());
  for (auto& [dev, line] : bad) problems_.try_emplace(dev, std::move(line));
}

void NvmlSampler::run(std::int64_t period_ms) {
  const auto period = std::chrono::milliseconds(std::max<std::int64_t>(period_ms, 1));
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    sample_once();
    next += period;
    std::unique_lock lock(mu_);
    if (cv_.wait_until(lock, next, [this] { return stopping_; })) break;
  }
  sample_once();  // the state at the end of the run
}

void NvmlSampler::start(std::int64_t period_ms, std::int64_t clock_zero_ns) {
  if (!available() || thread_.joinable()) return;
  clock_zero_ns_ = clock_zero_ns;
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this, period_ms] { run(period_ms); });
}

void NvmlSampler::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<NvmlSample> NvmlSampler::samples() const {
  std::lock_guard lock(mu_);
  return samples_;
}

std::vector<std::string> NvmlSampler::problems() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [dev, line] : problems_) out.push_back(line);
  return out;
}

std::int64_t to_counters(const std::vector<NvmlSample>& samples, Trace* trace,
                         const std::map<int, int>& pid_of_device) {
  std::int64_t added = 0;
  for (const NvmlSample& s : samples) {
    int pid = s.device;
    if (!pid_of_device.empty()) {
      const auto it = pid_of_device.find(s.device);
      if (it == pid_of_device.end()) continue;  // a GPU this run did not use
      pid = it->second;
    }
    CounterSample util;
    util.pid = pid;
    util.name = "GPU utilisation %";
    util.ts_ns = s.t_ns;
    util.values = {{"GPU utilisation %", s.gpu_util_pct},
                   {"memory utilisation %", s.memory_util_pct}};
    trace->counters.push_back(std::move(util));
    CounterSample mem;
    mem.pid = pid;
    mem.name = "device memory (NVML)";
    mem.ts_ns = s.t_ns;
    mem.values = {{"memory used (NVML)", static_cast<double>(s.memory_used_bytes)}};
    trace->counters.push_back(std::move(mem));
    added += 2;
  }
  return added;
}

}  // namespace csim::prof
