// Deterministic event queue: events ordered by (time, insertion sequence), so that events at the
// same time run in the order they were scheduled (as ns-3 breaks ties). O(log n) insert and pop.
//
// Most events of a discrete-event run are scheduled for the current time (wake-ups, stream
// checks). Those go to a FIFO instead of the heap: an event scheduled at the current time comes
// after every event already queued for that time (its sequence number is larger), and events in
// the heap for the current time were all scheduled earlier, so popping the heap's events for the
// current time first, then the FIFO, is exactly the (time, sequence) order, with O(1) for the
// current-time events and a heap that holds only future ones.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"

namespace csim::engine {

template <typename Payload>
class EventQueue {
 public:
  void push(TimeNs time_ns, Payload payload) {
    CSIM_ASSERT_MSG(time_ns >= current_ns_, "an event scheduled in the past");
    if (time_ns == current_ns_) {
      now_fifo_.push_back(payload);
    } else {
      heap_.push(Entry{time_ns, next_seq_, payload});
    }
    ++next_seq_;
  }
  bool empty() const { return heap_.empty() && now_head_ == now_fifo_.size(); }
  std::size_t size() const { return heap_.size() + (now_fifo_.size() - now_head_); }
  TimeNs top_time() const {
    return now_head_ < now_fifo_.size() ? current_ns_ : heap_.top().time_ns;
  }
  // Removes and returns the earliest event; ties in time come out in insertion order.
  Payload pop(TimeNs* time_ns) {
    if (!heap_.empty() && heap_.top().time_ns == current_ns_) return pop_heap(time_ns);
    if (now_head_ < now_fifo_.size()) {
      *time_ns = current_ns_;
      const Payload p = now_fifo_[now_head_++];
      if (now_head_ == now_fifo_.size()) {  // drained: reuse the buffer from its start
        now_fifo_.clear();
        now_head_ = 0;
      }
      return p;
    }
    return pop_heap(time_ns);  // time moves on; the FIFO is empty
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
  Payload pop_heap(TimeNs* time_ns) {
    Entry e = heap_.top();
    heap_.pop();
    current_ns_ = e.time_ns;
    *time_ns = e.time_ns;
    return e.payload;
  }
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_;
  std::vector<Payload> now_fifo_;  // events for current_ns_, from now_head_ on
  std::size_t now_head_ = 0;
  TimeNs current_ns_ = 0;  // time of the last event popped (0 before the first)
  std::uint64_t next_seq_ = 0;
};

}  // namespace csim::engine
