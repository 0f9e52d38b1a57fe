// simview's memory view on a real PyTorch-profiler trace recorded with profile_memory=True:
// ../shared/fixtures/kineto/df_index_resolver.json.gz, whose [memory] events (26,770 on device 1,
// Device Type 1; 1,240 host ones) give the caching allocator's "Total Allocated" and "Total
// Reserved" and no category. The allocated curve must be drawn (memory_bands), peaking at the
// largest "Total Allocated" of device 1: 6,629,508,096 bytes (6.63 GB; read from the file with
// Python: max of args["Total Allocated"] over [memory] events with "Device Type" 1).
// The fixture may not be committed: without it the executable's main (kineto_fixtures_main.cpp)
// prints why and exits 77, which CTest reports as skipped (tests/kineto_fixtures.hpp).
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "gui/document.hpp"
#include "gui/memory_model.hpp"
#include "kineto_fixtures.hpp"

using namespace csim;
using namespace csim::gui;

namespace {

const std::string kFixture = test::kineto_fixture("df_index_resolver.json.gz");

}  // namespace

TEST_CASE("df_index_resolver: the profile_memory trace's allocated curve is drawn",
          "[gui][kineto]") {
  const std::unique_ptr<Document> doc = load_document(kFixture);
  const MemoryModel& m = doc->memory;
  CHECK(m.categories.empty());
  CHECK(m.has_unattributed);
  REQUIRE(m.gpus.size() == 1);
  const GpuMemory& g = m.gpus[0];
  CHECK(g.gpu == 1);
  CHECK(g.allocated.size() == 26770);
  CHECK(g.peak_bytes == 6629508096.0);
  CHECK_FALSE(g.reserved.empty());
  // The stack's top is the allocated total at every sample: one band, as tall as it.
  for (std::size_t s = 0; s < g.allocated.size(); ++s) {
    const std::vector<MemoryBand> b = memory_bands(g, s);
    if (g.allocated[s] == 0) {
      CHECK(b.empty());
      continue;
    }
    REQUIRE(b.size() == 1);
    CHECK(b[0].category == -1);
    CHECK(b[0].bytes == g.allocated[s]);
  }
}
