// Lowering: Scenario -> Program, one file per strategy (single.cpp, data_parallel.cpp, ddp.cpp,
// model_parallel.cpp, pipeline.cpp, tensor_parallel.cpp, hybrid_3d.cpp, zero_fsdp.cpp; the shared
// parallel pieces in parallel_plan.hpp; the memory switches of the hybrid emitter in
// hybrid_leaks.cpp).
// What each strategy emits is written in docs/program.md.
#pragma once

#include "core/program.hpp"
#include "core/scenario.hpp"

namespace csim::core {

// Lowers the scenario with its strategy. Throws InputError for requests the strategy cannot
// express (e.g. more replicas than samples is a warning, not an error).
Program lower(const Scenario& scenario);

Program lower_single(const Scenario& scenario);
Program lower_data_parallel(const Scenario& scenario);
Program lower_ddp(const Scenario& scenario);
Program lower_model_parallel(const Scenario& scenario);   // model_parallel.cpp
Program lower_pipeline(const Scenario& scenario);         // pipeline.cpp
Program lower_tensor_parallel(const Scenario& scenario);  // tensor_parallel.cpp
Program lower_3d(const Scenario& scenario);               // hybrid_3d.cpp
Program lower_zero(const Scenario& scenario);             // zero_fsdp.cpp
Program lower_fsdp(const Scenario& scenario);             // zero_fsdp.cpp

// torch.chunk along dim 0: chunk size ceil(B/n), as many chunks as needed (docs/program.md,
// "DataParallel"). 30 over 4 -> 8/8/8/6; 6 over 4 -> 2/2/2 (only three replicas run).
std::vector<std::int64_t> torch_chunk_sizes(std::int64_t batch, int n);

// DDP bucket assignment (docs/program.md, "DDP buckets"): tensors taken in the given order, a
// bucket is closed once its size reaches its cap; the first bucket's cap is first_cap_bytes,
// the others cap_bytes. Returns, per bucket, the indices (into sizes) of its tensors.
std::vector<std::vector<int>> assign_buckets(const std::vector<Bytes>& sizes_in_order,
                                             Bytes first_cap_bytes, Bytes cap_bytes);

}  // namespace csim::core
