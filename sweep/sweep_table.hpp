// The sweep's table on stdout (docs/sweep.md, "Table"): the best `top` rows, then counts.
#pragma once

#include <ostream>
#include <vector>

#include "sweep/results_io.hpp"

namespace csim::sweep {

void print_sweep_table(const std::vector<VariantResult>& sorted_rows, const ResultsHeader& header,
                       int top, std::ostream& out);

}  // namespace csim::sweep
