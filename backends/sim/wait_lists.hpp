// Per-op lists of waiters (threads or streams blocked until the op finishes), in registration
// order, in one pool: an op with no waiter costs two ints instead of an empty vector, and a
// registration allocates nothing once the pool has grown (docs/cost-model.md, "Simulation").
#pragma once

#include <cstddef>
#include <vector>

namespace csim::sim {

class WaitLists {
 public:
  void reset(std::size_t ops) {
    head_.assign(ops, -1);
    tail_.assign(ops, -1);
    nodes_.clear();
    free_ = -1;
  }
  // Room for `more` further ops, each with no waiter (reset(a) then extend(b): reset(a + b)).
  void extend(std::size_t more) {
    head_.insert(head_.end(), more, -1);
    tail_.insert(tail_.end(), more, -1);
  }
  // Appends `waiter` to op `op`'s list.
  void add(int op, int waiter) {
    int n = free_;
    if (n >= 0) {
      free_ = nodes_[n].next;
    } else {
      n = static_cast<int>(nodes_.size());
      nodes_.emplace_back();
    }
    nodes_[n] = Node{waiter, -1};
    if (tail_[op] < 0)
      head_[op] = n;
    else
      nodes_[tail_[op]].next = n;
    tail_[op] = n;
  }
  // Calls f(waiter) for each of op `op`'s waiters in registration order and empties the list.
  // f must not add to this op's list.
  template <typename F>
  void drain(int op, F&& f) {
    for (int n = head_[op]; n >= 0;) {
      const int next = nodes_[n].next;
      f(nodes_[n].waiter);
      nodes_[n].next = free_;
      free_ = n;
      n = next;
    }
    head_[op] = tail_[op] = -1;
  }

 private:
  struct Node {
    int waiter = -1;
    int next = -1;
  };
  std::vector<int> head_, tail_;  // by op: first and last node, -1 when none
  std::vector<Node> nodes_;
  int free_ = -1;  // free nodes, linked through next
};

}  // namespace csim::sim
