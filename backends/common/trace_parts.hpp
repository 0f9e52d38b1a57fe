// The parts of a trace that build_trace (trace_builder.cpp) and the summary input of a run
// without a trace (run_summary.cpp) both make: the GPU processes, the ProfilerStep#N spans, the
// memory counters and the metadata. Private to backends/common.
#pragma once

#include <vector>

#include "core/program/executor.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/program/program.hpp"
#include "core/program/step_spans.hpp"
#include "core/scenario/scenario.hpp"
#include "profiler/trace.hpp"

namespace csim::backend::detail {

// One process per simulated GPU (a mirrored GPU has none under rank symmetry).
void add_gpu_processes(prof::Trace& tr, const core::Program& p, const core::MemoryReport& mem);
// The ProfilerStep#N spans (core/program/step_spans.cpp) on each GPU's first host thread.
void add_step_annotations(prof::Trace& tr, const core::Program& p,
                          const std::vector<core::StepSpan>& step_spans);
// The "memory" counter alone: allocated bytes per GPU, in total and by category.
void add_allocated_counters(prof::Trace& tr, const core::MemoryReport& mem);
// Allocated bytes per GPU (total and by category) and the caching allocator's reserved bytes.
void add_memory_counters(prof::Trace& tr, const core::MemoryReport& mem);
// docs/trace-format.md, "Metadata".
void add_metadata(prof::Trace& tr, const core::Scenario& s, const core::Program& p,
                  const core::ExecutionResult& r, const core::MemoryReport& mem);

}  // namespace csim::backend::detail
