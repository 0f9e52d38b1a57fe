#include "backends/sim/host_model.hpp"

namespace csim::sim {

bool FifoResource::acquire(int thread) {
  // A free unit goes to the caller only when nobody queues before it (FIFO).
  if (free_ > 0 && queue_.empty()) {
    --free_;
    return true;
  }
  queue_.push_back(thread);
  return false;
}

int FifoResource::release() {
  if (!queue_.empty()) {
    const int next = queue_.front();
    queue_.pop_front();
    return next;  // the unit passes directly to the next waiter
  }
  ++free_;
  return -1;
}

}  // namespace csim::sim
