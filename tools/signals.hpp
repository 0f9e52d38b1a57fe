// Ctrl-C / SIGTERM handling for the tools: during a run the first signal asks the executor to
// stop (RunControl::cancel); while outputs are being written, a signal removes the temporary
// files in flight and exits at once with 130. Either way no half-written output remains.
//
// What the user sees (docs/limits.md, "Interruption"): a tool that names its outputs
// (InterruptNotes) has the handler say, on stderr, that the run is stopping on the first signal,
// and what is lost (outputs not written, the one in flight removed) when it exits at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace csim::app {

void install_signal_handlers();
const std::atomic<bool>* cancel_flag();
void set_writing(bool writing);
inline constexpr int kExitInterrupted = 130;

// The lines the signal handler writes (one write(2) each; no allocation in the handler: the text
// is kept in fixed buffers, published by an atomic index). Empty: the handler says nothing.
//  on_cancel: the whole line for the first signal of a run, e.g. "simrun: interrupted; stopping
//             the run ...\n";
//  on_exit:   the whole line for a signal that exits at once; "%s" in it is replaced by
//             "interrupted again" (a second signal) or "interrupted while writing the outputs".
void set_interrupt_lines(const std::string& on_cancel, const std::string& on_exit);

// The two lines for a command whose outputs are not written step by step (sweep, tune, hpo,
// compare, calibrate): "TOOL: interrupted; FIRST (Ctrl-C again exits at once)" on the first
// signal and "TOOL: interrupted again; exiting at once; SECOND" when a signal exits at once.
void say_on_interrupt(const std::string& tool, const std::string& first, const std::string& second);

// A command's outputs in the order it writes them, as (option, path) pairs (empty paths are
// skipped), and the handler's lines that follow them: before the run, what the first signal does
// and that a second loses every output; while writing, which outputs are kept, which one is
// removed half-written and which are not written.
class InterruptNotes {
 public:
  InterruptNotes(std::string tool, const std::vector<std::pair<std::string, std::string>>& outputs);
  void running();                   // the run is under way (the first signal stops it)
  void writing(std::size_t index);  // outputs before INDEX are written, INDEX is being written
  void done();                      // every output written: nothing is lost any more
  bool any() const { return !outputs_.empty(); }
  // "-o t.json, --summary s.json" for outputs [from, to).
  std::string list(std::size_t from, std::size_t to) const;

 private:
  std::string tool_;
  std::vector<std::pair<std::string, std::string>> outputs_;
};

}  // namespace csim::app
