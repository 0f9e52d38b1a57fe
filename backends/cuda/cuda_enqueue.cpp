// The CUDA DeviceRuntime, the run: enqueue (waits, start event, the op's stand-in work, end event),
// host_wait, finish, op times from the events, and the poller that reports completions and NCCL
// asynchronous errors (cuda_runtime_impl.hpp). Start-up is in cuda_runtime.cpp.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "backends/cuda/cuda_errors.hpp"
#include "backends/cuda/cuda_runtime_impl.hpp"

namespace csim::cuda::detail {

using core::CopyKind;
using core::Op;
using core::OpId;
using core::OpKind;
using real::DeviceError;

namespace {

// cudaEventElapsedTime returns float ms, whose rounding grows with the interval (up to 0.5 µs at
// 10 s). Op times are read against an anchor event that hops forward along each stream once it is
// this far behind, keeping that rounding under 4 ns.
constexpr double kAnchorHopMs = 100.0;
constexpr auto kFinishPoll = std::chrono::microseconds(100);
// The poller sleeps this long when a sweep found nothing finished: the completion latency the
// ranks waiting on another process see, next to the tens of µs of the coordinator's relay.
constexpr auto kPollIdle = std::chrono::microseconds(30);
// NCCL asynchronous errors are read this often (a flag read per communicator; errors take NCCL
// seconds to detect anyway).
constexpr auto kCommErrorPoll = std::chrono::milliseconds(1);
// host_wait in multi-process runs: yields between event queries for this long (a host wait's
// latency is timed, and cudaEventSynchronize's spin keeps it at microseconds), then sleeps.
constexpr auto kHostWaitSpin = std::chrono::microseconds(200);
constexpr auto kHostWaitPoll = std::chrono::microseconds(20);

TimeNs ms_to_ns(float ms) {
  return static_cast<TimeNs>(std::llround(static_cast<double>(ms) * 1e6));
}

}  // namespace

std::string CudaRuntime::not_enqueued(OpId op) const {
  const std::string id = "op " + std::to_string(op);
  if (op < 0 || static_cast<std::size_t>(op) >= n_ops_) return id + " does not exist";
  const OpState& st = ops_[static_cast<std::size_t>(op)];
  if (st.label.empty()) return id + " does not run in this process";
  const int batch = plan_.batch_of_op[static_cast<std::size_t>(op)];
  if (st.started && batch >= 0) {
    return st.label + " is a collective that its host thread launches together with the other " +
           "GPUs' ops of instance " +
           std::to_string(plan_.batches[static_cast<std::size_t>(batch)].instance) +
           ", which are not all enqueued yet";
  }
  return st.label + " has not been enqueued";
}

void CudaRuntime::enqueue(const Op& op, const std::vector<OpId>& stream_deps) {
  // Traced runs: every CUDA call below (waits, events, the op's kernels and copies, NCCL) carries
  // the op's id to CUPTI. A batch's last member carries the whole ncclGroupEnd (see take_cupti).
  const cupti::OpScope scope(tracer_.get(), op.id);
  try {
    enqueue_locked(op, stream_deps);
  } catch (...) {
    failed_ = true;
    throw;
  }
}

void CudaRuntime::enqueue_locked(const Op& op, const std::vector<OpId>& stream_deps) {
  if (!opened_) throw DeviceError("enqueue before open: op " + std::to_string(op.id));
  if (op.id < 0 || static_cast<std::size_t>(op.id) >= n_ops_ ||
      !plan_.local_op[static_cast<std::size_t>(op.id)]) {
    throw DeviceError("op " + std::to_string(op.id) + " on GPU " + std::to_string(op.gpu) +
                      " is not a stream op of this process");
  }
  throw_run_error();
  OpState& st = ops_[static_cast<std::size_t>(op.id)];
  StreamState& s = *streams_[static_cast<std::size_t>(op.stream)];
  DeviceState& d = *devices_[static_cast<std::size_t>(s.slot)];
  std::unique_lock lock(s.mu);
  if (st.started.load()) throw DeviceError(label(op) + " was enqueued twice");
  if (s.pending_batch >= 0) {
    throw DeviceError(
        label(op) + " was enqueued on stream '" + s.name + "' while collective instance " +
        std::to_string(plan_.batches[static_cast<std::size_t>(s.pending_batch)].instance) +
        " waits there for its other GPUs (one host thread issues them, so they are "
        "launched together once the last is enqueued)");
  }
  check_op(cudaSetDevice(d.device), "cudaSetDevice", label(op));
  for (OpId dep : stream_deps) {
    if (dep < 0 || static_cast<std::size_t>(dep) >= n_ops_ ||
        !ops_[static_cast<std::size_t>(dep)].enqueued.load(std::memory_order_acquire)) {
      throw DeviceError(label(op) + ": its stream dependency " + not_enqueued(dep));
    }
    check_op(cudaStreamWaitEvent(s.stream, ops_[static_cast<std::size_t>(dep)].end, 0),
             "cudaStreamWaitEvent", label(op));
  }
  check_op(cudaEventRecord(st.start, s.stream), "cudaEventRecord", label(op));
  st.started = true;
  s.fifo.push_back(op.id);

  const int batch = plan_.batch_of_op[static_cast<std::size_t>(op.id)];
  if (op.kind == OpKind::kCollective && batch >= 0) {
    std::vector<Op>& members = batch_ops_[static_cast<std::size_t>(batch)];
    members.push_back(op);
    s.pending_batch = batch;
    if (members.size() < plan_.batches[static_cast<std::size_t>(batch)].ops.size()) return;
    lock.unlock();  // flush_batch takes every member's stream in turn
    flush_batch(batch);
    return;
  }
  run_op(op, s, d);
  check_op(cudaEventRecord(st.end, s.stream), "cudaEventRecord", label(op));
  st.enqueued.store(true, std::memory_order_release);
  note_recorded(s, op.id);
}

void CudaRuntime::run_op(const Op& op, StreamState& s, DeviceState& d) {
  if (op.fixed_ns >= 0) {
    // A collective or peer copy of a rank run alone (simrun --ranks): its simulated duration
    // held on the stream (stream_delays.cpp); the op's events still time it on the GPU's clock.
    hold_delay(op, s, d);
    return;
  }
  switch (op.kind) {
    case OpKind::kCompute:
      if (is_gemm_like(op)) {
        run_gemm(op, s, d);
      } else {
        // A memory-bound kernel reads and writes op.bytes in all: copy half of them.
        copy_chunks(d.region(1), d.region(0), op.bytes / 2, cudaMemcpyDeviceToDevice, s.stream, op);
      }
      break;
    case OpKind::kCopy:
      run_copy(op, s, d);
      break;
    case OpKind::kCollective:
      run_collective(op, s);
      break;
    case OpKind::kAlloc:
      run_alloc(op, s);
      break;
    case OpKind::kFree:
      run_free(op, s);
      break;
    case OpKind::kHostWork:
    case OpKind::kMarker:
      throw DeviceError(label(op) + ": host ops have no stream");
  }
}

cublasStatus_t proxy_gemm(cublasHandle_t blas, const DeviceState& d, core::Dtype dtype,
                          const GemmShape& g) {
  const GemmTypes t = gemm_types(dtype);
  const float alpha = 1.0f, beta = 0.0f;
  const auto m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  return cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, d.gemm[0], t.data, m,
                      d.gemm[1], t.data, n, &beta, d.gemm[2], t.data, m, t.compute,
                      CUBLAS_GEMM_DEFAULT);
}

void CudaRuntime::run_gemm(const Op& op, StreamState& s, DeviceState& d) {
  for (const GemmShape& g : plan_op_gemms(op)) {
    check_op(proxy_gemm(s.blas, d, op.dtype, g), "cublasGemmEx", label(op));
  }
}

void CudaRuntime::copy_chunks(void* dst, const void* src, Bytes total, cudaMemcpyKind kind,
                              cudaStream_t s, const Op& op) {
  for (Bytes done = 0; done < total; done += kMaxBufferBytes) {
    const auto chunk = static_cast<std::size_t>(std::min(total - done, kMaxBufferBytes));
    check_op(cudaMemcpyAsync(dst, src, chunk, kind, s), "cudaMemcpyAsync", label(op));
  }
}

void CudaRuntime::run_copy(const Op& op, StreamState& s, DeviceState& d) {
  switch (op.copy_kind) {
    case CopyKind::kH2DPinned:
      copy_chunks(d.region(0), d.pinned, op.bytes, cudaMemcpyHostToDevice, s.stream, op);
      return;
    case CopyKind::kH2DPageable:
      copy_chunks(d.region(0), d.pageable.get(), op.bytes, cudaMemcpyHostToDevice, s.stream, op);
      return;
    case CopyKind::kD2H:
      copy_chunks(d.pinned, d.region(0), op.bytes, cudaMemcpyDeviceToHost, s.stream, op);
      return;
    case CopyKind::kD2D:
      copy_chunks(d.region(1), d.region(0), op.bytes, cudaMemcpyDeviceToDevice, s.stream, op);
      return;
    case CopyKind::kPeer:
      break;
  }
  if (op.peer_gpu < 0 || op.peer_gpu == op.gpu) {  // a "peer" copy within one GPU
    copy_chunks(d.region(1), d.region(0), op.bytes, cudaMemcpyDeviceToDevice, s.stream, op);
    return;
  }
  const DeviceState& src = device_of_gpu(op.peer_gpu);
  for (Bytes done = 0; done < op.bytes; done += kMaxBufferBytes) {
    const auto chunk = static_cast<std::size_t>(std::min(op.bytes - done, kMaxBufferBytes));
    check_op(cudaMemcpyPeerAsync(d.region(1), d.device, src.region(0), src.device, chunk, s.stream),
             "cudaMemcpyPeerAsync", label(op));
  }
}

CollectiveCall CudaRuntime::collective_call(const Op& op, cudaStream_t stream) {
  const core::CommGroup& group = groups_[static_cast<std::size_t>(op.group)];
  const auto gp = static_cast<std::size_t>(plan_.group_plan_of[static_cast<std::size_t>(op.group)]);
  const CommSet& set = comm_sets_[gp];
  DeviceState& d = device_of_gpu(op.gpu);
  CollectiveCall c;
  c.kind = op.collective;
  c.rank = rank_in_group(group, op.gpu);
  c.nranks = static_cast<int>(group.gpus.size());
  c.root = op.root >= 0 ? rank_in_group(group, op.root) : 0;  // unset root: rank 0
  c.bytes = op.bytes;
  c.send = d.region(0);
  c.recv = d.region(1);
  // This GPU's communicator: the group's ranks here are a subset when it spans processes.
  c.comm = set.comms[static_cast<std::size_t>(plan_.groups[gp].local_index(c.rank))];
  c.stream = stream;
  c.a2a_shares = &group.a2a_shares;
  return c;
}

void CudaRuntime::run_collective(const Op& op, StreamState& s) {
  const char* call = "";
  ncclResult_t r = ncclSuccess;
  std::string detail;
  {
    std::lock_guard nccl_lock(device_of_gpu(op.gpu).nccl_mu);
    if (aborted_) throw DeviceError(label(op) + ": the run was aborted");
    const CollectiveCall c = collective_call(op, s.stream);
    r = issue_collective(c, &call);
    if (r != ncclSuccess) {
      const char* last = ncclGetLastError(c.comm);
      if (last && *last) detail = std::string(": ") + last;
    }
  }
  if (r != ncclSuccess) throw_op_error(call, error_text(r) + detail, label(op));
}

void CudaRuntime::flush_batch(int batch) {
  std::vector<Op>& members = batch_ops_[static_cast<std::size_t>(batch)];
  // Every member device's NCCL mutex, in slot order (the order every thread locks them in).
  std::vector<int> devs;
  for (const Op& op : members) devs.push_back(device_of_gpu(op.gpu).slot);
  std::sort(devs.begin(), devs.end());
  devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
  {
    std::vector<std::unique_lock<std::mutex>> locks;
    for (int dev : devs) locks.emplace_back(devices_[static_cast<std::size_t>(dev)]->nccl_mu);
    if (aborted_) throw DeviceError(label(members.back()) + ": the run was aborted");
    check_op(ncclGroupStart(), "ncclGroupStart", label(members.front()));
    ncclResult_t first = ncclSuccess;
    const char* call = "";
    const Op* failed_op = &members.front();
    for (const Op& op : members) {
      first = issue_collective(
          collective_call(op, streams_[static_cast<std::size_t>(op.stream)]->stream), &call);
      if (first != ncclSuccess) {
        failed_op = &op;
        break;
      }
    }
    const ncclResult_t end = ncclGroupEnd();  // always: keep this thread's group depth balanced
    check_op(first, call, label(*failed_op));
    check_op(end, "ncclGroupEnd", label(members.back()));
  }
  for (const Op& op : members) {
    StreamState& s = *streams_[static_cast<std::size_t>(op.stream)];
    std::lock_guard lock(s.mu);
    OpState& st = ops_[static_cast<std::size_t>(op.id)];
    check_op(cudaSetDevice(s.device), "cudaSetDevice", label(op));
    check_op(cudaEventRecord(st.end, s.stream), "cudaEventRecord", label(op));
    s.pending_batch = -1;
    st.enqueued.store(true, std::memory_order_release);
    note_recorded(s, op.id);
  }
  members.clear();
}

void CudaRuntime::run_alloc(const Op& op, StreamState& s) {
  if (op.bytes <= 0) return;
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, static_cast<std::size_t>(op.bytes), s.stream);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw DeviceError("out of memory: op " + std::to_string(op.id) + " '" + label(op) +
                      "' on GPU " + std::to_string(op.gpu) + " requested " +
                      std::to_string(op.bytes) +
                      " bytes (cudaMallocAsync failed: " + error_text(e) + ")");
  }
  check_op(e, "cudaMallocAsync", label(op));
  std::lock_guard lock(alloc_mu_);
  live_[{op.gpu, static_cast<int>(op.mem_category), op.bytes}].push_back({op.id, p});
  alloc_of_op_[op.id] = p;
}

void CudaRuntime::run_free(const Op& op, StreamState& s) {
  if (op.bytes <= 0) return;
  void* p = nullptr;
  {
    std::lock_guard lock(alloc_mu_);
    auto it = live_.find({op.gpu, static_cast<int>(op.mem_category), op.bytes});
    if (it == live_.end() || it->second.empty()) {
      ++unmatched_frees_;
      return;
    }
    p = it->second.back().second;
    alloc_of_op_.erase(it->second.back().first);
    it->second.pop_back();
  }
  check_op(cudaFreeAsync(p, s.stream), "cudaFreeAsync", label(op));
}

void CudaRuntime::host_wait(OpId op) {
  if (op < 0 || static_cast<std::size_t>(op) >= n_ops_ ||
      !ops_[static_cast<std::size_t>(op)].enqueued.load(std::memory_order_acquire)) {
    failed_ = true;
    throw DeviceError("host_wait: " + not_enqueued(op));
  }
  const OpState& st = ops_[static_cast<std::size_t>(op)];
  try {
    throw_run_error();
    // The op's device, so that a thread that has enqueued nothing yet does not create a context
    // on device 0 (a process driving other devices has none there).
    if (const cudaError_t e = cudaSetDevice(st.device); e != cudaSuccess) {
      cudaGetLastError();
      throw DeviceError("cudaSetDevice failed: " + error_text(e) + " (" + st.label + ")");
    }
    if (cross_process_) {
      wait_event(st);
    } else if (const cudaError_t e = cudaEventSynchronize(st.end); e != cudaSuccess) {
      cudaGetLastError();
      throw DeviceError("cudaEventSynchronize failed: " + error_text(e) + " (" + st.label + ")");
    }
  } catch (...) {
    failed_ = true;
    throw;
  }
  // abort() stops the NCCL kernels, which lets a wait behind a collective that would never have
  // completed return: that op did not really finish.
  if (aborted_) throw DeviceError("host_wait on " + st.label + ": the run was aborted");
}

void CudaRuntime::wait_event(const OpState& st) {
  // A collective whose peer process failed never completes, and cudaEventSynchronize would wait
  // for it forever: poll, and between queries throw what the poller read from NCCL.
  const auto spin_until = std::chrono::steady_clock::now() + kHostWaitSpin;
  for (;;) {
    if (st.done.load(std::memory_order_acquire)) return;
    const cudaError_t e = cudaEventQuery(st.end);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      cudaGetLastError();
      throw DeviceError("cudaEventQuery failed: " + error_text(e) + " (" + st.label + ")");
    }
    if (aborted_) return;  // host_wait says so
    throw_run_error();
    if (std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kHostWaitPoll);
    }
  }
}

void CudaRuntime::check_comm_errors() {
  if (aborted_) throw DeviceError("the run was aborted");
  throw_run_error();
  for (std::size_t g = 0; g < comm_sets_.size(); ++g) {
    const CommSet& set = comm_sets_[g];
    const GroupPlan& gp = plan_.groups[g];
    for (std::size_t i = 0; i < set.comms.size(); ++i) {
      std::lock_guard nccl_lock(devices_[static_cast<std::size_t>(gp.slots[i])]->nccl_mu);
      if (!set.comms[i]) throw DeviceError("the run was aborted");
      ncclResult_t async = ncclSuccess;
      const ncclResult_t e = ncclCommGetAsyncError(set.comms[i], &async);
      const std::string where = "group '" + set.name + "', GPU " +
                                std::to_string(set.gpus[static_cast<std::size_t>(gp.ranks[i])]);
      if (e != ncclSuccess) {
        throw DeviceError("ncclCommGetAsyncError failed: " + error_text(e) + " (" + where + ")");
      }
      if (async != ncclSuccess && async != ncclInProgress) {
        const char* detail = ncclGetLastError(set.comms[i]);
        throw DeviceError("NCCL asynchronous error: " + error_text(async) +
                          (detail && *detail ? std::string(": ") + detail : "") + " (" + where +
                          ")");
      }
    }
  }
}

void CudaRuntime::finish() {
  try {
    throw_run_error();
    // Poll rather than block, checking NCCL between polls: a collective whose peer failed never
    // completes, and cudaStreamSynchronize would wait for it forever.
    for (const auto& sp : streams_) {
      if (!sp) continue;
      const std::string where =
          "stream '" + sp->name + "' on CUDA device " + std::to_string(sp->device);
      if (const cudaError_t e = cudaSetDevice(sp->device); e != cudaSuccess) {
        cudaGetLastError();
        throw DeviceError("cudaSetDevice failed: " + error_text(e) + " (" + where + ")");
      }
      for (;;) {
        const cudaError_t e = cudaStreamQuery(sp->stream);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) {
          cudaGetLastError();
          throw DeviceError("cudaStreamQuery failed: " + error_text(e) + " (" + where + ")");
        }
        check_comm_errors();  // and whether abort() ran
        std::this_thread::sleep_for(kFinishPoll);
      }
      const cudaError_t e = cudaStreamSynchronize(sp->stream);
      if (e != cudaSuccess) {
        cudaGetLastError();
        throw DeviceError("cudaStreamSynchronize failed: " + error_text(e) + " (" + where + ")");
      }
    }
    check_comm_errors();
    const DelayTimer::Stats delays = stop_delays(/*drain=*/true);  // all released: streams idle
    if (delays.held > 0) {
      note(std::to_string(delays.held) + " simulated-elsewhere delay(s) were released at most " +
           std::to_string(delays.worst_late_ns) +
           " ns after their simulated end on the host clock (the GPU sees a release about a "
           "microsecond later)");
    }
    // The streams are idle: one last sweep reports what finished since the poller's previous one.
    stop_poller(/*drain=*/true);
    throw_run_error();  // a callback that threw in that sweep
    for (std::size_t si = 0; polling_ && si < recorded_.size(); ++si) {
      if (recorded_[si].empty()) continue;
      throw DeviceError(ops_[static_cast<std::size_t>(recorded_[si].front())].label +
                        " finished, but the poller did not report it");
    }
    for (std::size_t b = 0; b < batch_ops_.size(); ++b) {
      if (batch_ops_[b].empty()) continue;
      note("collective instance " + std::to_string(plan_.batches[b].instance) + ": " +
           std::to_string(batch_ops_[b].size()) + " of its " +
           std::to_string(plan_.batches[b].ops.size()) +
           " ops issued by one thread were enqueued; none was launched");
    }
    if (unmatched_frees_ > 0) {
      note(std::to_string(unmatched_frees_) +
           " free op(s) matched no live allocation of their GPU, category and size, and released "
           "nothing");
    }
    compute_intervals();
    stop_tracing();  // the streams are drained: every record is complete
    finished_ = true;
  } catch (...) {
    stop_poller(/*drain=*/false);  // no report after finish() returns, even by an exception
    failed_ = true;
    throw;
  }
}

void CudaRuntime::compute_intervals() {
  for (const auto& sp : streams_) {
    if (!sp) continue;
    std::lock_guard lock(sp->mu);
    const DeviceState& d = *devices_[static_cast<std::size_t>(sp->slot)];
    cudaEvent_t anchor = d.base;
    TimeNs anchor_ns = d.base_host_ns - clock_zero_ns_;
    TimeNs prev_end = std::numeric_limits<TimeNs>::min();
    for (OpId id : sp->fifo) {
      OpState& st = ops_[static_cast<std::size_t>(id)];
      if (!st.enqueued.load()) continue;
      float ms = 0;
      const auto elapsed = [&](cudaEvent_t ev) {
        const cudaError_t e = cudaEventElapsedTime(&ms, anchor, ev);
        if (e != cudaSuccess) {
          cudaGetLastError();
          throw DeviceError("cudaEventElapsedTime failed: " + error_text(e) + " (" + st.label +
                            ")");
        }
        return ms;
      };
      float start_ms = elapsed(st.start);
      if (start_ms > kAnchorHopMs) {
        anchor_ns += ms_to_ns(start_ms);
        anchor = st.start;
        start_ms = 0;
      }
      const float end_ms = elapsed(st.end);
      // One stream runs its ops in enqueue order: clamp the nanosecond rounding at anchor hops so
      // no op appears to start before its predecessor ended.
      st.start_ns = std::max(anchor_ns + ms_to_ns(start_ms), prev_end);
      st.end_ns = std::max(anchor_ns + ms_to_ns(end_ms), st.start_ns);
      st.timed = true;
      prev_end = st.end_ns;
    }
  }
}

void CudaRuntime::abort() {
  // ncclCommAbort makes the NCCL kernels give up on peers that will not come, so the streams
  // drain and every wait on them returns; the waits then throw on aborted_. Each device's NCCL
  // mutex is taken first (in device order), so no thread is inside an NCCL call on a
  // communicator being freed, and every later call sees aborted_ and throws instead.
  aborted_ = true;
  failed_ = true;
  {
    std::lock_guard lock(poll_mu_);  // the poller checks aborted_ under it before sleeping
  }
  poll_cv_.notify_all();
  stop_delays(/*drain=*/false);  // streams held by simulated-elsewhere delays go on
  std::vector<std::unique_lock<std::mutex>> locks;
  for (auto& d : devices_) locks.emplace_back(d->nccl_mu);
  for (CommSet& set : comm_sets_) {
    for (ncclComm_t& c : set.comms) {
      if (c) ncclCommAbort(c);
      c = nullptr;
    }
  }
}

bool CudaRuntime::op_interval(OpId op, TimeNs* start_ns, TimeNs* end_ns) const {
  if (!finished_ || op < 0 || static_cast<std::size_t>(op) >= n_ops_) return false;
  const OpState& st = ops_[static_cast<std::size_t>(op)];
  if (!st.timed) return false;
  *start_ns = st.start_ns;
  *end_ns = st.end_ns;
  return true;
}

// [SECTION] Completions and asynchronous errors

void CudaRuntime::note_recorded(const StreamState& s, OpId op) {
  if (!polling_) return;
  std::lock_guard lock(poll_mu_);
  recorded_[static_cast<std::size_t>(s.index)].push_back(op);
}

void CudaRuntime::start_poller() {
  // Without a callback and without communicators across processes there is nothing to poll for.
  polling_ = static_cast<bool>(on_done_) || cross_process_;
  if (polling_) poller_ = std::thread([this] { poll_loop(); });
}

void CudaRuntime::poll_loop() {
  // Event queries need no particular device, but the runtime API would make device 0 current on
  // this thread and create a context there, even in a process that drives other devices.
  if (!devices_.empty()) cudaSetDevice(devices_.front()->device);
  auto next_comm_check = std::chrono::steady_clock::now();
  for (;;) {
    bool drain = false;
    {
      std::lock_guard lock(poll_mu_);
      if (poll_stop_ && !poll_drain_) return;
      drain = poll_stop_;
    }
    if (aborted_) return;
    const bool progressed = poll_streams();
    if (cross_process_ && std::chrono::steady_clock::now() >= next_comm_check) {
      poll_comm_errors();
      next_comm_check = std::chrono::steady_clock::now() + kCommErrorPoll;
    }
    if (drain) return;
    if (progressed) continue;
    std::unique_lock lock(poll_mu_);
    poll_cv_.wait_for(lock, kPollIdle, [this] { return poll_stop_ || aborted_.load(); });
  }
}

bool CudaRuntime::poll_streams() {
  bool progressed = false;
  for (std::deque<OpId>& queue : recorded_) {
    for (;;) {
      OpId id = -1;
      {
        std::lock_guard lock(poll_mu_);
        if (queue.empty()) break;
        id = queue.front();
      }
      OpState& st = ops_[static_cast<std::size_t>(id)];
      const cudaError_t e = cudaEventQuery(st.end);
      if (e == cudaErrorNotReady) break;  // and so are the ops behind it on this stream
      if (e != cudaSuccess) {
        cudaGetLastError();
        set_run_error("cudaEventQuery failed: " + error_text(e) + " (" + st.label + ")");
        break;
      }
      // After abort() the streams drain without the collectives having run: nothing more is
      // reported.
      if (aborted_) return progressed;
      {
        std::lock_guard lock(poll_mu_);
        queue.pop_front();
      }
      st.done.store(true, std::memory_order_release);
      progressed = true;
      if (!on_done_) continue;
      try {
        on_done_(id);
      } catch (const std::exception& ex) {
        set_run_error("the completion callback of " + st.label + " threw: " + ex.what());
      } catch (...) {
        set_run_error("the completion callback of " + st.label + " threw");
      }
    }
  }
  return progressed;
}

void CudaRuntime::poll_comm_errors() {
  if (has_run_error_) return;
  for (std::size_t g = 0; g < comm_sets_.size(); ++g) {
    const CommSet& set = comm_sets_[g];
    if (!set.spans_processes) continue;
    const GroupPlan& gp = plan_.groups[g];
    for (std::size_t i = 0; i < set.comms.size(); ++i) {
      // try_lock: an enqueue may hold the mutex while NCCL waits for other processes, and the
      // completions this thread reports may be what those processes wait for. abort() frees the
      // communicators under every mutex, so holding one keeps its communicator alive.
      std::unique_lock lock(devices_[static_cast<std::size_t>(gp.slots[i])]->nccl_mu,
                            std::try_to_lock);
      if (!lock.owns_lock() || !set.comms[i]) continue;
      const int rank = gp.ranks[i];
      const std::string where = "group '" + set.name + "', GPU " +
                                std::to_string(set.gpus[static_cast<std::size_t>(rank)]) +
                                ", NCCL rank " + std::to_string(rank) + " of " +
                                std::to_string(gp.nranks);
      ncclResult_t async = ncclSuccess;
      const ncclResult_t e = ncclCommGetAsyncError(set.comms[i], &async);
      if (e != ncclSuccess) {
        set_run_error("ncclCommGetAsyncError failed: " + error_text(e) + " (" + where + ")");
        return;
      }
      if (async != ncclSuccess && async != ncclInProgress) {
        const char* detail = ncclGetLastError(set.comms[i]);
        set_run_error("NCCL asynchronous error in " + where + ": " + error_text(async) +
                      (detail && *detail ? std::string(": ") + detail : ""));
        return;
      }
    }
  }
}

void CudaRuntime::stop_poller(bool drain) noexcept {
  if (!poller_.joinable()) return;
  {
    std::lock_guard lock(poll_mu_);
    poll_stop_ = true;
    poll_drain_ = drain;
  }
  poll_cv_.notify_all();
  poller_.join();
}

void CudaRuntime::set_run_error(std::string message) {
  std::lock_guard lock(run_error_mu_);
  if (has_run_error_) return;
  run_error_ = std::move(message);
  has_run_error_ = true;
}

void CudaRuntime::throw_run_error() {
  if (!has_run_error_.load()) return;
  std::lock_guard lock(run_error_mu_);
  throw DeviceError(run_error_);
}

}  // namespace csim::cuda::detail
