// The CUDA runtime's simulated-elsewhere delays (simrun --ranks; Op::fixed_ns >= 0): another
// rank's collective or peer copy, held on this rank's stream for its simulated duration.
//
// Each stream with such ops gets a 32-bit word in mapped, pinned host memory and a DelayTimer
// (delay_timer.hpp). A delay enqueues cuStreamWaitValue32(word >= seq) after the op's start event;
// the timer polls that event, takes the moment the stream reached it from the GPU's event clock
// (cudaEventElapsedTime from the device's base event, paired with the host clock at open), waits
// the op's duration from there (sleeping, then spinning the last 100 µs) and writes seq to the
// word, which lets the stream go on. Each stream has its own thread, so delays on independent
// streams overlap as the simulated collectives did.
//
// cuStreamWaitValue32 is a driver API function: it is looked up with
// cudaGetDriverEntryPointByVersion, so libcuda is still never linked. Where the driver has no
// such entry point or refuses stream memory operations (checked once at open), a delay falls
// back to a host function that sleeps then spins (CUDA may run host functions of different
// streams one after another: the run notes it).
//
// Residual (docs/real-execution.md, "One rank of a large run"): a delay ends late by the clock
// pairing's latency (a few µs, the same for every op of the device), the write's trip to the GPU
// (about a µs), the spin's wake-up (a yield), and the float ms rounding of cudaEventElapsedTime
// (0.5 µs after 10 s of run); a delay shorter than the poll interval (20 µs) ends when the timer
// notices the stream reached it. The run notes the worst lateness measured.

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "backends/cuda/cuda_errors.hpp"
#include "backends/cuda/cuda_runtime_impl.hpp"

namespace csim::cuda::detail {

namespace {

// CUDA 12.0's cuStreamWaitValue32 (the _v2 entry point), the signature cuda.h declares.
using StreamWaitValue32Fn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

StreamWaitValue32Fn driver_stream_wait_value32(std::string* why) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e = cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000,
                                                         cudaEnableDefault, &found);
  if (e != cudaSuccess) {
    cudaGetLastError();
    *why = "cudaGetDriverEntryPointByVersion(cuStreamWaitValue32) failed: " + error_text(e);
    return nullptr;
  }
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    *why = "the driver has no cuStreamWaitValue32 (entry point query result " +
           std::to_string(static_cast<int>(found)) + ")";
    return nullptr;
  }
  return reinterpret_cast<StreamWaitValue32Fn>(fn);
}

// The fallback: the stream waits for a host function that holds it (sleep, then spin).
void CUDART_CB hold_host_fn(void* ns) {
  wait_until_ns(steady_clock_ns() + *static_cast<const TimeNs*>(ns));
}

}  // namespace

void CudaRuntime::open_delays() {
  bool any = false;
  for (char c : plan_.delay_stream) any = any || c != 0;
  if (!any) return;
  std::string why;
  wait_value32_ = reinterpret_cast<void*>(driver_stream_wait_value32(&why));
  for (const auto& sp : streams_) {
    if (!sp || !plan_.delay_stream[static_cast<std::size_t>(sp->index)]) continue;
    StreamState& s = *sp;
    const std::string where = "simulated-elsewhere delays on stream '" + s.name + "'";
    auto delays = std::make_unique<StreamDelays>();
    check_open(cudaSetDevice(s.device), "cudaSetDevice", where);
    check_open(cudaHostAlloc(reinterpret_cast<void**>(&delays->word), sizeof(std::uint32_t),
                             cudaHostAllocMapped | cudaHostAllocPortable),
               "cudaHostAlloc", where);
    *delays->word = 0;
    void* dev = nullptr;
    check_open(cudaHostGetDevicePointer(&dev, delays->word, 0), "cudaHostGetDevicePointer", where);
    delays->word_dev = reinterpret_cast<std::uintptr_t>(dev);
    s.delays = std::move(delays);
    if (!wait_value32_) continue;
    // One wait that is already satisfied (word 0 >= 0): whether this driver and device take
    // stream memory operations on host memory at all.
    const auto wait = reinterpret_cast<StreamWaitValue32Fn>(wait_value32_);
    const CUresult r =
        wait(reinterpret_cast<CUstream>(s.stream), static_cast<CUdeviceptr>(s.delays->word_dev), 0,
             CU_STREAM_WAIT_VALUE_GEQ);
    check_open(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize", where);
    if (r != CUDA_SUCCESS) {
      why = "cuStreamWaitValue32 on mapped host memory failed: CUresult " +
            std::to_string(static_cast<int>(r));
      wait_value32_ = nullptr;
    }
  }
  if (wait_value32_) {
    for (const auto& sp : streams_) {
      if (!sp || !sp->delays) continue;
      const int device = sp->device;
      sp->delays->timer = std::make_unique<DelayTimer>(
          [device] { cudaSetDevice(device); },
          [this](const std::string& e) { set_run_error("simulated-elsewhere delay: " + e); });
    }
    note(
        "simulated-elsewhere ops (simrun --ranks) held their streams with cuStreamWaitValue32 on "
        "a host word that a timer thread per stream wrote at the op's simulated end");
  } else {
    note("simulated-elsewhere ops (simrun --ranks) held their streams with host functions (" + why +
         "): CUDA may run those of different streams one after another");
  }
}

void CudaRuntime::hold_delay(const core::Op& op, StreamState& s, DeviceState& d) {
  if (!s.delays || !s.delays->timer) {
    check_op(cudaLaunchHostFunc(s.stream, hold_host_fn, const_cast<TimeNs*>(&op.fixed_ns)),
             "cudaLaunchHostFunc", label(op));
    return;
  }
  StreamDelays& sd = *s.delays;
  const std::uint32_t seq = ++sd.seq;
  const auto wait = reinterpret_cast<StreamWaitValue32Fn>(wait_value32_);
  const CUresult r = wait(reinterpret_cast<CUstream>(s.stream),
                          static_cast<CUdeviceptr>(sd.word_dev), seq, CU_STREAM_WAIT_VALUE_GEQ);
  if (r != CUDA_SUCCESS) {
    throw real::DeviceError("cuStreamWaitValue32 failed: CUresult " +
                            std::to_string(static_cast<int>(r)) + " (" + label(op) + ")");
  }
  const OpState& st = ops_[static_cast<std::size_t>(op.id)];
  DelayTimer::Delay delay;
  delay.duration_ns = op.fixed_ns;
  delay.reached = [&st, &d](TimeNs* reached_ns) {
    const cudaError_t q = cudaEventQuery(st.start);
    if (q == cudaErrorNotReady) return false;
    float ms = 0;
    const cudaError_t e = q == cudaSuccess ? cudaEventElapsedTime(&ms, d.base, st.start) : q;
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw real::DeviceError("reading the start event failed: " + error_text(e) + " (" + st.label +
                              ")");
    }
    *reached_ns = d.base_host_ns + std::llround(static_cast<double>(ms) * 1e6);
    return true;
  };
  // The word only moves forward (in the wrap-around order the wait compares by): after an abort,
  // a delay pushed later may be released before the timer's thread releases earlier ones.
  std::uint32_t* word = sd.word;
  delay.release = [word, seq] {
    std::atomic_ref<std::uint32_t> w(*word);
    std::uint32_t cur = w.load(std::memory_order_relaxed);
    while (static_cast<std::int32_t>(seq - cur) > 0 &&
           !w.compare_exchange_weak(cur, seq, std::memory_order_release)) {
    }
  };
  sd.timer->push(std::move(delay));
}

DelayTimer::Stats CudaRuntime::stop_delays(bool drain) noexcept {
  DelayTimer::Stats total;
  for (const auto& sp : streams_) {
    if (!sp || !sp->delays || !sp->delays->timer) continue;
    DelayTimer& t = *sp->delays->timer;
    if (drain) {
      t.drain();
    } else {
      t.abort();
    }
    const DelayTimer::Stats st = t.stats();
    total.held += st.held;
    total.cut += st.cut;
    total.worst_late_ns = std::max(total.worst_late_ns, st.worst_late_ns);
  }
  return total;
}

void CudaRuntime::free_delay_words() noexcept {
  for (const auto& sp : streams_) {
    if (!sp || !sp->delays) continue;
    sp->delays->timer.reset();
    if (sp->delays->word) cudaFreeHost(sp->delays->word);
    sp->delays.reset();
  }
}

}  // namespace csim::cuda::detail
