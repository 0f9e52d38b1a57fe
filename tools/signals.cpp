#include "tools/signals.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstring>

#include "profiler/atomic_file.hpp"

namespace csim::app {
namespace {

std::atomic<bool> g_cancel{false};
std::atomic<bool> g_writing{false};

// A line for the handler: two buffers, the one `active` names is complete. set_interrupt_lines
// fills the other and flips `active`; the handler reads the active one. (A handler that ran while
// a line was replaced twice could read a buffer being filled; the lines change a few times per run,
// between phases that last far longer than a handler.)
constexpr std::size_t kLineMax = 2048;
struct Line {
  std::array<std::array<char, kLineMax>, 2> text{};
  std::array<std::atomic<std::size_t>, 2> len{};
  std::atomic<int> active{0};
};
constinit Line g_on_cancel{};
constinit Line g_on_exit{};

void set_line(Line& line, const std::string& s) {
  const int next = 1 - line.active.load(std::memory_order_acquire);
  const std::size_t n = std::min(s.size(), kLineMax);
  std::memcpy(line.text[next].data(), s.data(), n);
  line.len[next].store(n, std::memory_order_release);
  line.active.store(next, std::memory_order_release);
}

// Writes LINE, "%s" replaced by WHAT, in one write(2) (a progress line written at the same time
// stays whole). Async-signal-safe: stack buffer, memcpy, write.
void write_line(const Line& line, const char* what) {
  const int a = line.active.load(std::memory_order_acquire);
  const std::size_t n = line.len[a].load(std::memory_order_acquire);
  if (n == 0) return;
  const char* s = line.text[a].data();
  char out[kLineMax + 64];
  std::size_t k = 0;
  for (std::size_t i = 0; i < n && k < sizeof out; ++i) {
    if (s[i] == '%' && i + 1 < n && s[i + 1] == 's' && what != nullptr) {
      for (const char* w = what; *w != '\0' && k < sizeof out; ++w) out[k++] = *w;
      ++i;
    } else {
      out[k++] = s[i];
    }
  }
  const ssize_t w = ::write(STDERR_FILENO, out, k);
  (void)w;
}

extern "C" void on_signal(int) {
  // Only async-signal-safe work here: flags, unlink of registered temporaries, write, _exit.
  if (g_writing.load() || g_cancel.load()) {
    const bool again = g_cancel.load();
    prof::remove_inflight_temporaries();
    write_line(g_on_exit, again ? "interrupted again" : "interrupted while writing the outputs");
    _exit(kExitInterrupted);
  }
  g_cancel.store(true);
  write_line(g_on_cancel, nullptr);
}

}  // namespace

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

const std::atomic<bool>* cancel_flag() {
  return &g_cancel;
}
void set_writing(bool writing) {
  g_writing.store(writing);
}

void set_interrupt_lines(const std::string& on_cancel, const std::string& on_exit) {
  set_line(g_on_cancel, on_cancel);
  set_line(g_on_exit, on_exit);
}

void say_on_interrupt(const std::string& tool, const std::string& first,
                      const std::string& second) {
  set_interrupt_lines(tool + ": interrupted; " + first + " (Ctrl-C again exits at once)\n",
                      tool + ": %s; exiting at once; " + second + "\n");
}

InterruptNotes::InterruptNotes(std::string tool,
                               const std::vector<std::pair<std::string, std::string>>& outputs)
    : tool_(std::move(tool)) {
  for (const auto& o : outputs)
    if (!o.second.empty()) outputs_.push_back(o);
}

std::string InterruptNotes::list(std::size_t from, std::size_t to) const {
  std::string s;
  for (std::size_t i = from; i < to && i < outputs_.size(); ++i)
    s += (s.empty() ? "" : ", ") + outputs_[i].first + " " + outputs_[i].second;
  return s;
}

void InterruptNotes::running() {
  const std::string stop =
      any() ? "stopping the run; its completed steps will be written to " + list(0, outputs_.size())
            : "stopping the run";
  set_interrupt_lines(tool_ + ": interrupted; " + stop + " (Ctrl-C again exits at once)\n",
                      tool_ + ": %s; exiting at once" +
                          (any() ? " without writing " + list(0, outputs_.size()) : std::string()) +
                          "\n");
}

void InterruptNotes::writing(std::size_t index) {
  std::string lost;
  if (index > 0) lost += "; kept: " + list(0, index);
  if (index < outputs_.size())
    lost += "; removed half-written: " + list(index, index + 1) +
            (outputs_[index].first == "--per-rank" ? " (the rank files finished before it are kept)"
                                                   : "");
  if (index + 1 < outputs_.size()) lost += "; not written: " + list(index + 1, outputs_.size());
  set_interrupt_lines("", tool_ + ": %s; exiting at once" + lost + "\n");
}

void InterruptNotes::done() {
  set_interrupt_lines("", "");
}

}  // namespace csim::app
