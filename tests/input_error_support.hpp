// The InputError a piece of code throws, for tests that check the key and message of a bad input
// (docs/scenario.md: one line naming the file, the JSON path and a hint).
#pragma once

#include <catch2/catch.hpp>

#include "core/error.hpp"

namespace csim::test {

// The InputError `f` throws (REQUIREs one).
template <class F>
InputError error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  FAIL("no InputError thrown");
  return InputError("", "", "");
}

}  // namespace csim::test
