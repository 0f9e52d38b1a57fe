// Lowering: Scenario -> Program (docs/program.md). One file per strategy for single.cpp,
// data_parallel.cpp, ddp.cpp and model_parallel.cpp; the pipeline, tensor_parallel, 3d, zero and
// fsdp kinds are one composition (hybrid_3d.cpp) of one piece per parallel dimension: pipeline.cpp,
// dp_grad_reduction.cpp, zero_fsdp.cpp, recompute.cpp, tensor_parallel.cpp (hybrid_emitter.hpp;
// docs/program.md, "Adding a parallel dimension"). The shared pure pieces are in parallel_plan.hpp,
// the shared op factories in program_builder.hpp, the op names in op_names.hpp.
#pragma once

#include "core/program/program.hpp"
#include "core/progress.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

// Lowers the scenario with its strategy. Throws InputError for requests the strategy cannot
// express (e.g. more replicas than samples is a warning, not an error). With `progress`, the phase
// "lowering" counts the steps lowered, or the rank-steps (a step of one rank) of the pipeline,
// tensor-parallel, 3D, ZeRO and FSDP kinds (ProgramBuilder::set_step; docs/limits.md, "Progress").
Program lower(const Scenario& scenario, Progress* progress = nullptr);

// One per strategy kind: single.cpp, data_parallel.cpp, ddp.cpp, model_parallel.cpp,
// pipeline.cpp, tensor_parallel.cpp, hybrid_3d.cpp (3d), zero_fsdp.cpp (zero, fsdp).
Program lower_single(const Scenario& scenario, Progress* progress = nullptr);
Program lower_data_parallel(const Scenario& scenario, Progress* progress = nullptr);
Program lower_ddp(const Scenario& scenario, Progress* progress = nullptr);
Program lower_model_parallel(const Scenario& scenario, Progress* progress = nullptr);
Program lower_pipeline(const Scenario& scenario, Progress* progress = nullptr);
Program lower_tensor_parallel(const Scenario& scenario, Progress* progress = nullptr);
Program lower_3d(const Scenario& scenario, Progress* progress = nullptr);
Program lower_zero(const Scenario& scenario, Progress* progress = nullptr);
Program lower_fsdp(const Scenario& scenario, Progress* progress = nullptr);

// torch.chunk along dim 0: chunk size ceil(B/n), as many chunks as needed (docs/program.md,
// "DataParallel"). 30 over 4 -> 8/8/8/6; 6 over 4 -> 2/2/2 (only three replicas run).
std::vector<std::int64_t> torch_chunk_sizes(std::int64_t batch, int n);

// DDP bucket assignment (docs/program.md, "DDP buckets"): tensors taken in the given order, a
// bucket is closed once its size reaches its cap; the first bucket's cap is first_cap_bytes,
// the others cap_bytes. Returns, per bucket, the indices (into sizes) of its tensors.
std::vector<std::vector<int>> assign_buckets(const std::vector<Bytes>& sizes_in_order,
                                             Bytes first_cap_bytes, Bytes cap_bytes);

}  // namespace csim::core
