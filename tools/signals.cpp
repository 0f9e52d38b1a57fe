#include "tools/signals.hpp"

#include <csignal>
#include <unistd.h>

#include "profiler/atomic_file.hpp"

namespace csim::app {
namespace {

std::atomic<bool> g_cancel{false};
std::atomic<bool> g_writing{false};

extern "C" void on_signal(int) {
  // Only async-signal-safe work here: flags, unlink of registered temporaries, _exit.
  if (g_writing.load() || g_cancel.load()) {
    prof::remove_inflight_temporaries();
    _exit(kExitInterrupted);
  }
  g_cancel.store(true);
}

}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

const std::atomic<bool>* cancel_flag() { return &g_cancel; }
void set_writing(bool writing) { g_writing.store(writing); }

}  // namespace csim::app
