// Micro-Programs of the calibration (docs/calibration.md, "Micro-Programs"): one op repeated on
// one stream per GPU, issued by one host thread of one process, so that a real backend runs it
// through exactly the code a real run uses (DeviceRuntime + RealExecutor) and the simulator can
// time the same Program.
#pragma once

#include <string>
#include <vector>

#include "core/program/program.hpp"

namespace csim::calibration {

// The op to repeat. `op` gives kind, compute kind, dtype, FLOPs, bytes, copy kind, collective
// kind, `gpu` and `peer_gpu` (peer copies: the source; `gpu` is the destination); ids, thread,
// stream, group, instance, deps and names are filled by the builder. Collectives run on
// `group` (global GPU indices, rank order), one member per GPU.
struct MicroSpec {
  core::Op op;
  std::vector<int> group;  // collectives only
  std::string label;       // op names: "LABEL warm-up K", "LABEL #K"
  int warmup = 2;          // untimed repetitions first (clocks, caches, lazy init)
  int repeats = 5;         // timed repetitions
  // true: each repetition waits on the host for the previous one to finish (kHostWaits), so it
  // is issued to an idle stream: what launch latency is measured on. false: back to back on the
  // stream (stream order is the only dependency).
  bool idle_between = false;
  // > 0: an untimed element-wise op of these bytes first on every stream, so that a real device
  // is busy while the host enqueues the repetitions behind it: short ops then run back to back
  // and their event-bracketed times hold no host launch gaps (docs/calibration.md,
  // "Micro-Programs").
  Bytes lead_bytes = 0;
};

struct MicroProgram {
  core::Program program;
  // Per timed repetition, its ops: one, or one per member for a collective.
  std::vector<std::vector<core::OpId>> timed;
};

// A Program on a one-node cluster of `gpus_in_node` GPUs (world_gpus = gpus_per_node = that):
// one process (no GIL: the host side costs nothing), one thread, one stream per GPU used, and
// warmup + repeats copies of the op with python_ns = dispatch_ns = 0. Valid by
// core::validate_program (asserted).
MicroProgram build_micro_program(const MicroSpec& spec, int gpus_in_node);

}  // namespace csim::calibration
