// CuptiTracer (cupti_tracer.hpp): the CUPTI activity API with asynchronous buffers. CUPTI calls
// the buffer callbacks from its own threads, with no user pointer: they reach the active tracer
// through a process-wide pointer under a mutex. Records are parsed into plain Records as buffers
// complete, so no CUPTI memory is held after a callback returns.
//
// Record layouts are those of the CUPTI headers this is compiled against (CUDA 13:
// CUpti_ActivityKernel10, Memcpy6, MemcpyPtoP4, Memset4, Synchronization2, API,
// ExternalCorrelation, Marker2). CUPTI delivers the layout of its own version, and newer versions
// of a record extend the older one at its end, so the fields read here stay where they are.
#include "profiler/cupti/cupti_tracer.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <mutex>
#include <new>
#include <utility>

#include "core/error.hpp"

#if CSIM_HAVE_CUPTI
#include <cupti.h>
#endif

namespace csim::cupti {

#if CSIM_HAVE_CUPTI

namespace {

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr std::size_t kBufferBytes = 8u << 20;  // 8 MiB per buffer, as Kineto uses
constexpr std::align_val_t kBufferAlign{ACTIVITY_RECORD_ALIGNMENT};
constexpr int kClockPairReads = 16;

// "CUPTI_ERROR_UNKNOWN (999)"
std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == nullptr) s = "unknown CUPTI result";
  return std::string(s) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

// "cuptiActivityEnable(CONCURRENT_KERNEL) failed: CUPTI_ERROR_UNKNOWN (999)"
std::string failure(const std::string& call, CUptiResult r) {
  return call + " failed: " + result_text(r);
}

struct Kind {
  CUpti_ActivityKind kind;
  const char* name;
  bool required;  // without it the trace would not say what the ops ran
};
// MEMCPY2 (peer copies), SYNCHRONIZATION and MARKER add detail; a CUPTI that cannot enable them
// still traces. MARKER: CUPTI only receives NVTX ranges when NVTX_INJECTION64_PATH names
// libcupti.so before the process starts (NVTX loads its injection library then); otherwise the
// kind is enabled and stays empty.
constexpr Kind kKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", true},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", true},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", false},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", true},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION", false},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME", true},
    {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER", true},  // NCCL and cuBLAS launch through the driver API
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION", true},
    {CUPTI_ACTIVITY_KIND_MARKER, "MARKER", false},
};

const char* copy_kind_text(std::uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "unknown";
  }
}

const char* memory_kind_text(std::uint32_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "Device static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "Managed static";
    default:
      return "Unknown";
  }
}

// Kineto's names: "Memcpy HtoD (Pinned -> Device)".
std::string memcpy_name(std::uint8_t copy, std::uint8_t src, std::uint8_t dst) {
  return std::string("Memcpy ") + copy_kind_text(copy) + " (" + memory_kind_text(src) + " -> " +
         memory_kind_text(dst) + ")";
}

const char* sync_name(CUpti_ActivitySynchronizationType t) {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "Event Synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "Stream Wait Event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "Stream Synchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "Context Synchronize";
    default:
      return "Synchronize";
  }
}

std::int64_t valid_or_none(std::uint32_t v) {
  return v == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? -1 : static_cast<std::int64_t>(v);
}

}  // namespace

struct CuptiTracer::Impl {
  std::int64_t clock_zero_ns = 0;
  std::int64_t cupti_to_host_ns = 0;  // host steady ns = CUPTI ns + this
  std::int64_t pair_gap_ns = -1;
  bool running = false;
  std::vector<CUpti_ActivityKind> enabled;
  std::atomic<std::int64_t> push_failures{0};

  // Filled by the completion callback (under g_mu).
  std::vector<Record> records;
  std::map<std::int64_t, std::int64_t> external_of_correlation;
  std::map<std::uint32_t, int> device_of_context;
  std::vector<std::pair<std::size_t, std::uint32_t>> sync_context;  // record index, context
  std::map<std::uint32_t, Record> open_markers;                     // NVTX range id -> start
  std::map<std::pair<int, std::uint32_t>, std::string> api_names;   // (domain, cbid) -> name
  std::int64_t dropped = 0;
  std::int64_t incomplete = 0;
  std::vector<std::string> notes;

  TimeNs host_ns(std::uint64_t cupti_ns) const {
    return static_cast<std::int64_t>(cupti_ns) + cupti_to_host_ns - clock_zero_ns;
  }
  // A forced flush delivers records whose work had not finished with zero timestamps: counted
  // and left out rather than placed at CUPTI's epoch.
  bool set_times(std::uint64_t start, std::uint64_t end, Record& r) {
    if (start == 0 || end < start) {
      ++incomplete;
      return false;
    }
    r.start_ns = host_ns(start);
    r.end_ns = host_ns(end);
    return true;
  }
  const std::string& api_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    auto [it, fresh] = api_names.try_emplace({static_cast<int>(domain), cbid});
    if (fresh) {
      const char* n = nullptr;
      it->second = cuptiGetCallbackName(domain, cbid, &n) == CUPTI_SUCCESS && n != nullptr
                       ? n
                       : "API call " + std::to_string(cbid);
    }
    return it->second;
  }
  void parse(const CUpti_Activity* a);
};

namespace {

std::mutex g_mu;                        // guards g_active and every field the callbacks fill
CuptiTracer::Impl* g_active = nullptr;  // the tracer buffers are delivered to
bool g_callbacks_registered = false;    // once per process: the callbacks are process-wide

void CUPTIAPI on_buffer_requested(std::uint8_t** buffer, std::size_t* size,
                                  std::size_t* max_records) {
  *max_records = 0;  // as many as fit
  try {
    *buffer = static_cast<std::uint8_t*>(::operator new(kBufferBytes, kBufferAlign));
    *size = kBufferBytes;
  } catch (const std::bad_alloc&) {
    *buffer = nullptr;  // CUPTI drops the records and counts them as dropped
    *size = 0;
  }
}

void CUPTIAPI on_buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                                  std::size_t /*size*/, std::size_t valid_size) {
  {
    std::lock_guard lock(g_mu);
    if (g_active != nullptr) {
      CUpti_Activity* record = nullptr;
      while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
        g_active->parse(record);
      }
      std::size_t dropped = 0;
      if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS)
        g_active->dropped += static_cast<std::int64_t>(dropped);
    }
  }
  ::operator delete(buffer, kBufferAlign);
}

}  // namespace

void CuptiTracer::Impl::parse(const CUpti_Activity* a) {
  Record r;
  // The fields every GPU-side record (kernel, memcpy, memset) carries, whatever its struct;
  // false when its times are unusable.
  auto gpu_side = [&](const auto* x) {
    if (!set_times(x->start, x->end, r)) return false;
    r.device = static_cast<int>(x->deviceId);
    r.stream = x->streamId;
    r.correlation = x->correlationId;
    return true;
  };
  switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
      r.kind = RecordKind::kKernel;
      r.name = k->name != nullptr ? k->name : "(unnamed kernel)";
      if (!gpu_side(k)) return;
      device_of_context[k->contextId] = r.device;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
      r.kind = RecordKind::kMemcpy;
      r.name = memcpy_name(m->copyKind, m->srcKind, m->dstKind);
      r.copy_kind = copy_kind_text(m->copyKind);
      r.bytes = static_cast<Bytes>(m->bytes);
      if (!gpu_side(m)) return;
      device_of_context[m->contextId] = r.device;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(a);
      r.kind = RecordKind::kMemcpy;
      r.name = memcpy_name(m->copyKind, m->srcKind, m->dstKind) + " device " +
               std::to_string(m->srcDeviceId) + " -> " + std::to_string(m->dstDeviceId);
      r.copy_kind = copy_kind_text(m->copyKind);
      r.bytes = static_cast<Bytes>(m->bytes);
      if (!gpu_side(m)) return;
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(a);
      r.kind = RecordKind::kMemset;
      r.name = std::string("Memset (") + memory_kind_text(m->memoryKind) + ")";
      r.bytes = static_cast<Bytes>(m->bytes);
      if (!gpu_side(m)) return;
      device_of_context[m->contextId] = r.device;
      break;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(a);
      r.kind = RecordKind::kSync;
      r.name = sync_name(s->type);
      if (!set_times(s->start, s->end, r)) return;
      r.stream = valid_or_none(s->streamId);
      r.correlation = s->correlationId;
      if (valid_or_none(s->contextId) >= 0) sync_context.emplace_back(records.size(), s->contextId);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(a);
      const bool runtime = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      r.kind = runtime ? RecordKind::kRuntime : RecordKind::kDriver;
      r.name =
          api_name(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, api->cbid);
      if (!set_times(api->start, api->end, r)) return;
      r.correlation = api->correlationId;
      r.thread = api->threadId;
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* x = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(a);
      if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
        external_of_correlation[x->correlationId] = static_cast<std::int64_t>(x->externalId);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      // An NVTX range arrives as a start record (with the name) and an end record of one id.
      const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(a);
      const bool on_thread = m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
                             m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS;
      if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        auto it = open_markers.find(m->id);
        if (it == open_markers.end()) return;
        it->second.end_ns = host_ns(m->timestamp);
        records.push_back(std::move(it->second));
        open_markers.erase(it);
        return;
      }
      r.kind = RecordKind::kMarker;
      r.name = m->name != nullptr ? m->name : "(unnamed range)";
      if (m->domain != nullptr && *m->domain) r.name = std::string(m->domain) + ": " + r.name;
      r.start_ns = r.end_ns = host_ns(m->timestamp);
      r.thread = on_thread ? static_cast<std::int64_t>(m->objectId.pt.threadId) : -1;
      if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        open_markers[m->id] = std::move(r);
        return;
      }
      break;  // an instant
    }
    default:
      return;
  }
  records.push_back(std::move(r));
}

CuptiTracer::CuptiTracer() : impl_(std::make_unique<Impl>()) {}

CuptiTracer::~CuptiTracer() {
  stop();
}

void CuptiTracer::start(std::int64_t clock_zero_ns) {
  const auto unavailable = [](const std::string& why) {
    return BackendUnavailable("CUPTI tracing cannot start: " + why);
  };
  if (impl_->running) throw unavailable("this tracer is already running");
  Impl& im = *impl_;
  im.clock_zero_ns = clock_zero_ns;
  // Clock pairing: read the host clock on both sides of cuptiGetTimestamp(), keep the read with
  // the smallest gap and take its midpoint. The residual skew is at most half that gap (tens of
  // ns), plus how CUPTI's own clock drifts from the steady clock over the run (CUPTI normalises
  // GPU timestamps to a host clock; NTP slewing, if any, is a few ppm).
  for (int i = 0; i < kClockPairReads; ++i) {
    std::uint64_t cupti_ns = 0;
    const std::int64_t before = steady_now_ns();
    const CUptiResult r = cuptiGetTimestamp(&cupti_ns);
    const std::int64_t after = steady_now_ns();
    if (r != CUPTI_SUCCESS) throw unavailable(failure("cuptiGetTimestamp", r));
    if (im.pair_gap_ns < 0 || after - before < im.pair_gap_ns) {
      im.pair_gap_ns = after - before;
      im.cupti_to_host_ns = before + (after - before) / 2 - static_cast<std::int64_t>(cupti_ns);
    }
  }
  {
    // Claim the process-wide slot first, so buffers completed as soon as a kind is enabled
    // reach this tracer; CUPTI is called outside the lock (a completion callback takes it).
    std::lock_guard lock(g_mu);
    if (g_active != nullptr) throw unavailable("another CUPTI tracer is active in this process");
    if (!g_callbacks_registered) {
      const CUptiResult r =
          cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed);
      if (r != CUPTI_SUCCESS) throw unavailable(failure("cuptiActivityRegisterCallbacks", r));
      g_callbacks_registered = true;
    }
    g_active = &im;
  }
  for (const Kind& k : kKinds) {
    const CUptiResult r = cuptiActivityEnable(k.kind);
    if (r == CUPTI_SUCCESS) {
      im.enabled.push_back(k.kind);
      continue;
    }
    const std::string what = failure(std::string("cuptiActivityEnable(") + k.name + ")", r);
    if (!k.required) {
      im.notes.push_back("CUPTI: " + what + "; traced without it");
      continue;
    }
    for (CUpti_ActivityKind e : im.enabled) cuptiActivityDisable(e);
    im.enabled.clear();
    {
      std::lock_guard lock(g_mu);
      g_active = nullptr;
    }
    const bool no_device = r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED ||
                           r == CUPTI_ERROR_INVALID_DEVICE;
    throw unavailable(what + (no_device ? " (CUPTI needs a CUDA GPU and its driver)"
                              : r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                                  ? " (another profiler is attached to this process)"
                                  : ""));
  }
  im.running = true;
}

void CuptiTracer::push_op(std::int64_t op_id) {
  if (cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                             static_cast<std::uint64_t>(op_id)) != CUPTI_SUCCESS)
    impl_->push_failures.fetch_add(1, std::memory_order_relaxed);
}

void CuptiTracer::pop_op() {
  std::uint64_t last = 0;
  if (cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last) !=
      CUPTI_SUCCESS)
    impl_->push_failures.fetch_add(1, std::memory_order_relaxed);
}

void CuptiTracer::stop() {
  Impl& im = *impl_;
  if (!im.running) return;
  // Outside g_mu: flushing runs the completion callback on this thread, which takes it.
  CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::string flush_problem = r == CUPTI_SUCCESS ? "" : failure("cuptiActivityFlushAll", r);
  for (CUpti_ActivityKind k : im.enabled) cuptiActivityDisable(k);
  // Records produced between the flush and the disable.
  r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS && flush_problem.empty())
    flush_problem = failure("cuptiActivityFlushAll", r);
  std::lock_guard lock(g_mu);
  if (!flush_problem.empty())
    im.notes.push_back("CUPTI: " + flush_problem + "; records may be missing");
  im.enabled.clear();
  if (g_active == &im) g_active = nullptr;
  im.running = false;
}

bool CuptiTracer::running() const {
  return impl_->running;
}

std::vector<Record> CuptiTracer::take() {
  std::lock_guard lock(g_mu);
  Impl& im = *impl_;
  for (const auto& [i, ctx] : im.sync_context) {
    const auto it = im.device_of_context.find(ctx);
    if (it != im.device_of_context.end()) im.records[i].device = it->second;
  }
  im.sync_context.clear();
  for (auto& [id, m] : im.open_markers) im.records.push_back(std::move(m));  // never ended
  im.open_markers.clear();
  resolve_op_ids(im.records, im.external_of_correlation);
  std::stable_sort(im.records.begin(), im.records.end(),
                   [](const Record& a, const Record& b) { return a.start_ns < b.start_ns; });
  return std::exchange(im.records, {});
}

std::int64_t CuptiTracer::clock_pair_gap_ns() const {
  return impl_->pair_gap_ns;
}

std::vector<std::string> CuptiTracer::notes() const {
  std::lock_guard lock(g_mu);
  std::vector<std::string> out = impl_->notes;
  if (impl_->incomplete > 0)
    out.push_back("CUPTI delivered " + std::to_string(impl_->incomplete) +
                  " records without timestamps (work unfinished at the flush): left out");
  if (impl_->dropped > 0)
    out.push_back("CUPTI dropped " + std::to_string(impl_->dropped) +
                  " activity records (its buffers were full): per-kernel lanes are incomplete");
  if (const std::int64_t f = impl_->push_failures.load(); f > 0)
    out.push_back("CUPTI: " + std::to_string(f) +
                  " external-correlation push/pop calls failed: some GPU records have no op");
  return out;
}

std::string CuptiTracer::version_line() {
  std::uint32_t v = 0;
  const CUptiResult r = cuptiGetVersion(&v);
  return r == CUPTI_SUCCESS ? "CUPTI API " + std::to_string(v) : failure("cuptiGetVersion", r);
}

#else  // CSIM_HAVE_CUPTI: the CUDA backend was built without CUPTI's headers and library.

struct CuptiTracer::Impl {};

CuptiTracer::CuptiTracer() : impl_(std::make_unique<Impl>()) {}
CuptiTracer::~CuptiTracer() = default;
void CuptiTracer::start(std::int64_t /*clock_zero_ns*/) {
  throw BackendUnavailable(
      "CUPTI tracing cannot start: CUPTI (cupti.h, libcupti) was not found when this build was "
      "configured");
}
void CuptiTracer::push_op(std::int64_t /*op_id*/) {}
void CuptiTracer::pop_op() {}
void CuptiTracer::stop() {}
bool CuptiTracer::running() const {
  return false;
}
std::vector<Record> CuptiTracer::take() {
  return {};
}
std::int64_t CuptiTracer::clock_pair_gap_ns() const {
  return -1;
}
std::vector<std::string> CuptiTracer::notes() const {
  return {};
}
std::string CuptiTracer::version_line() {
  return "CUPTI is not part of this build";
}

#endif  // CSIM_HAVE_CUPTI

}  // namespace csim::cupti
