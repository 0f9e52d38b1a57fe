// Hand-built Programs for the CUDA runtime's tests: one op appended with the fields every op has.
#pragma once

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

}  // namespace csim::test
