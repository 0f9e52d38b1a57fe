// A model's layer by name, for tests that check one layer's figures (a test fails when it is
// missing).
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "core/scenario/scenario.hpp"

namespace csim::test {

inline const core::LayerSpec& layer(const core::ModelSpec& m, const std::string& name) {
  for (const core::LayerSpec& l : m.layers)
    if (l.name == name) return l;
  FAIL("no layer " + name);
  return m.layers.front();
}

}  // namespace csim::test
