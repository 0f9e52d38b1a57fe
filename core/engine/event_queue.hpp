// Deterministic event queue: events ordered by (time, insertion sequence), so that events at the
// same time run in the order they were scheduled (as ns-3 breaks ties). O(log n) insert and pop.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "core/units.hpp"

namespace csim::engine {

template <typename Payload>
class EventQueue {
 public:
  void push(TimeNs time_ns, Payload payload) { heap_.push(Entry{time_ns, next_seq_++, payload}); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  TimeNs top_time() const { return heap_.top().time_ns; }
  // Removes and returns the earliest event; ties in time come out in insertion order.
  Payload pop(TimeNs* time_ns) {
    Entry e = heap_.top();
    heap_.pop();
    *time_ns = e.time_ns;
    return e.payload;
  }

 private:
  struct Entry {
    TimeNs time_ns;
    std::uint64_t seq;
    Payload payload;
    bool operator>(const Entry& o) const {
      return time_ns != o.time_ns ? time_ns > o.time_ns : seq > o.seq;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace csim::engine
