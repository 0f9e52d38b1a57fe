// CPU stand-in for GPU streams (docs/real-execution.md, "Stand-in device").
#include "backends/real/standin_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace csim::real {

std::vector<TimeNs> standin_busy_ns(const core::Program& program,
                                    const core::ExecutionResult& simulated) {
  const std::vector<core::OpTiming>& t = simulated.timings;
  std::vector<TimeNs> last_start(static_cast<std::size_t>(program.collective_instances), 0);
  for (const core::Op& op : program.ops) {
    if (op.kind == core::OpKind::kCollective && op.instance >= 0)
      last_start[static_cast<std::size_t>(op.instance)] =
          std::max(last_start[static_cast<std::size_t>(op.instance)], t[op.id].start_ns);
  }
  std::vector<TimeNs> busy(program.ops.size(), 0);
  for (const core::Op& op : program.ops) {
    const core::OpTiming& o = t[op.id];
    if (o.end_ns < 0 || op.stream < 0) continue;
    const TimeNs from = op.kind == core::OpKind::kCollective && op.instance >= 0
                            ? last_start[static_cast<std::size_t>(op.instance)]
                            : o.start_ns;
    busy[op.id] = std::max<TimeNs>(0, o.end_ns - from);
  }
  return busy;
}

StandinRuntime::StandinRuntime(std::vector<TimeNs> busy_ns, StandinOptions options)
    : busy_ns_(std::move(busy_ns)), options_(options) {}

StandinRuntime::~StandinRuntime() {
  abort();
  for (std::thread& w : workers_)
    if (w.joinable()) w.join();
}

RuntimeInfo StandinRuntime::info() const {
  RuntimeInfo i;
  i.backend = "cpu-standin";
  i.measured = false;
  i.metadata["device"] = "CPU stand-in (one worker thread per GPU stream)";
  i.metadata["time_scale"] = std::to_string(options_.time_scale);
  i.notes.push_back(
      "cpu-standin: CPU threads stood in for the GPUs; stream op durations are the simulator's "
      "(x time_scale), so this trace checks the real executor, not the hardware");
  return i;
}

TimeNs StandinRuntime::now_ns() const {
  const auto t = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t).count() - clock_zero_ns_;
}

void StandinRuntime::open(const core::Program& program, const std::vector<int>& gpus,
                          std::int64_t clock_zero_ns) {
  program_ = &program;
  clock_zero_ns_ = clock_zero_ns;
  const std::size_t n = program.ops.size();
  if (busy_ns_.size() != n) throw BackendUnavailable("stand-in durations do not match the program");
  enqueued_.assign(n, 0);
  done_.assign(n, 0);
  start_ns_.assign(n, -1);
  end_ns_.assign(n, -1);
  instances_.assign(static_cast<std::size_t>(program.collective_instances), Instance{});
  for (const core::Op& op : program.ops) {
    if (op.kind == core::OpKind::kCollective && op.instance >= 0)
      ++instances_[static_cast<std::size_t>(op.instance)].expected;
  }
  worker_of_stream_.assign(program.streams.size(), -1);
  for (const core::StreamDesc& st : program.streams) {
    if (std::find(gpus.begin(), gpus.end(), st.gpu) == gpus.end()) continue;
    worker_of_stream_[static_cast<std::size_t>(st.id)] = static_cast<int>(queues_.size());
    queues_.emplace_back();
  }
  for (std::size_t w = 0; w < queues_.size(); ++w)
    workers_.emplace_back([this, w] { work(static_cast<int>(w)); });
}

void StandinRuntime::enqueue(const core::Op& op, const std::vector<core::OpId>& stream_deps) {
  const int w = op.stream >= 0 ? worker_of_stream_[static_cast<std::size_t>(op.stream)] : -1;
  if (w < 0) throw DeviceError("op '" + program_->name_of(op) + "' names a stream this process does not drive");
  {
    std::lock_guard<std::mutex> lk(mu_);
    enqueued_[op.id] = 1;
    queues_[static_cast<std::size_t>(w)].push_back(Task{op.id, stream_deps});
  }
  cv_.notify_all();
}

void StandinRuntime::work(int worker) {
  std::deque<Task>& q = queues_[static_cast<std::size_t>(worker)];
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return aborted_ || closing_ || !q.empty(); });
    if (aborted_ || q.empty()) return;  // closing with nothing left
    const Task task = q.front();
    q.pop_front();
    // Stream order is the queue; cross-stream order is the deps (CUDA events in the real runtime).
    cv_.wait(lk, [&] {
      return aborted_ || std::all_of(task.deps.begin(), task.deps.end(),
                                     [&](core::OpId d) { return done_[d] != 0; });
    });
    if (aborted_) return;
    const core::Op& op = program_->ops[task.op];
    const TimeNs start = now_ns();
    start_ns_[op.id] = start;
    const auto busy = static_cast<TimeNs>(
        std::llround(static_cast<double>(busy_ns_[op.id]) * options_.time_scale));
    TimeNs until = start + busy;
    if (op.kind == core::OpKind::kCollective && op.instance >= 0 && rendezvous_) {
      lk.unlock();
      const TimeNs last = rendezvous_(op.instance, start);
      lk.lock();
      if (last < 0 || aborted_) return;
      until = last + busy;
    } else if (op.kind == core::OpKind::kCollective && op.instance >= 0) {
      // NCCL semantics: each member's kernel occupies its stream from its own start; data moves
      // once all members have arrived, and they finish together.
      Instance& in = instances_[static_cast<std::size_t>(op.instance)];
      ++in.arrived;
      in.last_arrival_ns = std::max(in.last_arrival_ns, start);
      cv_.notify_all();
      cv_.wait(lk, [&] { return aborted_ || in.arrived >= in.expected; });
      if (aborted_) return;
      until = in.last_arrival_ns + busy;
    }
    lk.unlock();
    std::this_thread::sleep_until(
        std::chrono::steady_clock::time_point(std::chrono::nanoseconds(until + clock_zero_ns_)));
    lk.lock();
    // The stand-in device's clock (docs/real-execution.md, "The CPU stand-in"): the op ends when
    // it was due, start + its duration. A worker the OS wakes late does not stretch the op (a GPU's
    // timestamps do not depend on its host's scheduler); the next op of this stream starts when the
    // worker is back, so dependents still start after this end.
    end_ns_[op.id] = until;
    done_[op.id] = 1;
    cv_.notify_all();
    if (on_done_) {
      lk.unlock();
      on_done_(op.id);
      lk.lock();
    }
  }
}

void StandinRuntime::host_wait(core::OpId op) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return aborted_ || done_[op] != 0; });
  if (aborted_ && done_[op] == 0) throw DeviceError("run aborted while waiting for an op");
}

void StandinRuntime::finish() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    closing_ = true;
  }
  cv_.notify_all();
  for (std::thread& w : workers_)
    if (w.joinable()) w.join();
}

void StandinRuntime::abort() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    aborted_ = true;
  }
  cv_.notify_all();
}

bool StandinRuntime::op_interval(core::OpId op, TimeNs* start_ns, TimeNs* end_ns) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (op < 0 || static_cast<std::size_t>(op) >= done_.size() || !done_[op]) return false;
  *start_ns = start_ns_[op];
  *end_ns = end_ns_[op];
  return true;
}

}  // namespace csim::real
