// The summary of a run (docs/summary.md) from its op timings, without its trace: simrun's default
// run prints it, and builds the trace only for -o, --per-rank and the GUI (docs/summary.md,
// "Without a trace").
#pragma once

#include "core/program/executor.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"
#include "profiler/summary.hpp"

namespace csim::backend {

// prof::summarize of what it reads of build_trace's trace, made without the rest: the GPU
// processes, the GPU work (compute, communication, copies) and the GIL waits as unnamed events
// without args, the ProfilerStep#N spans, the memory counters and the metadata — no host calls,
// CUDA sync records, flows or lanes. The same Summary as prof::summarize(build_trace(...)) to the
// bit (tests/test_run_summary.cpp). With `progress`, the phase "summarising", counting ops
// (docs/limits.md, "Progress").
prof::Summary summarize_run(const core::Scenario& scenario, const core::Program& program,
                            const core::ExecutionResult& result, const core::MemoryReport& memory,
                            core::Progress* progress = nullptr);

}  // namespace csim::backend
