// The variants of a sweep (docs/sweep.md, "Variants"): scenario knobs named by their dotted JSON
// path, each with a list of values (`--grid KEY=V1,V2,...`), combined as a full grid (the first
// key varies slowest) or sampled at random without repetition (`--random N --seed S`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace csim::sweep {

struct Knob {
  std::string key;                  // dotted path, as simrun --set takes it
  std::vector<std::string> values;  // VALUE texts (read as JSON when they parse, as --set does)
};

struct Variant {
  std::size_t index = 0;            // position in the space (grid order)
  std::vector<std::string> values;  // one per knob
};

// Parses "KEY=V1,V2,...": commas inside [], {} or "" do not split. Throws csim::InputError
// naming `--grid` and the text on a missing '=', an empty key or an empty value.
Knob parse_knob(const std::string& text);

// Every combination, first knob slowest. Throws InputError when the product exceeds `limit`.
std::size_t grid_size(const std::vector<Knob>& knobs);
std::vector<Variant> grid_variants(const std::vector<Knob>& knobs, std::size_t limit);

// `n` distinct combinations drawn uniformly at random with std::mt19937_64(seed) (all of them,
// in grid order, when n >= the grid size); returned in the order drawn.
std::vector<Variant> random_variants(const std::vector<Knob>& knobs, std::size_t n,
                                     std::uint64_t seed);

// The --set strings of a variant ("key=value" per knob).
std::vector<std::string> variant_sets(const std::vector<Knob>& knobs, const Variant& v);

// A stable text naming the variant ("key=value key=value"), for resuming.
std::string variant_id(const std::vector<Knob>& knobs, const std::vector<std::string>& values);

}  // namespace csim::sweep
