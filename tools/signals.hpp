// Ctrl-C / SIGTERM handling for the tools: during a run the first signal asks the executor to
// stop (RunControl::cancel); while outputs are being written, a signal removes the temporary
// files in flight and exits at once with 130. Either way no half-written output remains.
#pragma once

#include <atomic>

namespace csim::app {

void install_signal_handlers();
const std::atomic<bool>* cancel_flag();
void set_writing(bool writing);
inline constexpr int kExitInterrupted = 130;

}  // namespace csim::app
