// Host resources of the simulator (docs/cost-model.md, "Host"): the GIL of each Python process
// and the CPU cores of each node, both granted first-come first-served (ties by request order),
// which keeps the simulation deterministic.
#pragma once

#include <deque>
#include <vector>

namespace csim::sim {

// A resource with `capacity` identical units and a FIFO queue of waiting threads.
class FifoResource {
 public:
  explicit FifoResource(int capacity = 1) : free_(capacity) {}
  // True if `thread` got a unit now; otherwise it is queued and granted later by release().
  bool acquire(int thread);
  // Releases one unit; returns the thread that gets it next (-1 if none waits).
  int release();
  int waiting() const { return static_cast<int>(queue_.size()); }

 private:
  int free_;
  std::deque<int> queue_;
};

}  // namespace csim::sim
