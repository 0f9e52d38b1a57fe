// Causality of real-execution traces (docs/real-execution.md, "Timestamps and causality"): a
// device event never starts before the runtime call that launched it.
#pragma once

#include "core/units.hpp"
#include "profiler/trace.hpp"

namespace csim::backend {

// Moves the start of every device event (kernel, copy, memset: class compute, communication or
// copy) that starts before its launch (the cuda_runtime / cuda_driver event with the same
// correlation id) to the launch's start, keeping its end (or the new start, if later), and moves
// the flow ends that pointed at the old start with it. Returns the largest such correction in ns,
// 0 when every device event already followed its launch. The trace's metadata records it as
// `clock_alignment_residual_ns_max`.
TimeNs clamp_device_events_to_launches(prof::Trace* trace);

}  // namespace csim::backend
