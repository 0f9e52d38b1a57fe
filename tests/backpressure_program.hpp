// Hand-built Programs for the allocation-backpressure tests (tests/test_alloc_backpressure.cpp,
// the op level; tests/test_block_backpressure.cpp, the block path): one A100, one thread, stream 0
// = compute, stream 1 = a side stream (DeepSpeed's all-gather stream, say).
#pragma once

#include "core/program/program.hpp"

namespace csim::test {

inline core::Program backpressure_skeleton() {
  core::Program p;
  p.world_gpus = 1;
  p.gpus_per_node = 1;
  p.active_gpus = {0};
  p.processes.push_back({0, 0, "python", true});
  p.threads.push_back({0, 0, 0, "main"});
  p.streams.push_back({0, 0, core::StreamRole::kCompute, "compute"});
  p.streams.push_back({1, 0, core::StreamRole::kComm, "side"});
  return p;
}

// An allocation or a free of `bytes` on `stream`; a free is record_stream'd (a gathered buffer's
// free_param), so it may run on another stream than its allocation's.
inline core::OpId add_backpressure_mem(core::Program& p, core::OpKind kind, int stream,
                                       Bytes bytes) {
  core::Op op;
  op.id = static_cast<core::OpId>(p.ops.size());
  op.kind = kind;
  op.name = p.names.intern("buf");
  op.thread = 0;
  op.stream = stream;
  op.gpu = 0;
  op.bytes = bytes;
  op.mem_category = core::MemCategory::kCommBuffers;
  op.record_stream = kind == core::OpKind::kFree;
  p.ops.push_back(op);
  return op.id;
}

inline constexpr double kBackpressureGemmFlops = 1e12;  // fp32 GEMM: milliseconds on an A100

// A GEMM on the compute stream, with the host's python and dispatch costs (microseconds).
inline core::OpId add_backpressure_kernel(core::Program& p) {
  core::Op op;
  op.id = static_cast<core::OpId>(p.ops.size());
  op.kind = core::OpKind::kCompute;
  op.name = p.names.intern("k");
  op.thread = 0;
  op.stream = 0;
  op.gpu = 0;
  op.compute_kind = core::ComputeKind::kGemm;
  op.dtype = core::Dtype::kFp32;
  op.flops = kBackpressureGemmFlops;
  op.python_ns = 4800;
  op.dispatch_ns = 2000;
  p.ops.push_back(op);
  return op.id;
}

}  // namespace csim::test
