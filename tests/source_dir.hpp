// This build's paths for the tests and benchmarks, read at run time from one generated
// translation unit per build tree (cmake/source_dir.cmake), not compiled into every object as
// string literals. So the objects of two checkouts at different paths are the same bytes and
// ccache compiles them once: scripts/standalone-check.sh's clone rebuilds only that small file.
// Every test and benchmark source gets this header through `-include` (not #included by hand).
#pragma once

namespace csim::build {
const char* source_dir();           // the source tree the build was configured from
const char* kineto_fixtures_dir();  // the CMake cache variable CSIM_KINETO_FIXTURES
const char* simrun_path();          // the built simrun
const char* mpirun_path();          // mpirun found at configure time, "" if none
const char* build_tree_tag();       // a hash of the build tree's path (test::fresh_dir)
}  // namespace csim::build

#define CSIM_SOURCE_DIR (::csim::build::source_dir())
