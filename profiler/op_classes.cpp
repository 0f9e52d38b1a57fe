// op_class(): docs/tracediff.md "Op classes". Name rules are checked in order, first match wins, on
// the lower-cased name; our own traces carry the class in args and never reach the name rules.
#include "profiler/op_classes.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace csim::prof {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

struct Rule {
  std::string_view needle;  // substring of the lower-cased name
  std::string_view cls;
};

std::string_view by_rules(const std::string& lname, const Rule* rules, std::size_t n,
                          std::string_view fallback) {
  for (std::size_t i = 0; i < n; ++i) {
    if (lname.find(rules[i].needle) != std::string::npos) return rules[i].cls;
  }
  return fallback;
}

// Canonical names for the kinds our writer and the simulator's core::to_string produce, so that
// an arg value we do not know still maps onto a stable class string of our own.
std::string_view canonical(std::string_view s, const Rule* rules, std::size_t n,
                           std::string_view fallback) {
  return by_rules(lower(s), rules, n, fallback);
}

// Order matters: "implicit_gemm" convolutions before gemm, "reduce_scatter" before "reduce".
constexpr std::array kComputeRules = {Rule{"conv", "conv"},
                                      Rule{"wgrad", "conv"},
                                      Rule{"dgrad", "conv"},
                                      Rule{"fprop", "conv"},
                                      Rule{"flash", "attention"},
                                      Rule{"fmha", "attention"},
                                      Rule{"attention", "attention"},
                                      Rule{"gemm", "gemm"},
                                      Rule{"cutlass", "gemm"},
                                      Rule{"cublas", "gemm"},
                                      Rule{"matmul", "gemm"},
                                      Rule{"xmma", "gemm"},
                                      Rule{"norm", "norm"},
                                      Rule{"reduce", "reduction"},
                                      Rule{"adam", "optimizer"},
                                      Rule{"sgd", "optimizer"},
                                      Rule{"multi_tensor", "optimizer"},
                                      Rule{"optimizer", "optimizer"},
                                      Rule{"elementwise", "elementwise"},
                                      Rule{"vectorized", "elementwise"},
                                      Rule{"unrolled", "elementwise"},
                                      Rule{"pointwise", "elementwise"},
                                      Rule{"triton_poi", "elementwise"}};

constexpr std::array kCommRules = {Rule{"allreduce", "all_reduce"},
                                   Rule{"all_reduce", "all_reduce"},
                                   Rule{"allgather", "all_gather"},
                                   Rule{"all_gather", "all_gather"},
                                   Rule{"reducescatter", "reduce_scatter"},
                                   Rule{"reduce_scatter", "reduce_scatter"},
                                   Rule{"alltoall", "all_to_all"},
                                   Rule{"all_to_all", "all_to_all"},
                                   Rule{"broadcast", "broadcast"},
                                   Rule{"sendrecv", "send_recv"},
                                   Rule{"send_recv", "send_recv"},
                                   Rule{"send", "send_recv"},
                                   Rule{"recv", "send_recv"},
                                   Rule{"scatter", "scatter"},
                                   Rule{"gather", "gather"},
                                   Rule{"reduce", "reduce"}};

constexpr std::array kCopyRules = {Rule{"memset", "memset"},   Rule{"h2d", "memcpy_h2d"},
                                   Rule{"htod", "memcpy_h2d"}, Rule{"d2h", "memcpy_d2h"},
                                   Rule{"dtoh", "memcpy_d2h"}, Rule{"d2d", "memcpy_d2d"},
                                   Rule{"dtod", "memcpy_d2d"}, Rule{"peer", "memcpy_p2p"},
                                   Rule{"ptop", "memcpy_p2p"}, Rule{"p2p", "memcpy_p2p"}};

constexpr std::array kComputeKinds = {
    Rule{"gemm", "gemm"}, Rule{"conv", "conv"},       Rule{"attention", "attention"},
    Rule{"norm", "norm"}, Rule{"reduc", "reduction"}, Rule{"elementwise", "elementwise"}};

}  // namespace

std::string_view op_class(const TraceEvent& e) {
  switch (e.cls) {
    case EventClass::kCompute: {
      // A kernel replayed at its measured duration (simrun replay: our writer's
      // simulated_elsewhere_ns arg) keeps the name it had: classified by it, as in its own trace.
      const bool replayed = std::any_of(e.args.begin(), e.args.end(), [](const Arg& a) {
        return a.key == "simulated_elsewhere_ns";
      });
      if (const std::string* k = replayed ? nullptr : string_arg(e, "kind")) {
        return canonical(*k, kComputeKinds.data(), kComputeKinds.size(), "other_kernel");
      }
      return by_rules(lower(e.name), kComputeRules.data(), kComputeRules.size(), "other_kernel");
    }
    case EventClass::kCommunication: {
      if (const std::string* k = string_arg(e, "Collective name")) {
        return canonical(*k, kCommRules.data(), kCommRules.size(), "comm_other");
      }
      return by_rules(lower(e.name), kCommRules.data(), kCommRules.size(), "comm_other");
    }
    case EventClass::kCopy: {
      if (const std::string* k = string_arg(e, "copy_kind")) {
        return canonical(*k, kCopyRules.data(), kCopyRules.size(), "memcpy_other");
      }
      return by_rules(lower(e.name), kCopyRules.data(), kCopyRules.size(), "memcpy_other");
    }
    case EventClass::kHost: {
      const std::string c = lower(e.cat);
      if (c == "cpu_op" || c == "operator") return "cpu_op";
      if (c == "cuda_runtime" || c == "cuda_driver" || c == "runtime") return "cuda_runtime";
      if (c == "python_function" || c == "python") return "python";
      return "host_other";
    }
    case EventClass::kGilWait:
      return "gil_wait";
    case EventClass::kAnnotation:
    case EventClass::kOther:
      break;
  }
  return {};
}

}  // namespace csim::prof
