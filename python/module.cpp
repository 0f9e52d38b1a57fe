// The compiled part of the clustersim package (python/clustersim/__init__.py wraps it;
// docs/python.md). Its functions take already-checked arguments; the package gives them their
// Python shape (keyword overrides, DataFrames, result attributes).
#include "python/bindings.hpp"

namespace csim::py {

pb::object to_python(const nlohmann::json& j) {
  return pb::module_::import("json").attr("loads")(j.dump());
}

nlohmann::json from_python(const pb::handle& obj) {
  const std::string text = pb::str(pb::module_::import("json").attr("dumps")(obj));
  return nlohmann::json::parse(text);
}

}  // namespace csim::py

PYBIND11_MODULE(_clustersim, m) {
  m.doc() = "ClusterSim's run library (docs/python.md); import clustersim, not this module";
  csim::py::bind_errors(m);
  csim::py::bind_run(m);
  csim::py::bind_sweep(m);
  csim::py::bind_tools(m);
}
