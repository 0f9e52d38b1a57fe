// The CUDA DeviceRuntime, start-up and tear-down: everything the run needs (streams, events,
// buffers, cuBLAS handles and their workspaces, NCCL communicators, the memory pools' reserve) is
// created in open(), and the kernels and NCCL connections are warmed up there too, so the timed
// ops pay for none of it. The run itself is in cuda_enqueue.cpp.
//
// Communicators: a group whose members this process all drives gets them from ncclCommInitAll; a
// group with members in other processes from ncclCommInitRank, with the id CudaOptions::
// shared_nccl_id hands out. Every process takes its groups in ascending id, for the ids, the
// inits and the warm-up collectives alike: each of these waits for the group's other processes,
// and one common order is what keeps two processes from each waiting on a group the other has
// not reached.

#include "backends/cuda/cuda_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "backends/cuda/cuda_errors.hpp"
#include "backends/cuda/cuda_runtime_impl.hpp"

namespace csim::cuda {

using core::Op;

namespace {

// cuBLAS' recommended workspace on Hopper (4 MiB suffices before it); set explicitly so cuBLAS
// does not allocate one inside the run.
constexpr Bytes kCublasWorkspaceBytes = 32 * kMiB;
// Distinct GEMM shapes run once at open per device (cuBLAS heuristics, lazy kernel loading).
constexpr std::size_t kMaxGemmWarmups = 256;
// Copy, collective and host buffers hold this byte everywhere: finite normal values in fp16 /
// bf16 / fp32 (0x3C3C is ~1.06 in fp16). GEMM operands A and B hold random values instead
// (fill_operand_words): a GEMM on constant data draws less power and runs faster than on real
// data, which is what it stands in for.
constexpr int kFillByte = 0x3C;
// The random operand words are made on the host in a block of this size, then copied over each
// operand in turn (once, at open).
constexpr Bytes kOperandFillBlockBytes = 16 * kMiB;

TimeNs steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CUDA versions are 1000 * major + 10 * minor.
std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// NCCL_VERSION_CODE: 10000 * major + 100 * minor + patch since 2.9, 1000 * major + 100 * minor +
// patch before.
std::string nccl_version_text(int v) {
  const bool wide = v >= 20900;
  const int major = wide ? v / 10000 : v / 1000;
  const int minor = wide ? (v / 100) % 100 : (v / 100) % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

// The CUDA device count, or the one line that says why there is no usable device.
struct Probe {
  int count = 0;
  std::string problem;
};

Probe probe_devices() {
  int count = 0;  // cudaGetDeviceCount leaves it unwritten when it fails (no driver)
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return {0, "no usable CUDA GPU: cudaGetDeviceCount failed: " + error_text(e)};
  }
  if (count <= 0) return {0, "no usable CUDA GPU: cudaGetDeviceCount returned 0 devices"};
  return {count, {}};
}

}  // namespace

namespace detail {

CudaRuntime::CudaRuntime(int device_count, const CudaOptions& options)
    : device_count_(device_count), options_(options) {
  info_.backend = "cuda";
  info_.measured = true;
  cudaDeviceProp prop{};
  check_open(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties", "CUDA device 0");
  int driver = 0, runtime = 0, nccl = 0, cb_major = 0, cb_minor = 0, cb_patch = 0;
  check_open(cudaDriverGetVersion(&driver), "cudaDriverGetVersion", "start-up");
  check_open(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion", "start-up");
  check_open(ncclGetVersion(&nccl), "ncclGetVersion", "start-up");
  check_open(cublasGetProperty(MAJOR_VERSION, &cb_major), "cublasGetProperty", "start-up");
  check_open(cublasGetProperty(MINOR_VERSION, &cb_minor), "cublasGetProperty", "start-up");
  check_open(cublasGetProperty(PATCH_LEVEL, &cb_patch), "cublasGetProperty", "start-up");
  auto& md = info_.metadata;
  md["gpu_name"] = prop.name;
  md["compute_capability"] = std::to_string(prop.major) + "." + std::to_string(prop.minor);
  md["driver_version"] = cuda_version_text(driver);
  md["runtime_version"] = cuda_version_text(runtime);
  md["nccl_version"] = nccl_version_text(nccl);
  md["cublas_version"] =
      std::to_string(cb_major) + "." + std::to_string(cb_minor) + "." + std::to_string(cb_patch);
  md["device_count"] = std::to_string(device_count);
  info_.notes = {
      "compute ops ran as cuBLAS GEMMs of the op's FLOPs (GEMM, attention, conv: m = n a "
      "multiple of 64, k = FLOPs / 2mn, on random operands) or as device copies of the op's "
      "bytes (element-wise): work of the same size, not the framework's kernels",
      "collectives ran NCCL on float32 buffers of the op's bytes per GPU",
      "op times pair each GPU's event clock with the host steady clock once, at open; the pairing "
      "is late by the event synchronisation latency (a few microseconds)"};
}

void CudaRuntime::open(const core::Program& program, const std::vector<int>& gpus,
                       std::int64_t clock_zero_ns) {
  if (opened_) throw BackendUnavailable("the CUDA runtime was opened twice");
  opened_ = true;
  plan_ = plan_process(program, gpus, device_count_,
                       /*shared_nccl_ids=*/static_cast<bool>(options_.shared_nccl_id));
  clock_zero_ns_ = clock_zero_ns;
  groups_ = program.groups;
  n_ops_ = program.ops.size();
  ops_ = std::make_unique<OpState[]>(n_ops_);
  batch_ops_.resize(plan_.batches.size());
  recorded_.resize(program.streams.size());
  open_devices();
  open_streams(program);
  open_buffers();
  // Two events per op, created now: creating or destroying events inside the run would cost
  // host time and may synchronise.
  for (const Op& op : program.ops) {
    if (!plan_.local_op[static_cast<std::size_t>(op.id)]) continue;
    OpState& st = ops_[static_cast<std::size_t>(op.id)];
    st.label = op_label(op, program.name_of(op));
    const DeviceState& d = device_of_gpu(op.gpu);
    st.device = d.device;
    check_open(cudaSetDevice(d.device), "cudaSetDevice", st.label);
    check_open(cudaEventCreate(&st.start), "cudaEventCreate", st.label);
    check_open(cudaEventCreate(&st.end), "cudaEventCreate", st.label);
  }
  for (const DevicePlan& dp : plan_.devices) {
    if (dp.gemm_ops_off == 0) continue;
    note("GPU " + std::to_string(dp.gpu) + ": " + std::to_string(dp.gemm_ops_off) +
         " compute op(s) too small for a GEMM of their FLOPs (under 2 * 64 * 64 * 50) ran more "
         "than 1 % off them, at worst " +
         std::to_string(dp.gemm_worst_ratio) + " x the op's FLOPs");
  }
  open_delays();
  open_comms();
  warm_up();
  pair_clocks();
  if (options_.cupti) start_tracing(program);  // after the warm-up: its kernels are not traced
  start_poller();
}

void CudaRuntime::open_devices() {
  for (std::size_t i = 0; i < plan_.gpus.size(); ++i) {
    auto d = std::make_unique<DeviceState>();
    d->slot = static_cast<int>(i);
    d->device = plan_.cuda_device[i];
    d->gpu = plan_.gpus[i];
    const std::string where =
        "CUDA device " + std::to_string(d->device) + " (GPU " + std::to_string(d->gpu) + ")";
    DeviceState& dev = *d;
    devices_.push_back(std::move(d));
    check_open(cudaSetDevice(dev.device), "cudaSetDevice", where);
    check_open(cudaStreamCreateWithFlags(&dev.util, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags", where);
    check_open(cudaEventCreate(&dev.base), "cudaEventCreate", where);
    // The default pool keeps what the run frees (release threshold = max): no memory goes back to
    // the driver, so no cudaFree and its implicit synchronisation happen inside the run.
    check_open(cudaDeviceGetDefaultMemPool(&dev.pool, dev.device), "cudaDeviceGetDefaultMemPool",
               where);
    check_open(cudaMemPoolGetAttribute(dev.pool, cudaMemPoolAttrReleaseThreshold,
                                       &dev.old_release_threshold),
               "cudaMemPoolGetAttribute", where);
    std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    check_open(cudaMemPoolSetAttribute(dev.pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
               "cudaMemPoolSetAttribute", where);
    dev.threshold_set = true;
  }
  // Peer access wherever the hardware allows it: peer copies then go device to device (NVLink or
  // PCIe P2P) instead of through host memory, as PyTorch enables it.
  for (auto& a : devices_) {
    for (auto& b : devices_) {
      if (a == b) continue;
      int can = 0;
      const std::string where =
          "CUDA devices " + std::to_string(a->device) + " and " + std::to_string(b->device);
      check_open(cudaDeviceCanAccessPeer(&can, a->device, b->device), "cudaDeviceCanAccessPeer",
                 where);
      if (!can) continue;
      check_open(cudaSetDevice(a->device), "cudaSetDevice", where);
      const cudaError_t e = cudaDeviceEnablePeerAccess(b->device, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
        continue;
      }
      check_open(e, "cudaDeviceEnablePeerAccess", where);
      a->peers_enabled.push_back(b->device);
    }
  }
}

void CudaRuntime::open_streams(const core::Program& program) {
  streams_.resize(program.streams.size());
  for (std::size_t i = 0; i < program.streams.size(); ++i) {
    if (!plan_.local_stream[i]) continue;
    const core::StreamDesc& desc = program.streams[i];
    auto s = std::make_unique<StreamState>();
    s->index = static_cast<int>(i);
    s->slot = device_of_gpu(desc.gpu).slot;
    s->device = device_of_gpu(desc.gpu).device;
    s->name = desc.name;
    const std::string where =
        "stream " + std::to_string(i) + " '" + desc.name + "' on GPU " + std::to_string(desc.gpu);
    StreamState& st = *s;
    streams_[i] = std::move(s);
    check_open(cudaSetDevice(st.device), "cudaSetDevice", where);
    check_open(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags", where);
    if (!plan_.gemm_stream[i]) continue;
    // A handle per stream, configured once: threads issuing to different streams never share or
    // reconfigure a handle. TF32 is chosen per GEMM by its compute type, not by the math mode.
    check_open(cublasCreate(&st.blas), "cublasCreate", where);
    check_open(cublasSetStream(st.blas, st.stream), "cublasSetStream", where);
    check_open(cublasSetMathMode(st.blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode", where);
    check_open(cudaMalloc(&st.blas_workspace, kCublasWorkspaceBytes), "cudaMalloc", where);
    check_open(cublasSetWorkspace(st.blas, st.blas_workspace, kCublasWorkspaceBytes),
               "cublasSetWorkspace", where);
  }
}

void CudaRuntime::open_buffers() {
  for (auto& dp : devices_) {
    DeviceState& d = *dp;
    const DevicePlan& p = plan_.devices[static_cast<std::size_t>(d.slot)];
    const std::string where = "GPU " + std::to_string(d.gpu) + " buffers";
    check_open(cudaSetDevice(d.device), "cudaSetDevice", where);
    const auto device_buffer = [&](void** ptr, Bytes bytes) {
      check_open(cudaMalloc(ptr, static_cast<std::size_t>(bytes)), "cudaMalloc", where);
      check_open(cudaMemsetAsync(*ptr, kFillByte, static_cast<std::size_t>(bytes), d.util),
                 "cudaMemsetAsync", where);
    };
    if (p.gemm_operand_bytes > 0) {
      // C is only written (beta = 0): a memset will do.
      for (void*& m : d.gemm) device_buffer(&m, p.gemm_operand_bytes);
      fill_gemm_operands(d, p.gemm_operand_bytes, where);
    }
    if (p.scratch_region_bytes > 0) {
      d.region_bytes = p.scratch_region_bytes;
      device_buffer(&d.scratch, 2 * p.scratch_region_bytes);
    }
    if (p.pinned_host_bytes > 0) {
      check_open(cudaMallocHost(&d.pinned, static_cast<std::size_t>(p.pinned_host_bytes)),
                 "cudaMallocHost", where);
      std::memset(d.pinned, kFillByte, static_cast<std::size_t>(p.pinned_host_bytes));
    }
    if (p.pageable_host_bytes > 0) {
      // Written now so its pages are resident: the timed copies must not pay page faults.
      d.pageable = std::make_unique_for_overwrite<unsigned char[]>(
          static_cast<std::size_t>(p.pageable_host_bytes));
      std::memset(d.pageable.get(), kFillByte, static_cast<std::size_t>(p.pageable_host_bytes));
    }
  }
}

void CudaRuntime::fill_gemm_operands(DeviceState& d, Bytes bytes, const std::string& where) {
  const Bytes block = std::min(bytes, kOperandFillBlockBytes);
  std::vector<std::uint16_t> words(static_cast<std::size_t>(block) / sizeof(std::uint16_t));
  for (int i = 0; i < 2; ++i) {  // A and B, each its own values
    fill_operand_words(words.data(), words.size(),
                       /*seed=*/static_cast<std::uint64_t>(2 * d.slot + i + 1));
    auto* dst = static_cast<unsigned char*>(d.gemm[i]);
    for (Bytes done = 0; done < bytes; done += block) {
      const auto n = static_cast<std::size_t>(std::min(block, bytes - done));
      check_open(cudaMemcpy(dst + done, words.data(), n, cudaMemcpyHostToDevice), "cudaMemcpy",
                 where + " (random GEMM operands)");
    }
  }
}

std::vector<std::string> CudaRuntime::shared_ids() {
  std::vector<std::string> ids(plan_.groups.size());
  const std::function<std::string()> make = [] {
    ncclUniqueId id{};
    check_open(ncclGetUniqueId(&id), "ncclGetUniqueId", "an NCCL id shared between processes");
    return std::string(id.internal, NCCL_UNIQUE_ID_BYTES);
  };
  for (std::size_t g = 0; g < plan_.groups.size(); ++g) {
    const GroupPlan& gp = plan_.groups[g];
    if (!gp.spans_processes) continue;
    ids[g] = options_.shared_nccl_id(gp.group, make);
    if (ids[g].size() != NCCL_UNIQUE_ID_BYTES) {
      throw BackendUnavailable(
          "the NCCL id shared for group '" + groups_[static_cast<std::size_t>(gp.group)].name +
          "' has " + std::to_string(ids[g].size()) + " bytes, not " +
          std::to_string(NCCL_UNIQUE_ID_BYTES) + " (CudaOptions::shared_nccl_id)");
    }
  }
  return ids;
}

void CudaRuntime::open_comms() {
  if (plan_.groups.empty()) return;
  // By default (NCCL >= 2.22) communicators connect peers lazily, at the first collective of each
  // algorithm: that handshake would be timed inside the run and would block the calling thread
  // until the other ranks' threads arrive. Connect everything at init instead, unless the user
  // chose otherwise.
  setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
  // Every id first: an exchange may wait for the process that makes an id, which may itself be
  // asking for the id of an earlier group (ascending order keeps that chain finite).
  const std::vector<std::string> ids = shared_ids();
  for (std::size_t g = 0; g < plan_.groups.size(); ++g) {
    const GroupPlan& gp = plan_.groups[g];
    const core::CommGroup& group = groups_[static_cast<std::size_t>(gp.group)];
    CommSet cs;
    cs.name = group.name;
    cs.gpus = group.gpus;
    cs.spans_processes = gp.spans_processes;
    std::vector<int> devs;
    for (int slot : gp.slots) devs.push_back(devices_[static_cast<std::size_t>(slot)]->device);
    std::vector<ncclComm_t> comms(gp.slots.size(), nullptr);
    const std::string where = "group '" + group.name + "'";
    // Kept only on success: after a failure the array's contents are unspecified, and release()
    // must not abort what NCCL did not hand out.
    if (!gp.spans_processes) {
      check_open(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devs.data()),
                 "ncclCommInitAll", where);
    } else {
      ncclUniqueId id{};
      std::memcpy(id.internal, ids[g].data(), NCCL_UNIQUE_ID_BYTES);
      // Each ncclCommInitRank waits for the group's other ranks: one thread initialising several
      // of them must do it inside one NCCL group, each call on its rank's device.
      check_open(ncclGroupStart(), "ncclGroupStart", where);
      ncclResult_t first = ncclSuccess;
      cudaError_t set_error = cudaSuccess;
      std::string rank_where = where;
      for (std::size_t i = 0; i < comms.size() && first == ncclSuccess; ++i) {
        rank_where = where + ", NCCL rank " + std::to_string(gp.ranks[i]) + " of " +
                     std::to_string(gp.nranks) + " on CUDA device " + std::to_string(devs[i]);
        set_error = cudaSetDevice(devs[i]);
        if (set_error != cudaSuccess) break;
        first = ncclCommInitRank(&comms[i], gp.nranks, id, gp.ranks[i]);
      }
      const ncclResult_t end = ncclGroupEnd();  // always: keep this thread's group depth balanced
      check_open(set_error, "cudaSetDevice", rank_where);
      check_open(first, "ncclCommInitRank", rank_where);
      check_open(end, "ncclGroupEnd", where);
    }
    cs.comms = std::move(comms);
    comm_sets_.push_back(std::move(cs));
    cross_process_ = cross_process_ || gp.spans_processes;
  }
  note(cross_process_
           ? "NCCL communicators: ncclCommInitAll for groups within this process, "
             "ncclCommInitRank with an id shared by the launcher for groups spanning processes"
           : "NCCL communicators: ncclCommInitAll, one process driving every GPU of each group");
}

void CudaRuntime::warm_up() {
  // GEMMs: every shape once per device, so cuBLAS has chosen and loaded its kernels (CUDA loads
  // modules lazily, on first launch) before the timed run.
  for (auto& dp : devices_) {
    DeviceState& d = *dp;
    const StreamState* with_blas = nullptr;
    for (const auto& s : streams_) {
      if (s && s->device == d.device && s->blas) with_blas = s.get();
    }
    if (!with_blas) continue;
    check_open(cudaSetDevice(d.device), "cudaSetDevice", "GEMM warm-up");
    std::size_t n_done = 0;
    for (const auto& [dtype, shape] : plan_.devices[static_cast<std::size_t>(d.slot)].gemm_shapes) {
      if (n_done++ == kMaxGemmWarmups) break;
      check_open(proxy_gemm(with_blas->blas, d, dtype, shape), "cublasGemmEx",
                 "GEMM warm-up on GPU " + std::to_string(d.gpu));
    }
  }
  // Collectives: each kind once per group at its largest chunk, and a rooted kind once per root
  // the Program uses (scatter and gather connect the root to every peer), this process's ranks
  // from this thread in one NCCL group (allowed: a single thread issues every member here; a
  // group spanning processes completes when its other processes run the same warm-up, which they
  // do in the same order), so the kernels are loaded and the point-to-point connections (always
  // lazy) exist.
  for (std::size_t g = 0; g < plan_.groups.size(); ++g) {
    const GroupPlan& gp = plan_.groups[g];
    CommSet& set = comm_sets_[g];
    for (const auto& [kind, chunk] : gp.chunks) {
      const auto rooted = gp.roots.find(kind);
      const std::set<int> roots = rooted != gp.roots.end() ? rooted->second : std::set<int>{0};
      for (const int root : roots) {
        const std::string where = "NCCL warm-up of group '" + set.name + "' (" +
                                  core::to_string(kind) + ", root rank " + std::to_string(root) +
                                  ")";
        check_open(ncclGroupStart(), "ncclGroupStart", where);
        ncclResult_t first = ncclSuccess;
        const char* call = "";
        for (std::size_t i = 0; i < gp.slots.size() && first == ncclSuccess; ++i) {
          DeviceState& d = *devices_[static_cast<std::size_t>(gp.slots[i])];
          CollectiveCall c;
          c.kind = kind;
          c.rank = gp.ranks[i];
          c.nranks = gp.nranks;
          c.root = root;
          c.bytes = chunk;
          c.send = d.region(0);
          c.recv = d.region(1);
          c.comm = set.comms[i];
          c.stream = d.util;
          first = issue_collective(c, &call);
        }
        const ncclResult_t end = ncclGroupEnd();
        check_open(first, call, where);
        check_open(end, "ncclGroupEnd", where);
      }
    }
  }
  // Grow each memory pool to the Program's peak so cudaMallocAsync in the run takes memory the
  // pool already holds. Best effort: when the peak does not fit, the run allocates as it goes
  // and runs out of memory where the Program does.
  for (auto& dp : devices_) {
    DeviceState& d = *dp;
    const Bytes peak = plan_.devices[static_cast<std::size_t>(d.slot)].peak_alloc_bytes;
    check_open(cudaSetDevice(d.device), "cudaSetDevice", "memory pool reserve");
    if (peak > 0) {
      void* p = nullptr;
      const cudaError_t e = cudaMallocAsync(&p, static_cast<std::size_t>(peak), d.util);
      if (e == cudaSuccess) {
        check_open(cudaFreeAsync(p, d.util), "cudaFreeAsync", "memory pool reserve");
      } else {
        cudaGetLastError();
        note("GPU " + std::to_string(d.gpu) + ": could not reserve the program's peak of " +
             std::to_string(peak) + " bytes in the memory pool at open (" + error_text(e) + ")");
      }
    }
    check_open(cudaDeviceSynchronize(), "cudaDeviceSynchronize",
               "after warm-up on GPU " + std::to_string(d.gpu));
  }
}

void CudaRuntime::pair_clocks() {
  // Pairs each device's event clock with the host steady clock: `base` is recorded on an idle
  // stream, and the host reads its clock right after cudaEventSynchronize sees it complete. Op
  // times are then
  //   base_host_ns + cudaEventElapsedTime(base, op event) - clock_zero_ns
  // (through anchor hops, see kAnchorHopMs). The residual skew is the synchronisation latency, a
  // few microseconds, by which every op of the device appears late.
  for (auto& dp : devices_) {
    DeviceState& d = *dp;
    const std::string where = "clock pairing on GPU " + std::to_string(d.gpu);
    check_open(cudaSetDevice(d.device), "cudaSetDevice", where);
    check_open(cudaEventRecord(d.base, d.util), "cudaEventRecord", where);
    check_open(cudaEventSynchronize(d.base), "cudaEventSynchronize", where);
    d.base_host_ns = steady_now_ns();
  }
}

void CudaRuntime::start_tracing(const core::Program& program) {
  for (const Op& op : program.ops) op_gpu_.push_back(op.gpu);
  // NVML names devices by UUID and in PCI order; CUDA's order differs unless
  // CUDA_DEVICE_ORDER=PCI_BUS_ID. NVML's text form of the 16 UUID bytes is "GPU-" 8-4-4-4-12 hex.
  for (const auto& dp : devices_) {
    cudaDeviceProp prop{};
    check_open(cudaGetDeviceProperties(&prop, dp->device), "cudaGetDeviceProperties",
               "GPU " + std::to_string(dp->gpu) + " UUID");
    const auto* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
    char text[48];
    std::snprintf(text, sizeof text,
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                  b[14], b[15]);
    gpu_of_uuid_[text] = dp->gpu;
  }
  auto tracer = std::make_unique<cupti::CuptiTracer>();
  tracer->start(clock_zero_ns_);  // BackendUnavailable with CUPTI's reason
  tracer_ = std::move(tracer);
  std::lock_guard lock(info_mu_);
  info_.metadata["cupti_version"] = cupti::CuptiTracer::version_line();
  info_.metadata["cupti_clock_pair_gap_ns"] = std::to_string(tracer_->clock_pair_gap_ns());
}

void CudaRuntime::stop_tracing() {
  if (!tracer_ || !tracer_->running()) return;
  tracer_->stop();
  note(
      "CUPTI traced every kernel, memcpy, memset and launch after the warm-up: lanes 'CUPTI "
      "stream S' give each op's kernels; their times pair CUPTI's clock with the host steady "
      "clock at open (within " +
      std::to_string(tracer_->clock_pair_gap_ns()) +
      " ns), separately from the op events' pairing, so the two may be offset by microseconds");
  for (std::string& n : tracer_->notes()) note(std::move(n));
}

CuptiCapture CudaRuntime::take_cupti() {
  CuptiCapture c;
  c.clock_zero_ns = clock_zero_ns_;
  if (!tracer_) return c;
  stop_tracing();
  c.records = tracer_->take();
  c.gpu_of_uuid = gpu_of_uuid_;
  for (cupti::Record& r : c.records) {
    for (const auto& dp : devices_) {
      if (dp->device == r.device) r.gpu = dp->gpu;
    }
    // A collective batch launches every member's kernel inside one ncclGroupEnd, while the last
    // member's id is pushed: each kernel belongs to the member on its own GPU.
    if (r.op_id < 0 || static_cast<std::size_t>(r.op_id) >= op_gpu_.size() || r.gpu < 0) continue;
    const int batch = plan_.batch_of_op[static_cast<std::size_t>(r.op_id)];
    if (batch < 0 || op_gpu_[static_cast<std::size_t>(r.op_id)] == r.gpu) continue;
    for (core::OpId member : plan_.batches[static_cast<std::size_t>(batch)].ops) {
      if (op_gpu_[static_cast<std::size_t>(member)] == r.gpu) r.op_id = member;
    }
  }
  // The launch calls follow their GPU work (they carry no device of their own).
  std::map<std::int64_t, std::int64_t> op_of_correlation;
  for (const cupti::Record& r : c.records) {
    if (cupti::is_gpu_record(r.kind) && r.correlation >= 0)
      op_of_correlation.try_emplace(r.correlation, r.op_id);
  }
  for (cupti::Record& r : c.records) {
    const auto it = op_of_correlation.find(r.correlation);
    if (cupti::is_api_record(r.kind) && it != op_of_correlation.end()) r.op_id = it->second;
  }
  return c;
}

void CudaRuntime::release() noexcept {
  stop_poller(/*drain=*/false);  // before the events go
  stop_delays(/*drain=*/false);  // before the streams are synchronised: release every delay
  if (tracer_) tracer_->stop();  // before the streams go: a forced flush of what was recorded
  // After a failure, in-flight collectives may wait for peers that will never come: abort the
  // communicators (which stops their kernels) instead of destroying them after a sync.
  const bool abort_comms = failed_.load() || (opened_ && !finished_);
  for (CommSet& set : comm_sets_) {
    for (ncclComm_t& c : set.comms) {
      if (!c) continue;  // abort() already aborted it
      if (abort_comms) {
        ncclCommAbort(c);
      } else {
        ncclCommDestroy(c);
      }
      c = nullptr;
    }
  }
  for (auto& dp : devices_) {
    cudaSetDevice(dp->device);
    cudaDeviceSynchronize();
  }
  free_delay_words();  // the streams are idle
  for (auto& sp : streams_) {
    if (!sp) continue;
    cudaSetDevice(sp->device);
    if (sp->blas) cublasDestroy(sp->blas);
    if (sp->blas_workspace) cudaFree(sp->blas_workspace);
    if (sp->stream) cudaStreamDestroy(sp->stream);
  }
  for (std::size_t i = 0; i < n_ops_; ++i) {
    if (ops_[i].start) cudaEventDestroy(ops_[i].start);
    if (ops_[i].end) cudaEventDestroy(ops_[i].end);
  }
  for (auto& [key, ptrs] : live_) {
    const int gpu = std::get<0>(key);
    DeviceState& d = device_of_gpu(gpu);
    cudaSetDevice(d.device);
    for (const auto& entry : ptrs) cudaFreeAsync(entry.second, d.util);
  }
  for (auto& dp : devices_) {
    DeviceState& d = *dp;
    cudaSetDevice(d.device);
    if (d.util) cudaStreamSynchronize(d.util);
    for (void* m : d.gemm) {
      if (m) cudaFree(m);
    }
    if (d.scratch) cudaFree(d.scratch);
    if (d.pinned) cudaFreeHost(d.pinned);
    if (d.threshold_set) {
      // Restore the process-wide default pool and hand back what this run kept cached.
      cudaMemPoolSetAttribute(d.pool, cudaMemPoolAttrReleaseThreshold, &d.old_release_threshold);
      cudaMemPoolTrimTo(d.pool, 0);
    }
    for (int peer : d.peers_enabled) cudaDeviceDisablePeerAccess(peer);
    if (d.base) cudaEventDestroy(d.base);
    if (d.util) cudaStreamDestroy(d.util);
  }
  cudaGetLastError();
}

}  // namespace detail

std::unique_ptr<real::DeviceRuntime> make_cuda_runtime(const CudaOptions& options) {
  const Probe p = probe_devices();
  if (!p.problem.empty()) throw BackendUnavailable(p.problem);
  return std::make_unique<detail::CudaRuntime>(p.count, options);
}

CuptiCapture take_cupti_capture(real::DeviceRuntime& runtime) {
  auto* cuda = dynamic_cast<detail::CudaRuntime*>(&runtime);
  return cuda != nullptr ? cuda->take_cupti() : CuptiCapture{};
}

std::string cuda_probe_line() {
  const Probe p = probe_devices();
  if (!p.problem.empty()) return p.problem;
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceProperties(&prop, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return "no usable CUDA GPU: cudaGetDeviceProperties(0) failed: " + error_text(e);
  }
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  return std::to_string(p.count) + " CUDA device(s): " + prop.name + ", compute capability " +
         std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", driver " +
         cuda_version_text(driver) + ", runtime " + cuda_version_text(runtime);
}

}  // namespace csim::cuda
