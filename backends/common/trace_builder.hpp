// Program + per-op timings -> Trace (docs/trace-format.md, "How a Program becomes a trace").
// Shared by every executor, so a simulated and a measured run of one scenario produce traces of
// the same shape: one process per GPU, host threads and streams as its threads, Kineto
// categories, ac2g launch -> kernel flows, memory counters, ProfilerStep#N spans.
#pragma once

#include "core/program/executor.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/trace.hpp"

namespace csim::backend {

// With `progress`, the phase "building the trace", counting ops (docs/limits.md, "Progress").
prof::Trace build_trace(const core::Scenario& scenario, const core::Program& program,
                        const core::ExecutionResult& result, const core::MemoryReport& memory,
                        core::Progress* progress = nullptr);
// The same trace formatted as it is built, for a run whose trace is only written
// (docs/trace-format.md, "Formatting while building"): its file is byte for byte that of
// build_trace's, and no TraceEvent is made. The trace is streamed (prof::FormattedTrace::
// stream_from): it holds each line's length, not the lines, and is written with
// formatted_trace_producer's producer, which builds its events again.
prof::FormattedTrace build_formatted_trace(const core::Scenario& scenario,
                                           const core::Program& program,
                                           const core::ExecutionResult& result,
                                           const core::MemoryReport& memory,
                                           core::Progress* progress = nullptr);
// The producer that writes TRACE (prof::write_chrome_trace_file(trace, path, producer)): the
// events of build_formatted_trace from the same SCENARIO, PROGRAM, RESULT and MEMORY (equal
// values; they may have moved since), which it refers to until it is destroyed. With `progress`,
// each write is the phase "writing the trace", counting ops.
prof::FormattedTrace::Producer formatted_trace_producer(const prof::FormattedTrace& trace,
                                                        const core::Scenario& scenario,
                                                        const core::Program& program,
                                                        const core::ExecutionResult& result,
                                                        const core::MemoryReport& memory,
                                                        core::Progress* progress = nullptr);

// An interrupted run (result.complete false, docs/limits.md "Interruption"): keeps the steps that
// completed, 1..K with every op of each run, and forgets the timings of the later steps' ops, so
// that the trace, memory and summary built from it cover whole steps only. Setup ops (step 0)
// that ran are kept. Returns K.
int keep_completed_steps(const core::Program& program, core::ExecutionResult* result);

// Steps 1..K whose every op ran (K = program.steps for a complete run).
int completed_steps(const core::Program& program, const core::ExecutionResult& result);

// Trace tid of a host thread and of a stream (docs/trace-format.md, "Lanes").
inline int host_tid(int thread_id) {
  return 1 + thread_id;
}
inline int stream_tid(int stream_id) {
  return 1000 + stream_id;
}

}  // namespace csim::backend
