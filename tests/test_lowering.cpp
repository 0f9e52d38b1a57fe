// Lowering invariants: torch.chunk sizes, DDP bucket boundaries, and the shape of the single,
// DataParallel and DDP programs (who does what, where memory lives).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "core/lowering/lowering.hpp"
#include "core/lowering/program_builder.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "tests/test_support.hpp"

using namespace csim;
using namespace csim::core;

TEST_CASE("torch.chunk sizes follow ceil(B/n) and drop empty chunks", "[lowering]") {
  // chunk = ceil(30/2) = 15 -> 15, 15
  CHECK(torch_chunk_sizes(30, 2) == std::vector<std::int64_t>{15, 15});
  // chunk = ceil(30/3) = 10 -> 10, 10, 10
  CHECK(torch_chunk_sizes(30, 3) == std::vector<std::int64_t>{10, 10, 10});
  // chunk = ceil(30/4) = 8 -> 8, 8, 8, then 30 - 24 = 6
  CHECK(torch_chunk_sizes(30, 4) == std::vector<std::int64_t>{8, 8, 8, 6});
  // chunk = ceil(6/4) = 2 -> 2, 2, 2 and nothing left for a fourth chunk
  CHECK(torch_chunk_sizes(6, 4) == std::vector<std::int64_t>{2, 2, 2});
  // the notes' last batch of an epoch: 100 = 3 x 30 + 10; 10 over 2 -> 5, 5
  CHECK(torch_chunk_sizes(10, 2) == std::vector<std::int64_t>{5, 5});
  CHECK(torch_chunk_sizes(1, 4) == std::vector<std::int64_t>{1});
}

TEST_CASE("batches follow the epoch with a partial last batch", "[lowering]") {
  // dataset 100, batch 30: 30, 30, 30, 10, then the next epoch starts again with 30
  CHECK(batch_for_step(30, 100, 1) == 30);
  CHECK(batch_for_step(30, 100, 3) == 30);
  CHECK(batch_for_step(30, 100, 4) == 10);
  CHECK(batch_for_step(30, 100, 5) == 30);
  CHECK(batch_for_step(30, 0, 7) == 30);
}

TEST_CASE("DDP buckets: 1 MiB first bucket, then bucket_cap, closed once reached",
          "[lowering][ddp]") {
  // Tensors in bucket order (reverse layer order), in MiB: 0.75, 0.5, 10, 10, 8, 30, 1.
  // Bucket 0 (limit 1 MiB): 0.75 < 1, +0.5 = 1.25 >= 1 -> closed {0, 1}.
  // Bucket 1 (limit 25 MiB): 10, 20, 28 >= 25 -> closed {2, 3, 4}.
  // Bucket 2: 30 >= 25 -> closed alone {5}. Bucket 3: the remaining 1 MiB {6}.
  const std::vector<Bytes> sizes{3 * kMiB / 4, kMiB / 2,  10 * kMiB, 10 * kMiB,
                                 8 * kMiB,     30 * kMiB, kMiB};
  const auto b = assign_buckets(sizes, kMiB, 25 * kMiB);
  REQUIRE(b.size() == 4);
  CHECK(b[0] == std::vector<int>{0, 1});
  CHECK(b[1] == std::vector<int>{2, 3, 4});
  CHECK(b[2] == std::vector<int>{5});
  CHECK(b[3] == std::vector<int>{6});
}

namespace {

int count_ops(const Program& p, OpKind kind, int gpu, const std::string& name_part = {}) {
  return static_cast<int>(std::count_if(p.ops.begin(), p.ops.end(), [&](const Op& op) {
    return op.kind == kind && op.gpu == gpu && p.name_of(op).find(name_part) != std::string::npos;
  }));
}

Bytes allocated_in(const Program& p, int gpu, MemCategory c) {
  Bytes b = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != gpu || op.mem_category != c) continue;
    if (op.kind == OpKind::kAlloc) b += op.bytes;
  }
  return b;
}

}  // namespace

TEST_CASE("DataParallel: scatter, replicate, one thread per replica, optimizer on device_ids[0]",
          "[lowering][dp]") {
  const Scenario s = parse_scenario_file(
      test::scenario_path("linear_5x2_dp4.json"),
      {"training.steps=1", "training.dataset_size=0", "training.sgd_momentum=0.9"});
  const Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  const int d0 = s.strategy.device_ids.front();
  // batch 30 over 4 -> chunks 8/8/8/6: one forward per replica with args.batch = its chunk
  std::vector<std::int64_t> fwd_batches;
  for (const Op& op : p.ops) {
    if (op.phase == Phase::kForward && op.kind == OpKind::kCompute) fwd_batches.push_back(op.batch);
  }
  CHECK(fwd_batches == std::vector<std::int64_t>{8, 8, 8, 6});
  // the optimizer runs on device_ids[0] only, and only there is optimizer state allocated
  for (int g : s.strategy.device_ids) {
    CHECK(count_ops(p, OpKind::kCompute, g, "optimizer.step") == (g == d0 ? 1 : 0));
    CHECK((allocated_in(p, g, MemCategory::kOptimizer) > 0) == (g == d0));
  }
  // one Python process; parallel_apply threads share its GIL
  CHECK(p.processes.size() == 1);
  // replicate is a broadcast from device_ids[0] over the 4 replicas; Broadcast's backward a reduce
  // onto it
  CHECK(count_ops(p, OpKind::kCollective, d0, "replicate") == 1);
  CHECK(count_ops(p, OpKind::kCollective, d0, "reduce_add") == 1);
}

TEST_CASE("DataParallel with fewer chunks than devices runs fewer replicas and warns",
          "[lowering][dp]") {
  const Scenario s = parse_scenario_file(
      test::scenario_path("linear_5x2_dp4.json"),
      {"training.steps=1", "training.global_batch=6", "training.dataset_size=0"});
  const Program p = lower(s);
  // 6 over 4 -> 2/2/2: GPU 3 does no forward at all
  CHECK(count_ops(p, OpKind::kCompute, s.strategy.device_ids[3], ".fwd") == 0);
  REQUIRE(!p.warnings.empty());
  CHECK(p.warnings.front().find("only 3 replicas run") != std::string::npos);
}

TEST_CASE("DDP: one process per rank, all-reduce per bucket per step, optimizer everywhere",
          "[lowering][ddp]") {
  const Scenario s = parse_scenario_file(test::scenario_path("dp_vs_ddp_4x1080ti.json"),
                                         {"strategy.kind=ddp", "training.steps=2"});
  const Program p = lower(s);
  REQUIRE(validate_program(p).empty());
  const int n = static_cast<int>(s.strategy.device_ids.size());
  int main_processes = 0;
  for (const ProcessDesc& pr : p.processes)
    main_processes += pr.name.rfind("python rank", 0) == 0 ? 1 : 0;
  CHECK(main_processes == n);
  // buckets recomputed independently from the model's gradient sizes
  std::vector<Bytes> sizes;
  for (auto it = s.model.layers.rbegin(); it != s.model.layers.rend(); ++it) {
    if (it->params > 0)
      sizes.push_back(it->params *
                      precision_bytes(s.training.precision, s.training.amp_dtype).grads);
  }
  const auto buckets = assign_buckets(sizes, kMiB, 25 * kMiB);
  for (int g : s.strategy.device_ids) {
    CHECK(count_ops(p, OpKind::kCollective, g, "all_reduce") ==
          2 * static_cast<int>(buckets.size()));
    CHECK(count_ops(p, OpKind::kCompute, g, "optimizer.step") == 2);
  }
}

TEST_CASE("DDP no_sync: gradient accumulation all-reduces only the last micro-step",
          "[lowering][ddp]") {
  const Scenario s = parse_scenario_file(
      test::scenario_path("dp_vs_ddp_4x1080ti.json"),
      {"strategy.kind=ddp", "training.steps=1", "training.gradient_accumulation=4"});
  const Program p1 = lower(s);
  const Scenario s0 = parse_scenario_file(test::scenario_path("dp_vs_ddp_4x1080ti.json"),
                                          {"strategy.kind=ddp", "training.steps=1"});
  const Program p0 = lower(s0);
  const int g = s.strategy.device_ids.front();
  // 4 micro-steps, 3 under no_sync: as many all-reduces as a single micro-step, 4x the forwards
  CHECK(count_ops(p1, OpKind::kCollective, g, "all_reduce") ==
        count_ops(p0, OpKind::kCollective, g, "all_reduce"));
  CHECK(count_ops(p1, OpKind::kCompute, g, ".fwd") ==
        4 * count_ops(p0, OpKind::kCompute, g, ".fwd"));
}

TEST_CASE("DDP overlap off: every bucket's all-reduce waits for the whole backward",
          "[lowering][ddp]") {
  const Scenario s =
      parse_scenario_file(test::scenario_path("dp_vs_ddp_4x1080ti.json"),
                          {"strategy.kind=ddp", "training.steps=1", "strategy.ddp.overlap=false"});
  const Program p = lower(s);
  const int g = s.strategy.device_ids.front();
  OpId last_backward = kNoOp;
  for (const Op& op : p.ops) {
    if (op.gpu == g && op.phase == Phase::kBackward && op.kind == OpKind::kCompute)
      last_backward = std::max(last_backward, op.id);
  }
  int checked = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != g || op.kind != OpKind::kCollective ||
        op.collective != CollectiveKind::kAllReduce)
      continue;
    // the all-reduce's stream wait is on an op issued at or after the last backward kernel
    REQUIRE(!op.deps.empty());
    CHECK(op.deps.front().op >= last_backward);
    ++checked;
  }
  CHECK(checked > 1);
}
