// Fuzz target: the replay importer (docs/replay.md): a PyTorch-profiler trace through the three
// stages (replay::tokenize_string, sort_trace, build_replay_program) into a Program, which must
// then be valid (core::validate_program). Bad records are counted and skipped; a file that is not
// a trace, or holds nothing to replay, throws csim::InputError.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "fuzz/fuzz_common.hpp"
#include "replay/kineto_tokenizer.hpp"
#include "replay/replay_program.hpp"
#include "replay/trace_sorter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string json(reinterpret_cast<const char*>(data), size);
  csim::fuzz::run_guarded("fuzz_replay_importer", [&] {
    std::vector<csim::replay::SortedTrace> traces;
    traces.push_back(csim::replay::sort_trace(csim::replay::tokenize_string(json, "fuzz.json")));
    const csim::replay::ReplayProgram rp = csim::replay::build_replay_program(std::move(traces));
    const std::string problem = csim::core::validate_program(rp.program);
    CSIM_ASSERT_MSG(problem.empty(), problem.c_str());
  });
  return 0;
}
