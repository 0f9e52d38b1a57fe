// Fuzz target: the Chrome-trace reader (prof::read_chrome_trace_string), which reads our own
// traces and PyTorch-profiler (Kineto) traces (docs/trace-format.md, "Reading"). Bad records are
// counted and skipped; a file that is not a trace throws csim::InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "profiler/chrome_trace_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  csim::fuzz::run_guarded("fuzz_trace_reader", [&] {
    csim::prof::ReadStats stats;
    const csim::prof::Trace t = csim::prof::read_chrome_trace_string(json, "fuzz.json", &stats);
    (void)t;
  });
  return 0;
}
