// CUPTI activity tracing for the CUDA runtime (docs/real-execution.md, "CUPTI and NVML"): what
// each kernel, memcpy, memset and NCCL launch of a run did on the GPU, mapped back to the Program
// op that issued it. Built only with the CUDA backend; the header has no CUDA or CUPTI types, so
// backends/cuda includes it without CUPTI's headers.
//
// Use: start() once the warm-up is done, push_op(id) / pop_op() around each op's CUDA calls on the
// issuing thread (OpScope), stop() after the device work has finished, then take() the records.
// CUPTI's buffer callbacks are process-wide: one tracer at a time is active in a process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profiler/cupti/cupti_records.hpp"

namespace csim::cupti {

class CuptiTracer {
 public:
  CuptiTracer();
  ~CuptiTracer();  // stops a running trace; records not taken are lost
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // Registers the buffer callbacks, pairs CUPTI's clock with the host steady clock and enables
  // the activity kinds. `clock_zero_ns` is the run's origin on the host steady clock: record
  // times are reported relative to it. Throws BackendUnavailable with one line (the CUPTI
  // call and cuptiGetResultString's text) when CUPTI cannot trace here: no GPU or driver, another
  // CUPTI client holding the activity API, another CuptiTracer active in this process.
  void start(std::int64_t clock_zero_ns);

  // While an op is pushed on a thread, every runtime and driver call of that thread (and so every
  // kernel, memcpy and NCCL launch it makes) carries the op id as its external correlation id
  // (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0). Cheap; never throws: a failure is counted and
  // reported by notes().
  void push_op(std::int64_t op_id);
  void pop_op();

  // Flushes every buffer (cuptiActivityFlushAll with FLUSH_FORCED) and disables the kinds. Call
  // after the traced work has finished on the device: a forced flush delivers incomplete records
  // as they are. Never throws; failures become notes. Idempotent.
  void stop();
  bool running() const;

  // After stop(): the records in start-time order, op ids resolved (resolve_op_ids), sync
  // records given their device, NVTX start/end pairs joined into ranges. Moves them out.
  std::vector<Record> take();

  // How the clock pairing went: the smallest host-clock gap around a cuptiGetTimestamp() read,
  // which bounds the residual skew between CUPTI's records and the host clock.
  std::int64_t clock_pair_gap_ns() const;
  // Caveats for the trace: dropped records, kinds that could not be enabled, push/pop failures.
  std::vector<std::string> notes() const;

  // The CUPTI version here ("CUPTI API 130001"), or why it cannot be read.
  static std::string version_line();

  struct Impl;  // internal; named here so that CUPTI's process-wide callbacks can reach it

 private:
  std::unique_ptr<Impl> impl_;
};

// Pushes `op_id` for its lifetime, when a tracer is given; does nothing otherwise, so untraced
// runs pay one pointer test.
class OpScope {
 public:
  OpScope(CuptiTracer* tracer, std::int64_t op_id) : tracer_(tracer) {
    if (tracer_) tracer_->push_op(op_id);
  }
  ~OpScope() {
    if (tracer_) tracer_->pop_op();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  CuptiTracer* tracer_;
};

}  // namespace csim::cupti
