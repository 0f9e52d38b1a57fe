// Internals of the CUDA DeviceRuntime, shared by cuda_runtime.cpp (start-up: open, warm-up, clock
// pairing, release) and cuda_enqueue.cpp (the run: enqueue, host_wait, finish, op times). What each
// op runs is in cuda_runtime.hpp; what open() sizes, in cuda_plan.hpp.
//
// Threads: the executor calls enqueue from several host threads at once. A stream's mutex is held
// for the whole enqueue (waits, start event, work, end event), so two threads sharing a stream
// cannot interleave their commands and break the start/end pairs. NCCL calls take a per-device
// mutex as well: NCCL does not support concurrent calls on communicators of one device.
//
// Completions (set_completion_callback) come from one poller thread per runtime: each enqueue
// appends its op to its stream's `recorded_` queue once the op's end event is recorded; the
// poller walks each queue from the front with cudaEventQuery (a stream runs its ops in that
// order, so it stops at the first that is not done), reports what finished, and sleeps 30 µs when
// nothing did. It never takes a stream's mutex (an enqueue may block inside NCCL while holding
// it) and only try_locks a device's NCCL mutex, to read cross-process communicators' asynchronous
// errors; an error is stored and thrown by the next enqueue, host_wait or finish. Events rather
// than cudaLaunchHostFunc per op: host functions run one at a time per process and would hold
// every stream behind the slowest callback.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_plan.hpp"
#include "backends/cuda/cuda_runtime.hpp"
#include "backends/cuda/delay_timer.hpp"
#include "backends/cuda/nccl_ops.hpp"
#include "backends/real/device_runtime.hpp"
#include "profiler/cupti/cupti_tracer.hpp"

namespace csim::cuda::detail {

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
};

// fp16 and bf16 accumulate in fp32, as PyTorch's GEMMs do; tf32 is fp32 data on TF32 tensor cores.
inline GemmTypes gemm_types(core::Dtype d) {
  switch (d) {
    case core::Dtype::kFp16:
      return {CUDA_R_16F, CUBLAS_COMPUTE_32F};
    case core::Dtype::kBf16:
    case core::Dtype::kFp8:  // proxied as a bf16 GEMM of the same FLOPs (docs/fp8.md, "Real
                             // backend")
      return {CUDA_R_16BF, CUBLAS_COMPUTE_32F};
    case core::Dtype::kTf32:
      return {CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    case core::Dtype::kFp32:
      break;
  }
  return {CUDA_R_32F, CUBLAS_COMPUTE_32F};
}

struct DeviceState;

// One proxy GEMM (gemm_proxy.hpp) on d's operands: C (m x n) = A (m x k) * B^T with B stored
// n x k, so the leading dimensions are m and n (aligned) and k is free.
cublasStatus_t proxy_gemm(cublasHandle_t blas, const DeviceState& d, core::Dtype dtype,
                          const GemmShape& g);

struct DeviceState {
  int slot = -1;                // index in devices_ and plan_.devices (cuda_plan.hpp)
  int device = -1;              // CUDA device
  int gpu = -1;                 // global GPU index
  cudaStream_t util = nullptr;  // open-time work: fills, warm-ups, the clock pairing
  cudaEvent_t base = nullptr;   // recorded at open: the zero of this device's event clock
  TimeNs base_host_ns = 0;      // host steady clock right after `base` completed
  void* gemm[3] = {nullptr, nullptr, nullptr};  // A, B, C
  void* scratch = nullptr;                      // two regions of `region_bytes`
  Bytes region_bytes = 0;
  void* pinned = nullptr;
  std::unique_ptr<unsigned char[]> pageable;
  cudaMemPool_t pool = nullptr;
  std::uint64_t old_release_threshold = 0;
  bool threshold_set = false;
  std::vector<int> peers_enabled;
  std::mutex nccl_mu;

  void* region(int i) const {
    return static_cast<unsigned char*>(scratch) + static_cast<std::ptrdiff_t>(i) * region_bytes;
  }
};

// A stream's simulated-elsewhere delays (simrun --ranks; stream_delays.cpp): the stream waits
// until `word` reaches each delay's sequence number, which the timer writes at its end.
struct StreamDelays {
  std::uint32_t* word = nullptr;      // mapped, pinned host memory
  std::uintptr_t word_dev = 0;        // its device address (a CUdeviceptr)
  std::uint32_t seq = 0;              // the last delay's number (under the stream's mutex)
  std::unique_ptr<DelayTimer> timer;  // null: host-function fallback
};

struct StreamState {
  int index = -1;
  int slot = -1;    // its GPU's slot
  int device = -1;  // its GPU's CUDA device
  std::string name;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;  // streams with GEMM-like ops; bound to `stream` at open
  void* blas_workspace = nullptr;
  std::mutex mu;
  std::vector<core::OpId> fifo;  // ops in enqueue order = the order they run
  int pending_batch = -1;        // a collective batch waits on this stream for its last member
  std::unique_ptr<StreamDelays> delays;  // streams with simulated-elsewhere ops only
};

struct OpState {
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  std::atomic<bool> started{false};   // start event recorded
  std::atomic<bool> enqueued{false};  // end event recorded: later ops may wait for it
  std::atomic<bool> done{false};      // the poller saw the end event complete
  int device = -1;                    // its GPU's CUDA device
  bool timed = false;
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;
  std::string label;  // op_label(), for messages where only the id is at hand
};

struct CommSet {
  std::string name;
  std::vector<int> gpus;          // the group's GPUs, by NCCL rank
  std::vector<ncclComm_t> comms;  // this process's communicators (GroupPlan::ranks order)
  bool spans_processes = false;   // from ncclCommInitRank: its async errors are polled
};

class CudaRuntime final : public real::DeviceRuntime {
 public:
  CudaRuntime(int device_count, const CudaOptions& options);
  ~CudaRuntime() override { release(); }
  CudaRuntime(const CudaRuntime&) = delete;
  CudaRuntime& operator=(const CudaRuntime&) = delete;

  real::RuntimeInfo info() const override {
    std::lock_guard lock(info_mu_);
    return info_;
  }
  void open(const core::Program& program, const std::vector<int>& gpus,
            std::int64_t clock_zero_ns) override;
  void enqueue(const core::Op& op, const std::vector<core::OpId>& stream_deps) override;
  void host_wait(core::OpId op) override;
  void finish() override;
  void abort() override;
  bool op_interval(core::OpId op, TimeNs* start_ns, TimeNs* end_ns) const override;
  // Call before open(): the poller starts there.
  void set_completion_callback(std::function<void(core::OpId)> f) override {
    on_done_ = std::move(f);
  }
  bool reports_completions() const override { return true; }
  CuptiCapture take_cupti();

 private:
  void open_devices();
  void open_streams(const core::Program& program);
  void open_buffers();
  void fill_gemm_operands(DeviceState& d, Bytes bytes, const std::string& where);
  void open_delays();
  void open_comms();
  std::vector<std::string> shared_ids();
  void warm_up();
  void pair_clocks();
  void start_tracing(const core::Program& program);
  void stop_tracing();
  void note(std::string line) {
    std::lock_guard lock(info_mu_);
    info_.notes.push_back(std::move(line));
  }

  // Why `op` cannot be waited for: no such op here, not enqueued, or a batch member still waiting.
  std::string not_enqueued(core::OpId op) const;
  void enqueue_locked(const core::Op& op, const std::vector<core::OpId>& stream_deps);
  void run_op(const core::Op& op, StreamState& s, DeviceState& d);
  void hold_delay(const core::Op& op, StreamState& s, DeviceState& d);
  // Ends the delay timers: drain (finish: every delay was released) or abort (release them all
  // now, so the streams drain).
  DelayTimer::Stats stop_delays(bool drain) noexcept;
  void free_delay_words() noexcept;
  void run_gemm(const core::Op& op, StreamState& s, DeviceState& d);
  void run_copy(const core::Op& op, StreamState& s, DeviceState& d);
  void copy_chunks(void* dst, const void* src, Bytes total, cudaMemcpyKind kind, cudaStream_t s,
                   const core::Op& op);
  CollectiveCall collective_call(const core::Op& op, cudaStream_t stream);
  void run_collective(const core::Op& op, StreamState& s);
  void flush_batch(int batch);
  void run_alloc(const core::Op& op, StreamState& s);
  void run_free(const core::Op& op, StreamState& s);
  void check_comm_errors();
  void note_recorded(const StreamState& s, core::OpId op);
  void start_poller();
  void poll_loop();
  bool poll_streams();  // true when some op completed
  void poll_comm_errors();
  // Ends the poller. drain: after one last sweep (finish, the streams idle); else at once.
  void stop_poller(bool drain) noexcept;
  void set_run_error(std::string message);
  void throw_run_error();  // DeviceError with the stored message, if any
  void wait_event(const OpState& st);
  void compute_intervals();
  void release() noexcept;

  DeviceState& device_of_gpu(int gpu) {
    return *devices_[static_cast<std::size_t>(plan_.slot_of_gpu[static_cast<std::size_t>(gpu)])];
  }

  const int device_count_;
  const CudaOptions options_;
  mutable std::mutex info_mu_;
  real::RuntimeInfo info_;

  bool opened_ = false;
  bool finished_ = false;
  std::atomic<bool> failed_{false};   // an enqueue or finish threw: abort NCCL on destruction
  std::atomic<bool> aborted_{false};  // abort() ran: the communicators are gone
  std::int64_t clock_zero_ns_ = 0;
  ProcessPlan plan_;
  std::vector<core::CommGroup> groups_;
  std::vector<std::unique_ptr<DeviceState>> devices_;  // by slot
  std::vector<std::unique_ptr<StreamState>> streams_;  // by Program stream; null outside
  std::size_t n_ops_ = 0;
  // A local op's op_label() (made at open(), with its name from Program::names).
  const std::string& label(const core::Op& op) const {
    return ops_[static_cast<std::size_t>(op.id)].label;
  }
  std::unique_ptr<OpState[]> ops_;
  std::vector<CommSet> comm_sets_;                // parallel to plan_.groups
  bool cross_process_ = false;                    // some comm_sets_ span processes
  std::vector<std::vector<core::Op>> batch_ops_;  // by batch: its members enqueued so far
  void* wait_value32_ = nullptr;  // the driver's cuStreamWaitValue32, null: host functions

  // Live cudaMallocAsync allocations. A kFree releases the most recent live allocation of the same
  // GPU, category and size (the Program pairs frees with allocs by those, not by op id); a free
  // that matches none releases nothing and is counted in a note.
  std::mutex alloc_mu_;
  std::map<std::tuple<int, int, Bytes>, std::vector<std::pair<core::OpId, void*>>> live_;
  std::map<core::OpId, void*> alloc_of_op_;
  std::int64_t unmatched_frees_ = 0;

  // CudaOptions::cupti: the tracer (null when off: enqueue's OpScope then does nothing), each
  // op's GPU (to give a one-thread collective batch's kernels their own GPU's op), and each
  // device's UUID as NVML writes it.
  std::unique_ptr<cupti::CuptiTracer> tracer_;
  std::vector<int> op_gpu_;
  std::map<std::string, int> gpu_of_uuid_;

  // [SECTION] Completions and asynchronous errors (the poller; see the top of this file).
  std::function<void(core::OpId)> on_done_;
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;               // wakes the poller to stop
  std::vector<std::deque<core::OpId>> recorded_;  // by stream: end recorded, not yet seen done
  bool poll_stop_ = false;                        // under poll_mu_
  bool poll_drain_ = false;                       // under poll_mu_: one last sweep first
  bool polling_ = false;                          // the poller runs (set at open)
  std::thread poller_;
  // The first error the poller met (NCCL asynchronous error, failed event query, throwing
  // callback), thrown by the next enqueue, host_wait or finish.
  std::mutex run_error_mu_;
  std::string run_error_;
  std::atomic<bool> has_run_error_{false};
};

}  // namespace csim::cuda::detail
