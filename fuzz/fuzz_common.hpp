// Shared by the fuzz targets (docs/fuzzing.md): what counts as a bug.
//
// A csim::InputError is the documented answer to bad input and is an expected outcome. Any other
// exception escaping a parser is a bug (the tools would print an unhelpful message or, worse, exit
// with the wrong code): it is reported with its type and message and the input aborts, so that
// libFuzzer saves it as a crash. Crashes, sanitizer reports, timeouts and out-of-memory are bugs
// too; libFuzzer detects those itself.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "core/error.hpp"

namespace csim::fuzz {

template <typename F>
void run_guarded(const char* target, F&& body) {
  try {
    body();
  } catch (const csim::InputError&) {
    // Expected: bad input refused with a message.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: BUG: exception %s escaped (not csim::InputError): %s\n", target,
                 typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "%s: BUG: non-standard exception escaped\n", target);
    std::abort();
  }
}

}  // namespace csim::fuzz
