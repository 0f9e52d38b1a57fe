// A hand-built scenario of A100-SXM4-80GB GPUs on one node, shared by the executor tests that
// build their Programs op by op (test_sim_executor, test_resources, test_alloc_backpressure).
#pragma once

#include <catch2/catch.hpp>

#include "core/hardware/gpu_catalog.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::test {

// `gpus` A100s with the catalogue's NVLink and reserve. Host costs: the defaults the executor
// tests derive their times from (4.8 µs Python and 2 µs dispatch per op, 4 µs launch latency,
// 8 cores); a test that wants a free host sets them to zero.
inline core::Scenario a100_node(int gpus) {
  core::Scenario s;
  const core::GpuCatalogEntry* e = core::find_gpu("A100-SXM4-80GB");
  REQUIRE(e != nullptr);
  s.cluster.gpu = e->gpu;
  s.cluster.reserve = e->reserve;
  s.cluster.nodes = 1;
  s.cluster.gpus_per_node = gpus;
  s.cluster.intra = core::default_intra(*e, gpus);
  s.host.python_us_per_op = 4.8;
  s.host.dispatch_us_per_op = 2.0;
  s.host.launch_latency_us = 4.0;
  s.host.cpu_cores = 8;
  return s;
}

}  // namespace csim::test
