// Long calls off the GIL, interrupted through Python's signal check (python/bindings.hpp).
//
// Why a worker thread: Python runs signal handlers on its main thread only, when that thread
// executes Python code or calls PyErr_CheckSignals. A simulation running on the calling thread
// with the GIL released would let other threads run but never see Ctrl-C; a process signal
// handler would take SIGINT from the interpreter. So the calling thread waits for the worker and
// checks the signals meanwhile; on threads other than the main one the check does nothing.
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "python/bindings.hpp"

namespace csim::py {

bool run_interruptible(std::atomic<bool>& cancel, const std::function<void()>& body) {
  std::exception_ptr error;
  std::mutex m;
  std::condition_variable cv;
  bool done = false, interrupted = false;
  {
    pb::gil_scoped_release release;
    std::thread worker([&] {
      try {
        body();
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(m);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    while (!cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) {
      if (interrupted) continue;
      lock.unlock();
      {
        pb::gil_scoped_acquire acquire;
        if (PyErr_CheckSignals() != 0) {
          // KeyboardInterrupt (or an exception from another handler): the run stops at its next
          // cancel check and returns what finished, marked incomplete.
          PyErr_Clear();
          interrupted = true;
          cancel.store(true);
        }
      }
      lock.lock();
    }
    lock.unlock();
    worker.join();
  }
  if (error) std::rethrow_exception(error);
  return interrupted;
}

}  // namespace csim::py
