#include "backends/cuda/cuda_plan.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>

#include "backends/real/device_runtime.hpp"

namespace csim::cuda {

using core::CollectiveKind;
using core::CopyKind;
using core::Op;
using core::OpId;
using core::OpKind;

namespace {

std::string op_label(const core::Program& p, const Op& op) {
  return "op " + std::to_string(op.id) + " '" + p.name_of(op) + "'";
}

std::string gpu_list(const std::vector<int>& gpus) {
  std::string s;
  for (int g : gpus) s += (s.empty() ? "" : ", ") + std::to_string(g);
  return s;
}

}  // namespace

bool is_gemm_like(const Op& op) {
  return op.kind == OpKind::kCompute && op.flops > 0 &&
         (op.compute_kind == core::ComputeKind::kGemm ||
          op.compute_kind == core::ComputeKind::kAttention ||
          op.compute_kind == core::ComputeKind::kConv);
}

int gemm_elem_bytes(core::Dtype d) {
  // kFp8 runs as a bf16 proxy GEMM (docs/fp8.md, "Real backend").
  return d == core::Dtype::kFp16 || d == core::Dtype::kBf16 || d == core::Dtype::kFp8 ? 2 : 4;
}

std::int64_t max_gemm_size(int elem_bytes, Bytes cap_bytes) {
  const double edge = std::sqrt(static_cast<double>(cap_bytes) / elem_bytes);
  const auto n = static_cast<std::int64_t>(edge) / kGemmAlign * kGemmAlign;
  return std::max(n, kGemmAlign);
}

std::vector<GemmShape> plan_op_gemms(const Op& op) {
  return plan_gemm_shapes(op.flops, gemm_elem_bytes(op.dtype), kMaxBufferBytes);
}

bool is_rooted(CollectiveKind kind) {
  return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kReduce ||
         kind == CollectiveKind::kScatter || kind == CollectiveKind::kGather;
}

int rank_in_group(const core::CommGroup& group, int gpu) {
  const auto it = std::find(group.gpus.begin(), group.gpus.end(), gpu);
  return it == group.gpus.end() ? -1 : static_cast<int>(it - group.gpus.begin());
}

int GroupPlan::local_index(int rank) const {
  const auto it = std::find(ranks.begin(), ranks.end(), rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

std::vector<int> cuda_devices(const std::vector<int>& gpus, int cluster_gpus, int gpus_per_node,
                              int device_count) {
  if (static_cast<int>(gpus.size()) > device_count) {
    throw BackendUnavailable("the program needs " + std::to_string(gpus.size()) +
                             " GPUs in this process (GPUs " + gpu_list(gpus) + ") but " +
                             std::to_string(device_count) + " CUDA device(s) exist here");
  }
  std::vector<int> devices;
  const int per_node = std::max(gpus_per_node, 1);
  bool one_node = true;
  for (int g : gpus) one_node = one_node && g / per_node == gpus.front() / per_node;
  std::string rule;
  if (cluster_gpus <= device_count) {
    devices = gpus;
    rule = "the GPU index: the cluster's " + std::to_string(cluster_gpus) +
           " GPUs fit on this machine";
  } else if (one_node) {
    for (int g : gpus) devices.push_back(g % per_node);
    rule = "the GPU index modulo the program's " + std::to_string(per_node) + " GPUs per node";
  } else {
    for (std::size_t i = 0; i < gpus.size(); ++i) devices.push_back(static_cast<int>(i));
    rule = "the GPU's place in this process";
  }
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (devices[i] < device_count) continue;
    throw BackendUnavailable("GPU " + std::to_string(gpus[i]) + " runs on CUDA device " +
                             std::to_string(devices[i]) + " (" + rule + ") but " +
                             std::to_string(device_count) +
                             " CUDA device(s) exist here (does CUDA_VISIBLE_DEVICES hide some?)");
  }
  return devices;
}

GroupPlan plan_group(const core::CommGroup& group, const std::vector<int>& slot_of_gpu) {
  GroupPlan g;
  g.group = group.id;
  g.nranks = static_cast<int>(group.gpus.size());
  for (int r = 0; r < g.nranks; ++r) {
    const int gpu = group.gpus[static_cast<std::size_t>(r)];
    if (rank_in_group(group, gpu) != r) {
      throw BackendUnavailable("group '" + group.name + "' lists GPU " + std::to_string(gpu) +
                               " twice");
    }
    const int slot = gpu >= 0 && static_cast<std::size_t>(gpu) < slot_of_gpu.size()
                         ? slot_of_gpu[static_cast<std::size_t>(gpu)]
                         : -1;
    if (slot < 0) {
      g.spans_processes = true;
      continue;
    }
    g.ranks.push_back(r);
    g.slots.push_back(slot);
  }
  if (g.ranks.empty()) {
    throw BackendUnavailable("group '" + group.name + "' (GPUs " + gpu_list(group.gpus) +
                             ") has no GPU in this process");
  }
  return g;
}

ProcessPlan plan_process(const core::Program& program, const std::vector<int>& gpus,
                         int device_count, bool shared_nccl_ids) {
  if (program.symmetry.enabled()) {
    throw BackendUnavailable(
        "the CUDA runtime needs a full-fidelity program: this one is rank-symmetric (mirror GPUs "
        "have no ops of their own)");
  }
  ProcessPlan plan;
  plan.gpus = gpus;
  int n_gpus = program.world_gpus;
  for (int g : gpus) n_gpus = std::max(n_gpus, g + 1);
  for (const core::StreamDesc& s : program.streams) n_gpus = std::max(n_gpus, s.gpu + 1);
  plan.slot_of_gpu.assign(static_cast<std::size_t>(n_gpus), -1);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i] < 0) throw BackendUnavailable("negative GPU index " + std::to_string(gpus[i]));
    int& slot = plan.slot_of_gpu[static_cast<std::size_t>(gpus[i])];
    if (slot >= 0) throw BackendUnavailable("GPU " + std::to_string(gpus[i]) + " listed twice");
    slot = static_cast<int>(i);
  }
  plan.cuda_device = cuda_devices(gpus, n_gpus, program.gpus_per_node, device_count);
  const auto local = [&](int gpu) {
    return gpu >= 0 && gpu < n_gpus && plan.slot_of_gpu[static_cast<std::size_t>(gpu)] >= 0;
  };
  const auto slot_of = [&](int gpu) { return plan.slot_of_gpu[static_cast<std::size_t>(gpu)]; };

  plan.devices.resize(gpus.size());
  for (std::size_t i = 0; i < gpus.size(); ++i) plan.devices[i].gpu = gpus[i];
  plan.local_stream.assign(program.streams.size(), 0);
  plan.gemm_stream.assign(program.streams.size(), 0);
  plan.delay_stream.assign(program.streams.size(), 0);
  for (std::size_t s = 0; s < program.streams.size(); ++s) {
    plan.local_stream[s] = local(program.streams[s].gpu) ? 1 : 0;
  }
  plan.group_plan_of.assign(program.groups.size(), -1);
  plan.local_op.assign(program.ops.size(), 0);
  plan.batch_of_op.assign(program.ops.size(), -1);

  // Live allocations per device while walking the ops, to size the memory pools. A free releases
  // a live allocation of the same category and size, as in the runtime.
  std::vector<std::map<std::tuple<int, Bytes>, int>> live(gpus.size());
  std::vector<Bytes> live_bytes(gpus.size(), 0);
  // instance -> thread -> its ops of that instance, program order
  std::map<int, std::map<int, std::vector<OpId>>> by_instance;

  for (std::size_t i = 0; i < program.ops.size(); ++i) {
    const Op& op = program.ops[i];
    if (op.id != static_cast<OpId>(i)) {
      throw BackendUnavailable(op_label(program, op) + ": its id does not match its index " +
                               std::to_string(i) + " (core::validate_program)");
    }
    if (op.stream < 0 || !local(op.gpu)) continue;
    if (op.stream >= static_cast<int>(program.streams.size()) ||
        program.streams[static_cast<std::size_t>(op.stream)].gpu != op.gpu) {
      throw BackendUnavailable(op_label(program, op) + ": no stream " + std::to_string(op.stream) +
                               " on its GPU (core::validate_program)");
    }
    plan.local_op[static_cast<std::size_t>(op.id)] = 1;
    ++plan.local_ops;
    DevicePlan& dev = plan.devices[static_cast<std::size_t>(slot_of(op.gpu))];
    const Bytes capped = std::min(op.bytes, kMaxBufferBytes);
    // Work simulated elsewhere (core/program/program_slice.hpp, simrun --ranks): a timed wait on
    // the stream, no buffers, peers or communicators.
    if (op.fixed_ns >= 0) {
      plan.delay_stream[static_cast<std::size_t>(op.stream)] = 1;
      continue;
    }
    switch (op.kind) {
      case OpKind::kCompute:
        if (is_gemm_like(op)) {
          const int elem = gemm_elem_bytes(op.dtype);
          const std::vector<GemmShape> shapes = plan_op_gemms(op);
          for (const GemmShape& g : shapes) {
            const std::int64_t elems = std::max({g.m * g.k, g.n * g.k, g.m * g.n});
            dev.gemm_operand_bytes = std::max(dev.gemm_operand_bytes, elems * elem);
            dev.gemm_shapes.insert({op.dtype, g});
          }
          const double ratio = executed_flops(shapes) / op.flops;
          if (std::abs(ratio - 1.0) > 0.01) {
            ++dev.gemm_ops_off;
            if (std::abs(ratio - 1.0) > std::abs(dev.gemm_worst_ratio - 1.0)) {
              dev.gemm_worst_ratio = ratio;
            }
          }
          plan.gemm_stream[static_cast<std::size_t>(op.stream)] = 1;
        } else {
          dev.scratch_region_bytes =
              std::max(dev.scratch_region_bytes, std::min(op.bytes / 2, kMaxBufferBytes));
        }
        break;
      case OpKind::kCopy:
        dev.scratch_region_bytes = std::max(dev.scratch_region_bytes, capped);
        if (op.copy_kind == CopyKind::kH2DPinned || op.copy_kind == CopyKind::kD2H) {
          dev.pinned_host_bytes = std::max(dev.pinned_host_bytes, capped);
        } else if (op.copy_kind == CopyKind::kH2DPageable) {
          dev.pageable_host_bytes = std::max(dev.pageable_host_bytes, capped);
        } else if (op.copy_kind == CopyKind::kPeer && op.peer_gpu >= 0 && op.peer_gpu != op.gpu) {
          if (!local(op.peer_gpu)) {
            throw BackendUnavailable(op_label(program, op) + " copies from GPU " +
                                     std::to_string(op.peer_gpu) +
                                     ", which another process drives: the CUDA runtime has no "
                                     "peer copies between processes");
          }
          DevicePlan& src = plan.devices[static_cast<std::size_t>(slot_of(op.peer_gpu))];
          src.scratch_region_bytes = std::max(src.scratch_region_bytes, capped);
        }
        break;
      case OpKind::kCollective: {
        const core::CommGroup& group = program.groups.at(static_cast<std::size_t>(op.group));
        if (rank_in_group(group, op.gpu) < 0) {
          throw BackendUnavailable(op_label(program, op) + ": GPU " + std::to_string(op.gpu) +
                                   " is not a member of group '" + group.name + "'");
        }
        if (op.collective == CollectiveKind::kSendRecv && group.gpus.size() < 2) {
          throw BackendUnavailable(op_label(program, op) + ": send/recv needs 2 or more GPUs, '" +
                                   group.name + "' has " + std::to_string(group.gpus.size()));
        }
        if (op.root >= 0 && rank_in_group(group, op.root) < 0) {
          throw BackendUnavailable(op_label(program, op) + ": root GPU " + std::to_string(op.root) +
                                   " is not a member of group '" + group.name + "'");
        }
        plan.group_plan_of[static_cast<std::size_t>(op.group)] = 0;  // numbered below
        dev.scratch_region_bytes = std::max(dev.scratch_region_bytes, capped);
        by_instance[op.instance][op.thread].push_back(op.id);
        break;
      }
      case OpKind::kAlloc: {
        const auto d = static_cast<std::size_t>(slot_of(op.gpu));
        ++live[d][{static_cast<int>(op.mem_category), op.bytes}];
        live_bytes[d] += op.bytes;
        dev.peak_alloc_bytes = std::max(dev.peak_alloc_bytes, live_bytes[d]);
        break;
      }
      case OpKind::kFree: {
        const auto d = static_cast<std::size_t>(slot_of(op.gpu));
        auto it = live[d].find({static_cast<int>(op.mem_category), op.bytes});
        if (it != live[d].end() && it->second > 0) {
          --it->second;
          live_bytes[d] -= op.bytes;
        }
        break;
      }
      case OpKind::kHostWork:
      case OpKind::kMarker:
        break;
    }
  }

  // The groups with collective ops here, in ascending id: every process of a group then builds
  // and warms up its communicators in the same order (NCCL's init and collectives block until
  // every rank arrives, so two processes taking two groups in opposite orders would deadlock).
  for (std::size_t id = 0; id < program.groups.size(); ++id) {
    int& gp = plan.group_plan_of[id];
    if (gp < 0) continue;
    gp = static_cast<int>(plan.groups.size());
    GroupPlan g = plan_group(program.groups[id], plan.slot_of_gpu);
    g.group = static_cast<int>(id);
    if (g.spans_processes && !shared_nccl_ids) {
      const core::CommGroup& group = program.groups[id];
      int elsewhere = -1;
      for (int r = 0; r < g.nranks && elsewhere < 0; ++r) {
        if (g.local_index(r) < 0) elsewhere = group.gpus[static_cast<std::size_t>(r)];
      }
      throw BackendUnavailable("group '" + group.name + "' has GPU " + std::to_string(elsewhere) +
                               " in another process: its NCCL communicator needs an id shared "
                               "between processes (CudaOptions::shared_nccl_id), which this "
                               "launch does not provide");
    }
    plan.groups.push_back(std::move(g));
  }
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::kCollective || op.fixed_ns >= 0 || op.group < 0 ||
        static_cast<std::size_t>(op.group) >= program.groups.size()) {
      continue;
    }
    const int gp = plan.group_plan_of[static_cast<std::size_t>(op.group)];
    if (gp < 0) continue;
    GroupPlan& g = plan.groups[static_cast<std::size_t>(gp)];
    Bytes& chunk = g.chunks[op.collective];
    chunk = std::max(chunk, std::min(op.bytes, kMaxBufferBytes));
    if (is_rooted(op.collective)) {
      // As collective_call() issues it: an unset root is rank 0.
      const core::CommGroup& group = program.groups[static_cast<std::size_t>(op.group)];
      const int root = op.root >= 0 ? rank_in_group(group, op.root) : 0;
      if (root >= 0) g.roots[op.collective].insert(root);
    }
  }
  // Every member's scratch holds the group's largest chunk, even when the members' ops disagree on
  // their bytes (NCCL would then read past a smaller buffer, not fail).
  for (const GroupPlan& g : plan.groups) {
    for (const auto& [kind, chunk] : g.chunks) {
      for (int d : g.slots) {
        Bytes& region = plan.devices[static_cast<std::size_t>(d)].scratch_region_bytes;
        region = std::max(region, chunk);
      }
    }
  }
  for (const auto& [instance, threads] : by_instance) {
    for (const auto& [thread, ops] : threads) {
      if (ops.size() < 2) continue;
      for (OpId id : ops) {
        plan.batch_of_op[static_cast<std::size_t>(id)] = static_cast<int>(plan.batches.size());
      }
      plan.batches.push_back({instance, ops});
    }
  }
  return plan;
}

}  // namespace csim::cuda
