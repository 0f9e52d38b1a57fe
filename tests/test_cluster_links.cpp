// cluster.nic (stack, latency_us, efficiency), cluster.p2p / nccl.p2p_disable and cluster files
// (docs/scenario.md, "cluster.nic", "cluster.p2p", "Cluster files"); expected values derived in
// comments.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.hpp"
#include "core/hardware/nic_stack.hpp"
#include "core/hardware/topology.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/test_support.hpp"

using namespace csim;
using namespace csim::core;

namespace {

const std::string kDgxH100 = test::scenario_path("clusters/dgx_h100.json");

std::string scenario_with_cluster(const std::string& cluster) {
  return R"({"cluster": )" + cluster + R"(,
    "model": {"layers": [{"type": "linear", "name": "fc", "in": 5, "out": 2}]},
    "training": {"global_batch": 32, "precision": "fp32", "optimizer": "sgd", "steps": 1},
    "strategy": {"kind": "ddp"}})";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("cluster.nic: the stack's catalogue latency, or latency_us", "[nic]") {
  // The bundled DGX H100 file: InfiniBand, the fitted 9.3 us hop (nccl_2x8h20_ib_latency).
  ClusterSpec c = parse_cluster_file(kDgxH100, {"cluster.nodes=2"});
  CHECK(c.nic.stack == NicStack::kInfiniband);
  CHECK(c.nic.latency_ns == Approx(9300));
  // GPU 0 -> GPU 8: PCIe up 0.5 + NIC up 9.3 + NIC down 9.3 + PCIe down 0.5 = 19.6 us.
  CHECK(Topology(c).route_alpha_ns(Endpoint::gpu(0), Endpoint::gpu(8)) == Approx(19600));
  // latency_us 20: 0.5 + 20 + 20 + 0.5 = 41 us; the NVSwitch hop inside a node is unchanged
  // (0.35 + 0.35 us).
  c = parse_cluster_file(kDgxH100, {"cluster.nodes=2", "cluster.nic.latency_us=20"});
  const Topology t(c);
  CHECK(t.route_alpha_ns(Endpoint::gpu(0), Endpoint::gpu(8)) == Approx(41000));
  CHECK(t.route_alpha_ns(Endpoint::gpu(0), Endpoint::gpu(1)) == Approx(700));
  // InfiniBand (fitted): no warning. RoCE: the same verbs transport, InfiniBand's figures, but
  // no published case measures it: one warning naming both keys.
  std::vector<std::string> warnings{"stale"};
  c = parse_cluster_file(kDgxH100, {"cluster.nodes=2"}, &warnings);
  CHECK(warnings.empty());
  c = parse_cluster_file(kDgxH100, {"cluster.nodes=2", "cluster.nic.stack=roce"}, &warnings);
  CHECK(c.nic.stack == NicStack::kRoce);
  CHECK(c.nic.latency_ns == Approx(9300));
  CHECK(c.nic.efficiency == Approx(0.97));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("cluster.nic.latency_us") != std::string::npos);
  CHECK(warnings[0].find("cluster.nic.efficiency") != std::string::npos);
  // EFA: its latency is fitted (nccl_2xp5_efa_latency, 21.2 us), its NIC fraction is not: the
  // warning names only cluster.nic.efficiency ...
  c = parse_cluster_file(kDgxH100, {"cluster.nodes=2", "cluster.nic.stack=efa"}, &warnings);
  CHECK(c.nic.stack == NicStack::kEfa);
  CHECK(c.nic.latency_ns == Approx(21200));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("cluster.nic.efficiency") != std::string::npos);
  CHECK(warnings[0].find("cluster.nic.latency_us") == std::string::npos);
  // ... and none once it is given; latency_us still overrides the stack's.
  c = parse_cluster_file(kDgxH100,
                         {"cluster.nodes=2", "cluster.nic.stack=efa", "cluster.nic.latency_us=15",
                          "cluster.nic.efficiency=0.9"},
                         &warnings);
  CHECK(warnings.empty());
  CHECK(nic_latency_ns(c.nic) == Approx(15000));
  CHECK(nic_efficiency(c.nic) == Approx(0.9));
  // GPUDirect-TCPX and TCPXO: both figures fitted (core/hardware/nic_stack.cpp), no warning.
  c = parse_cluster_file(kDgxH100, {"cluster.nodes=2", "cluster.nic.stack=gpudirect_tcpx"},
                         &warnings);
  CHECK(warnings.empty());
  CHECK(c.nic.latency_ns == Approx(63100));
  CHECK(c.nic.efficiency == Approx(0.673));
}

TEST_CASE("cluster.nic: the stack's line-rate fraction sets the NIC links' capacity", "[nic]") {
  // DGX H100 (8 x 50 GB/s): InfiniBand 50 x 0.97 = 48.5 GB/s per NIC link (nccl_ndr_nic_peak);
  // GPUDirect-TCPXO 50 x 0.950 = 47.5; cluster.nic.efficiency 0.8: 40. The alpha follows the
  // stack too: TCPXO GPU 0 -> GPU 8 = 0.5 + 27.2 + 27.2 + 0.5 = 55.4 us.
  auto nic_capacity = [](const Topology& t) {
    for (LinkId l : t.route(Endpoint::gpu(0), Endpoint::gpu(8)))
      if (t.links()[static_cast<std::size_t>(l)].kind == LinkKind::kNic)
        return t.links()[static_cast<std::size_t>(l)].capacity_bytes_per_s;
    return 0.0;
  };
  CHECK(nic_capacity(Topology(parse_cluster_file(kDgxH100, {"cluster.nodes=2"}))) ==
        Approx(48.5e9));
  const Topology tcpxo(
      parse_cluster_file(kDgxH100, {"cluster.nodes=2", "cluster.nic.stack=gpudirect_tcpxo"}));
  CHECK(nic_capacity(tcpxo) == Approx(47.5e9));
  CHECK(tcpxo.route_alpha_ns(Endpoint::gpu(0), Endpoint::gpu(8)) == Approx(55400));
  CHECK(nic_capacity(Topology(parse_cluster_file(
            kDgxH100, {"cluster.nodes=2", "cluster.nic.efficiency=0.8"}))) == Approx(40e9));
}

TEST_CASE("cluster.nic: bad values name the key", "[nic]") {
  std::string e = error_of([] { parse_cluster_file(kDgxH100, {"cluster.nic.stack=infiniban"}); });
  CHECK(e.find("cluster.nic.stack") != std::string::npos);
  CHECK(e.find("did you mean infiniband") != std::string::npos);
  e = error_of([] { parse_cluster_file(kDgxH100, {"cluster.nic.latency_us=0"}); });
  CHECK(e.find("cluster.nic.latency_us") != std::string::npos);
  e = error_of([] { parse_cluster_file(kDgxH100, {"cluster.nic.efficiency=1.5"}); });
  CHECK(e.find("cluster.nic.efficiency") != std::string::npos);
  e = error_of([] { parse_cluster_file(kDgxH100, {"cluster.nic.jitter_us=1"}); });
  CHECK(e.find("unknown key 'jitter_us'") != std::string::npos);
  e = error_of([] { parse_cluster_file(kDgxH100, {"cluster.p2p=maybe"}); });
  CHECK(e.find("cluster.p2p") != std::string::npos);
  e = error_of([] { parse_cluster_file(kDgxH100, {"model.layers=2"}); });
  CHECK(e.find("cluster.* keys") != std::string::npos);
}

TEST_CASE("cluster.gpu_power_limit_w: a cap up to the datasheet TDP", "[power]") {
  // H100 SXM: TDP 700 W (H100 datasheet); the catalog's published points (MLPerf Inference v4.0
  // DGX-H100 MaxQ over MaxP): (350 W, 0.746), (400 W, 0.766). 500 W lies between 400 W and the
  // TDP: 0.766 + (500 - 400) / (700 - 400) * (1 - 0.766) = 0.766 + 0.078 = 0.844. Modelled: no
  // warning.
  std::vector<std::string> warnings;
  ClusterSpec c =
      parse_cluster_file(kDgxH100, {"cluster.nodes=2", "cluster.gpu_power_limit_w=500"}, &warnings);
  CHECK(c.gpu_power_limit_w == Approx(500));
  CHECK(c.gpu.compute_clock_factor == Approx(0.844));
  CHECK(warnings.empty());
  // At a published point, its ratio; below the lowest one, held there.
  CHECK(parse_cluster_file(kDgxH100, {"cluster.gpu_power_limit_w=400"}).gpu.compute_clock_factor ==
        Approx(0.766));
  CHECK(parse_cluster_file(kDgxH100, {"cluster.gpu_power_limit_w=300"}).gpu.compute_clock_factor ==
        Approx(0.746));
  // H200: same TDP, no published point (the H100's are not reused): recorded, factor 1, warned.
  c = parse_cluster_file(kDgxH100, {"cluster.gpu=H200-SXM-141GB", "cluster.gpu_power_limit_w=500"},
                         &warnings);
  CHECK(c.gpu.compute_clock_factor == 1.0);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("500 W (TDP 700 W) is recorded, not modelled") != std::string::npos);
  // At the TDP: nothing to model, no warning; no key: no cap.
  c = parse_cluster_file(kDgxH100, {"cluster.gpu_power_limit_w=700"}, &warnings);
  CHECK(c.gpu.compute_clock_factor == 1.0);
  CHECK(warnings.empty());
  CHECK(parse_cluster_file(kDgxH100).gpu_power_limit_w == 0);
  // Above the TDP: refused, naming the key.
  std::string e = error_of([] { parse_cluster_file(kDgxH100, {"cluster.gpu_power_limit_w=800"}); });
  CHECK(e.find("cluster.gpu_power_limit_w") != std::string::npos);
  CHECK(e.find("out of range") != std::string::npos);
  // A catalog GPU given as a base keeps its TDP (the memory variant of the torchtitan rows) ...
  const std::string variant = scenario_with_cluster(
      R"({"gpus_per_node": 8, "gpu": {"base": "H100-SXM5-80GB", "memory_gib": 96,
          "mem_bw_gbps": 2400}, "gpu_power_limit_w": 500})");
  const Scenario s = parse_scenario_string(variant, "t.json");
  CHECK(s.cluster.gpu_power_limit_w == Approx(500));
  CHECK(s.cluster.gpu.memory_bytes == 96 * kGiB);
  CHECK(s.cluster.gpu.mem_bw_bytes_per_s == Approx(2400e9));
  // ... a custom GPU has no TDP to cap below.
  e = error_of([] {
    parse_scenario_string(
        scenario_with_cluster(R"({"gpu": {"name": "x", "memory_gib": 8, "peak_fp32_tflops": 10,
                                   "mem_bw_gbps": 500}, "gpu_power_limit_w": 100})"),
        "t.json");
  });
  CHECK(e.find("no datasheet TDP") != std::string::npos);
}

TEST_CASE("cluster.p2p false and nccl.p2p_disable stage through host memory", "[staging]") {
  CHECK(parse_cluster_file(kDgxH100).p2p);
  CHECK_FALSE(parse_cluster_file(kDgxH100, {"cluster.p2p=false"}).p2p);
  const std::string text =
      scenario_with_cluster(R"({"nodes": 1, "gpus_per_node": 2, "gpu": "A100-SXM4-80GB"})");
  CHECK(parse_scenario_string(text, "t.json").cluster.p2p);
  CHECK_FALSE(parse_scenario_string(text, "t.json", {"nccl.p2p_disable=true"}).cluster.p2p);
  CHECK_FALSE(parse_scenario_string(text, "t.json", {"cluster.p2p=false"}).cluster.p2p);
}

TEST_CASE("a scenario's cluster may name a cluster file, relative to the scenario", "[cluster]") {
  const auto d = test::fresh_dir("csim_cluster_file_", "rel");
  std::filesystem::create_directories(d / "clusters");
  std::filesystem::copy_file(kDgxH100, d / "clusters" / "dgx_h100.json");
  {
    std::ofstream f(d / "s.json");
    f << scenario_with_cluster(R"("clusters/dgx_h100.json")");
  }
  const Scenario s = parse_scenario_file((d / "s.json").string(), {"cluster.nodes=2"});
  CHECK(s.cluster.nodes == 2);
  CHECK(s.cluster.gpus_per_node == 8);
  CHECK(s.cluster.gpu.name == "H100-SXM5-80GB");
  CHECK(s.cluster.nics_per_node == 8);
  CHECK(s.cluster.nic_bytes_per_s == Approx(50e9));
  const std::string e = error_of([&] {
    std::ofstream f(d / "bad.json");
    f << scenario_with_cluster(R"("clusters/none.json")");
    f.close();
    parse_scenario_file((d / "bad.json").string());
  });
  CHECK(e.find("none.json") != std::string::npos);
  CHECK(e.find("cannot read the cluster file") != std::string::npos);
}

TEST_CASE("bundled cluster files: the NICs of their sources", "[cluster]") {
  // scenarios/clusters/README.md: DGX A100 8 x HDR 200 Gb/s (25 GB/s), DGX H100 and HGX H200
  // 8 x NDR 400 Gb/s (50 GB/s); NVSwitch 300 / 450 GB/s per GPU per direction.
  struct Want {
    const char* file;
    const char* gpu;
    double nic, nvswitch;
  };
  for (const Want& w : {Want{"clusters/dgx_a100.json", "A100-SXM4-80GB", 25e9, 300e9},
                        Want{"clusters/dgx_h100.json", "H100-SXM5-80GB", 50e9, 450e9},
                        Want{"clusters/hgx_h200.json", "H200-SXM-141GB", 50e9, 450e9}}) {
    INFO(w.file);
    const ClusterSpec c = parse_cluster_file(test::scenario_path(w.file), {"cluster.nodes=4"});
    CHECK(c.nodes == 4);
    CHECK(c.gpus_per_node == 8);
    CHECK(c.gpu.name == w.gpu);
    CHECK(c.nics_per_node == 8);
    CHECK(c.nic_bytes_per_s == Approx(w.nic));
    CHECK(c.intra.kind == IntraNodeKind::kNvswitch);
    CHECK(c.intra.nvswitch_bytes_per_s == Approx(w.nvswitch));
    CHECK(c.nic.stack == NicStack::kInfiniband);
  }
}
