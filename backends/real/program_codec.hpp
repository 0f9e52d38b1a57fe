// A Program as bytes (docs/real-execution.md, "Processes"): how the launcher hands the very
// Program it lowered to the rank processes it starts by exec (csim-rank), which share nothing
// with it but what they are given. Every field of the Program and of its ops is written; a decoded
// Program equals the encoded one field by field (the simulator gives the same trace on both: a
// test). Native byte order and sizes: the bytes go from one process to another of the same build
// on the same machine, never to a file that outlives the run.
#pragma once

#include <string>
#include <string_view>

#include "core/program/program.hpp"

namespace csim::real {

// Appends `p`'s encoding to `out`.
void encode_program(const core::Program& p, std::string* out);

// Decodes a Program from `bytes` starting at *offset (advanced past it). False, with *why set
// to one line, when the bytes end early or hold a value no Program has.
bool decode_program(std::string_view bytes, std::size_t* offset, core::Program* p,
                    std::string* why);

}  // namespace csim::real
