// DeepSpeed ZeRO-3's parameter coordinator as a pure state machine (docs/program.md, "ZeRO-3
// parameter fetch"), after deepspeed/runtime/zero/partitioned_param_coordinator.py
// (PartitionedParameterCoordinator) with the options of deepspeed/runtime/zero/config.py. The
// lowering (zero3_fetch.cpp, Zero3Piece) asks it, at every use of a module, which all-gathers to
// issue and what to wait for, and after the use whether to free the module's parameters.
//
// A module is one layer with parameters above stage3_param_persistence_threshold (smaller ones
// stay gathered: "persistent"); its all-gather carries all its parameters (one per submodule,
// not one per block). Per use of module m (fetch_sub_module, then release_sub_module):
//   1. m not available and not in flight: one all-gather of m now ("on demand");
//   2. m in flight: the host checks the fetch events it recorded; with more than 2 still
//      outstanding (__max_ongoing_fetch_events = 2) it synchronizes on the oldest; it then
//      records an event at the all-gather stream's tail;
//   3. the compute stream waits for the all-gather stream (wait_stream: everything issued so far);
//   4. with a complete trace: pop m off the trace queue, then prefetch from the queue, in trace
//      order, the modules not available nor in flight while the prefetched elements stay below
//      min(stage3_max_live_parameters - live elements, stage3_prefetch_bucket_size): one
//      coalesced all-gather;
//   5. after the use, free m unless (complete trace) a prefetch skipped a later use of m, or m is
//      used again within stage3_max_reuse_distance elements of the trace.
// The trace: reset_step at every root forward (a micro-batch's forward) moves the mode from
// invalid to record (the first micro-batch records the module order) and from record to complete
// (every later one replays it); in invalid / record mode nothing is prefetched and every use frees.
#pragma once

#include <cstdint>
#include <vector>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// What one use of a module does (Zero3Coordinator::use).
struct Zero3Use {
  std::vector<std::vector<int>> gathers;  // all-gathers issued, in order; [0] on demand if any
  bool on_demand = false;                 // gathers[0] is m's own (step 1)
  int handle_waited = -1;  // serial of the gather whose wait() runs here first (its host cost)
  int host_sync = -1;      // serial of the gather the host synchronizes on (-1: none)
  int tail = -1;           // serial of the latest gather issued before the wait (-1: none)
};

class Zero3Coordinator {
 public:
  // numel[m]: the elements module m gathers (0: not a module / persistent).
  Zero3Coordinator(const Zero3Spec& z, std::vector<std::int64_t> numel);

  void reset_step();                 // a root forward begins
  Zero3Use use(int m, bool traced);  // traced false: an evaluation pass (no trace, no prefetch)
  bool release(int m, bool traced);  // after the use: true if m's parameters are freed
  std::vector<int> release_all();    // every module still gathered, freed (end of step)

  bool trace_complete() const { return mode_ == Mode::kComplete; }
  std::int64_t live_numel() const { return live_; }
  int gathers_issued() const { return serials_; }
  // The modules gather `serial` carries.
  const std::vector<int>& gather_modules(int serial) const {
    return modules_[static_cast<std::size_t>(serial)];
  }
  const std::vector<int>& trace() const { return trace_; }

 private:
  enum class Mode { kInvalid, kRecord, kComplete };
  enum class Status : std::uint8_t { kNotAvailable, kInflight, kAvailable };
  Zero3Spec z_;
  std::vector<std::int64_t> numel_;
  Mode mode_ = Mode::kInvalid;
  std::vector<int> trace_;  // module per use, recorded by the first micro-batch
  std::size_t pos_ = 0;     // replay: the current use's trace position
  std::size_t queue_ = 0;   // replay: the next trace position the prefetch queue pops
  std::vector<Status> status_;
  std::vector<int> handle_;                // per module: its gather's serial while in flight
  std::vector<char> handle_done_;          // per serial: wait() ran
  std::vector<std::vector<int>> modules_;  // per serial: its modules
  std::vector<std::int64_t> popped_;       // per module: last trace position the queue popped
  std::vector<int> ongoing_;               // fetch events: gather serials, oldest first
  std::int64_t live_ = 0;                  // gathered or in-flight elements
  int serials_ = 0;
  std::size_t use_pos_ = 0;  // trace position of the use being released

  int issue(const std::vector<int>& mods);
  void free_module(int m);
};

// What one use of a module does under DeepSpeed 0.3.13 - 0.5.10 (Zero3SyncCoordinator::use).
struct Zero3SyncUse {
  bool fetch = false;  // the module's parameters are gathered now (not gathered, not in flight)
  bool synchronize = false;   // _synchronize_communication: the host waits for the whole device
  int handles = 0;            // in-flight gathers whose handle.wait() runs there
  std::vector<int> prefetch;  // modules gathered after the fetch (prefetch_next_sub_modules)
};

// DeepSpeed ZeRO-3's coordinator before 0.6.0, after deepspeed/runtime/zero/stage3.py of v0.3.14
// (0cd9abf20416c1fce091e7f79694f02fd21b3687; the fetch unchanged in substance to v0.5.10): its
// PartitionedParameterCoordinator (lines 274-491) and PrefetchCoordinator (lines 148-271).
//   - fetch_sub_module (357-411): a module's parameters not gathered are gathered now; if any were,
//     or any is in flight (prefetched), _synchronize_communication (483-491) waits every in-flight
//     handle, then comm_stream.synchronize() and torch.cuda.synchronize(): the host waits for
//     everything the device has queued.
//   - prefetch_next_sub_modules (312-334): only with a finished trace, nothing in flight and the
//     gathered elements below stage3_max_live_parameters: from this use on (get_params_to_prefetch,
//     188-219) the parameters not gathered, in trace order, until at least
//     stage3_prefetch_bucket_size elements.
//   - release_sub_module (413-453): partitions the module unless, with a finished trace, its next
//     use is within stage3_max_reuse_distance elements (_keep_for_later, 464-470; the elements of
//     every module used in between, get_reuse_distance_in_numel 222-271).
//   - the trace is every module use from the first forward until the first optimizer step
//     (record_trace; finish_tracing in the step's _pre_step, lines 2240-2251): step 1 gathers on
//     demand, later steps prefetch; the position restarts at every forward (reset_step).
// Modules are gathered whole (its parameters above the persistence threshold): DeepSpeed walks
// parameters, which for a layer's one big weight is the same.
class Zero3SyncCoordinator {
 public:
  // numel[m]: the elements module m gathers (0: none, or persistent); params[m]: all its
  // parameters (a reuse distance counts them); a use is recorded when params[m] > 0.
  Zero3SyncCoordinator(const Zero3Spec& z, std::vector<std::int64_t> numel,
                       std::vector<std::int64_t> params);

  void begin_step(int step);             // step 1 records the trace, later steps replay it
  void reset_step();                     // a forward begins (the root module's pre-forward hook)
  Zero3SyncUse use(int m, bool traced);  // traced false: an evaluation pass
  bool release(int m, bool traced);      // after the use: true if m's parameters are freed
  std::vector<int> release_all();        // every module still gathered, freed (end of step)

  std::int64_t live_numel() const { return live_; }
  const std::vector<int>& trace() const { return trace_; }

 private:
  enum class Status : std::uint8_t { kNotAvailable, kInflight, kAvailable };
  Zero3Spec z_;
  std::vector<std::int64_t> numel_, params_;
  bool recording_ = false, complete_ = false;
  std::vector<int> trace_;
  std::size_t pos_ = 0;  // the next use's trace position (step_id)
  std::vector<Status> status_;
  int inflight_ = 0;  // handles not yet waited
  std::int64_t live_ = 0;
  std::size_t use_pos_ = 0;  // trace position of the use being released

  void gather(int m);
};

}  // namespace csim::core
