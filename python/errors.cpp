// InputError and BackendUnavailable as Python exceptions (docs/python.md, "Errors"). An
// InputError carries the file, the JSON path, the message and the hint, and its text is the line
// simrun prints after "simrun: ". Both derive from clustersim.Error; InputError also from
// ValueError, so `except ValueError` code keeps working.
#include <pybind11/pybind11.h>

#include "core/error.hpp"
#include "python/bindings.hpp"

namespace csim::py {

void bind_errors(pb::module_& m) {
  using namespace pybind11::literals;
  // Handles kept for the interpreter's life (released, never decremented at exit).
  static pb::handle base =
      pb::exception<std::runtime_error>(m, "Error", PyExc_RuntimeError).release();
  pb::object builtins = pb::module_::import("builtins");
  pb::object type_of = builtins.attr("type");
  // class InputError(Error, ValueError) and class BackendUnavailable(Error).
  static pb::handle input_error =
      type_of("InputError", pb::make_tuple(base, pb::handle(PyExc_ValueError)),
              pb::dict("__module__"_a = "clustersim",
                       "__doc__"_a = "Bad input: .file, .json_path, .message, .hint; str() is the "
                                     "line simrun prints."))
          .release();
  static pb::handle backend_unavailable =
      type_of("BackendUnavailable", pb::make_tuple(base),
              pb::dict("__module__"_a = "clustersim",
                       "__doc__"_a = "The backend cannot run here (no GPU, no driver)."))
          .release();
  m.attr("InputError") = input_error;
  m.attr("BackendUnavailable") = backend_unavailable;
  pb::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InputError& e) {
      pb::object err = pb::reinterpret_borrow<pb::object>(input_error)(e.what());
      err.attr("file") = e.file();
      err.attr("json_path") = e.json_path();
      err.attr("message") = e.message();
      err.attr("hint") = e.hint();
      PyErr_SetObject(input_error.ptr(), err.ptr());
    } catch (const BackendUnavailable& e) {
      PyErr_SetString(backend_unavailable.ptr(), e.what());
    }
  });
}

}  // namespace csim::py
