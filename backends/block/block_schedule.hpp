// The block path's schedule (docs/block-eval.md, "Schedule"): chains of ops timed at kernel level,
// moved through a discrete-event schedule of streams, rendezvous and transfers.
#pragma once

#include "backends/block/block_eval.hpp"

namespace csim::block {

// Runs the schedule of a Program that block_path_unsupported() accepts; fills every figure of
// the result but `path` and `fallback_reason`.
EvalResult run_block_schedule(const core::Scenario& scenario, const core::Program& program);

}  // namespace csim::block
