// Shared by the CUDA runtime's tests: hand-built Programs (one op appended with the fields every
// op has) and the visible skip (exit 77, which CTest reports as skipped) when a GPU is missing.
#pragma once

#include <cstdlib>
#include <iostream>
#include <string>

#include "core/program.hpp"

namespace csim::test {

inline core::Op& add_op(core::Program& p, core::OpKind kind, const std::string& name, int thread,
                        int stream, int gpu) {
  core::Op op;
  op.id = static_cast<core::OpId>(p.ops.size());
  op.kind = kind;
  op.name = name;
  op.thread = thread;
  op.stream = stream;
  op.gpu = gpu;
  op.step = 1;
  p.ops.push_back(op);
  return p.ops.back();
}

[[noreturn]] inline void skip(const std::string& why) {
  std::cout << "SKIPPED: " << why << std::endl;
  std::exit(77);
}

}  // namespace csim::test
