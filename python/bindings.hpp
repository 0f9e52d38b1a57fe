// The pieces of the clustersim module (docs/python.md), one file each: errors.cpp (InputError and
// BackendUnavailable as Python exceptions), interrupt.cpp (long calls off the GIL, Ctrl-C through
// Python's signal check), bind_run.cpp (load, simulate, the result), bind_sweep.cpp (sweep, tune),
// bind_tools.cpp (collective, diff, replay).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include <pybind11/pybind11.h>
#include <nlohmann/json.hpp>

namespace csim::py {

namespace pb = pybind11;

void bind_errors(pb::module_& m);
void bind_run(pb::module_& m);
void bind_sweep(pb::module_& m);
void bind_tools(pb::module_& m);

// JSON across the boundary, through Python's json module: what the command lines write to files
// is what Python sees.
pb::object to_python(const nlohmann::json& j);
nlohmann::json from_python(const pb::handle& obj);

// Runs `body` on a worker thread with the GIL released, while the calling thread checks Python's
// signals every 50 ms (PyErr_CheckSignals: the handlers run on the main thread only). A
// KeyboardInterrupt sets `cancel`, which the run library polls (core::RunControl::cancel), and
// is consumed: the call returns what finished and true. Exceptions thrown by `body` are rethrown
// on the calling thread, with the GIL held, for the module's exception translators.
bool run_interruptible(std::atomic<bool>& cancel, const std::function<void()>& body);

}  // namespace csim::py
