// Activation offload, strategy.activation_offload (core/lowering/activation_offload.hpp;
// docs/program.md, "Activation offload"): TE's window map, the bytes each way, the copy time over
// the host link, the copies on their own copy streams overlapping compute, the peak it lowers,
// tune's memory bound, and offload 0 as no key at all. Every expected value is derived in a
// comment.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "backends/sim/sim_executor.hpp"
#include "core/lowering/activation_offload.hpp"
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "sweep/tune.hpp"

#include <nlohmann/json.hpp>

using namespace csim;
using namespace csim::core;

namespace {

// One A100 (PCIe gen4 x16 to the host: 24 GB/s per direction, docs/cost-model.md, "Topology";
// alone on the node's host bridge), a 4-block GPT with h = 1024, 16 heads, s = 512, bf16, one
// micro-batch of 8 samples, kind 3d with dp = tp = pp = 1 (Megatron's pp 1, no recompute).
std::string gpt(const std::string& extra) {
  return "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":1,\"gpu\":\"A100-SXM4-80GB\"},"
         "\"host\":{\"python\":false},"
         "\"model\":{\"gpt\":{\"layers\":4,\"hidden\":1024,\"heads\":16,\"seq_len\":512,"
         "\"vocab\":32000,\"tied_embeddings\":true}},"
         "\"training\":{\"global_batch\":8,\"precision\":\"bf16\",\"optimizer\":\"adam\","
         "\"steps\":2},\"strategy\":{\"kind\":\"3d\",\"dp\":1,\"tp\":1,\"pp\":1,"
         "\"micro_batch_size\":8" +
         extra + "}}";
}

Scenario parse(const std::string& json) {
  return parse_scenario_string(json, "test.json", {});
}

struct Run {
  Scenario s;
  Program p;
  ExecutionResult r;
  MemoryReport mem;
};
Run simulate(const std::string& json) {
  Run out{parse(json), {}, {}, {}};
  out.p = lower(out.s);
  REQUIRE(validate_program(out.p).empty());
  sim::SimExecutor ex(out.s);
  out.r = ex.run(out.p, RunControl{});
  REQUIRE(out.r.complete);
  out.mem = memory_timeline(out.p, out.r.timings, out.s.cluster);
  return out;
}

std::vector<OpId> copies_on(const Run& run, const std::string& stream) {
  std::vector<OpId> out;
  for (const Op& op : run.p.ops)
    if (op.kind == OpKind::kCopy && op.stream >= 0 &&
        run.p.streams[static_cast<std::size_t>(op.stream)].name == stream)
      out.push_back(op.id);
  return out;
}

TimeNs end_of(const Run& run) {
  TimeNs end = 0;
  for (const OpTiming& t : run.r.timings) end = std::max(end, t.end_ns);
  return end;
}

Bytes activation_peak(const Run& run) {
  Bytes peak = 0;
  for (const MemorySample& smp : run.mem.gpus.front().samples)
    peak = std::max(peak, smp.by_category[static_cast<std::size_t>(MemCategory::kActivations)]);
  return peak;
}

// A block's saved activations per sample: Korthikanti et al. 2022, table 2, without
// parallelism, sh(34 + 5as/h) with 2-byte elements; the bundled GPT's attention is the eager
// one, which keeps the 5as/h term: 512 x 1024 x 34 + 5 x 16 x 512^2 = 17,825,792 + 20,971,520 =
// 38,797,312 bytes; b = 8: B = 310,378,496 bytes per block and micro-batch.
constexpr double kBlockPerSample = 38797312.0;
constexpr Bytes kBlock = 310378496;

}  // namespace

TEST_CASE("activation offload: TE's window map", "[offload][activation]") {
  // w_i = floor(L/K)(i + 1) - 1 + min(i + 1, L mod K):
  // K 2, L 4: 2(i + 1) - 1 -> 1, 3.
  CHECK(offload_window_map(2, 4) == std::vector<int>{1, 3});
  // K 3, L 4: (i + 1) - 1 + min(i + 1, 1) -> 1, 2, 3.
  CHECK(offload_window_map(3, 4) == std::vector<int>{1, 2, 3});
  // K 3, L 8: 2(i + 1) - 1 + min(i + 1, 2) -> 2, 5, 7.
  CHECK(offload_window_map(3, 8) == std::vector<int>{2, 5, 7});
  // K 1, L 32: the one group settled at the last block.
  CHECK(offload_window_map(1, 32) == std::vector<int>{31});
}

TEST_CASE("activation offload: the bytes each way and the copy time", "[offload][activation]") {
  const Run run = simulate(gpt(",\"activation_offload\":3"));
  // The block figure the lowering uses is the formula above.
  const std::vector<ActivationOffloadGroup> groups =
      activation_offload_groups(run.s.model, run.s.strategy.parallel,
                                Segment{0, static_cast<int>(run.s.model.layers.size())});
  // Every one of the L = 4 blocks (the piece allocates and frees each), the first K = 3
  // offloaded.
  REQUIRE(groups.size() == 4);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    CHECK(groups[i].bytes_per_sample == Approx(kBlockPerSample));
    CHECK(groups[i].offloaded == (i < 3));
  }
  // K = 3 groups each way per micro-batch, 1 micro-batch, 2 steps: 6 D2H and 6 H2D of B each.
  const std::vector<OpId> d2h = copies_on(run, "act offload d2h");
  const std::vector<OpId> h2d = copies_on(run, "act offload h2d");
  REQUIRE(d2h.size() == 6);
  REQUIRE(h2d.size() == 6);
  for (const OpId id : d2h) {
    const Op& op = run.p.ops[static_cast<std::size_t>(id)];
    CHECK(op.copy_kind == CopyKind::kD2H);
    CHECK(op.bytes == kBlock);
    // Alone on the link: B / 24 GB/s = 310,378,496 / 24e9 = 12.93 ms (plus the route's latency,
    // microseconds).
    const OpTiming& t = run.r.timings[static_cast<std::size_t>(id)];
    CHECK(static_cast<double>(t.end_ns - t.start_ns) ==
          Approx(static_cast<double>(kBlock) / 24e9 * 1e9).epsilon(0.01));
  }
  for (const OpId id : h2d) {
    const Op& op = run.p.ops[static_cast<std::size_t>(id)];
    CHECK(op.copy_kind == CopyKind::kH2DPinned);
    CHECK(op.bytes == kBlock);
    const OpTiming& t = run.r.timings[static_cast<std::size_t>(id)];
    CHECK(static_cast<double>(t.end_ns - t.start_ns) ==
          Approx(static_cast<double>(kBlock) / 24e9 * 1e9).epsilon(0.01));
  }
}

TEST_CASE("activation offload: the copies run on copy streams beside compute",
          "[offload][activation]") {
  const Run run = simulate(gpt(",\"activation_offload\":3"));
  // Group 0's D2H starts after block 0's forward and runs while blocks 1.. compute (its window
  // ends at block w_0 = 1's commit): some compute kernel of the GPU runs during every copy whose
  // window holds a block (all of them here: w_i >= i + 1).
  std::vector<OpId> copies = copies_on(run, "act offload d2h");
  const std::vector<OpId> h2d = copies_on(run, "act offload h2d");
  copies.insert(copies.end(), h2d.begin(), h2d.end());
  REQUIRE(!copies.empty());
  for (const OpId id : copies) {
    const Op& c = run.p.ops[static_cast<std::size_t>(id)];
    CHECK(run.p.streams[static_cast<std::size_t>(c.stream)].role == StreamRole::kCopy);
    const OpTiming& tc = run.r.timings[static_cast<std::size_t>(id)];
    bool overlapped = false;
    for (const Op& op : run.p.ops) {
      if (op.kind != OpKind::kCompute || op.gpu != c.gpu) continue;
      const OpTiming& t = run.r.timings[static_cast<std::size_t>(op.id)];
      if (t.start_ns < tc.end_ns && t.end_ns > tc.start_ns) overlapped = true;
    }
    CHECK(overlapped);
  }
}

TEST_CASE("activation offload: the peak falls by the blocks off the GPU at its top",
          "[offload][activation][memory]") {
  const Run off = simulate(gpt(",\"activation_offload\":3"));
  const Run none = simulate(gpt(""));
  // Without offload the segment's activations are held from the forward to the end of the
  // backward (pipeline.cpp): the activation top is all 4 blocks' 4B plus the rest (embedding,
  // final norm, logits). With K 3 of L 4 (w = 1, 2, 3) each block's are allocated and freed on
  // their own. Forward: group 0 is settled at block 1's commit, group 1 at block 2's, group 2 at
  // block 3's, before the logits are allocated: at most 2B of blocks on the GPU before the
  // logits, B (block 3) after. Backward: block 3's commit reloads group 2 (B3 + g2 = 2B); after
  // block 3 B3 is freed and block 2's commit reloads group 1 (g2 + g1); after block 2 g2 is
  // freed and block 1's commit reloads group 0 (g1 + g0); then g0 alone. So at most 2B of blocks
  // beside the rest: the activation top is 2B = 620,756,992 bytes lower.
  CHECK(activation_peak(none) - activation_peak(off) == 2 * kBlock);
  // And the GPU's peak as a whole by the same (nothing else changes).
  CHECK(none.mem.gpus.front().peak_bytes - off.mem.gpus.front().peak_bytes == 2 * kBlock);
  // The copies cost time: the step is no shorter (the compute stream waits for D2H / H2D where
  // a window's blocks are shorter than a copy).
  CHECK(end_of(off) >= end_of(none));
}

TEST_CASE("activation offload: 0 is no key at all", "[offload][activation]") {
  const Run zero = simulate(gpt(",\"activation_offload\":0"));
  const Run none = simulate(gpt(""));
  CHECK(zero.p.ops.size() == none.p.ops.size());
  CHECK(zero.p.streams.size() == none.p.streams.size());
  CHECK(end_of(zero) == end_of(none));
  CHECK(zero.mem.gpus.front().peak_bytes == none.mem.gpus.front().peak_bytes);
}

TEST_CASE("activation offload: tune's memory bound subtracts what is off the GPU",
          "[offload][activation][tune]") {
  const Scenario off = parse(gpt(",\"activation_offload\":3"));
  const Scenario none = parse(gpt(""));
  const sweep::MemoryBound a = sweep::memory_bound(off, 1), b = sweep::memory_bound(none, 1);
  // The bound's A is one micro-batch's saved activations; the offloaded groups' 3 B are off the
  // GPU at the end of the forward (the moment the bound's W + G + C + A + K term describes):
  // A_off = A - 3 x 8 x 38,797,312.
  CHECK(b.activations - a.activations == Approx(3.0 * 8.0 * kBlockPerSample));
  // Still a lower bound of the simulated peak.
  const Run run = simulate(gpt(",\"activation_offload\":3"));
  CHECK(a.bytes <= static_cast<double>(run.mem.gpus.front().peak_bytes));
}

TEST_CASE("tune's activation offload dimension twins exactly the pp 1 layouts without recompute",
          "[offload][activation][tune]") {
  // The GPT above on 4 GPUs (micro-batches of 2), recompute none and full: --act-offload 0,2 adds
  // an " ao 2" twin to every layout the parser accepts it for (kinds 3d / zero / fsdp with pp 1 and
  // recompute none), none elsewhere (pp 2 or 4, recompute full, DDP). The twin's memory bound is
  // lower (its activation term loses the 2 offloaded blocks' saved activations; the test above
  // derives the figure at dp = tp = 1), its compute bound the same (offload adds no FLOPs).
  std::string json = gpt("");
  json.replace(json.find("\"gpus_per_node\":1"), 17, "\"gpus_per_node\":4");
  json.replace(json.find("\"dp\":1"), 6, "\"dp\":4");
  json.replace(json.find("\"micro_batch_size\":8"), 20, "\"micro_batch_size\":2");
  const nlohmann::json doc = nlohmann::json::parse(json);
  sweep::TuneOptions o;
  o.threads = 1;
  o.space.recompute = {"none", "full"};
  o.micro_batch_sizes = {2};
  const sweep::TuneResult plain = sweep::tune(doc, "test.json", {}, o);
  o.space.activation_offload = {0, 2};
  const sweep::TuneResult with = sweep::tune(doc, "test.json", {}, o);
  std::map<std::string, const sweep::TuneCandidate*> by_label;
  for (const sweep::TuneCandidate& c : with.candidates) by_label[c.label] = &c;
  std::size_t eligible = 0;
  for (const sweep::TuneCandidate& c : plain.candidates) {
    INFO(c.label);
    REQUIRE(by_label.count(c.label) == 1);
    const bool pp1 = c.label.find(" pp 1 ") != std::string::npos && c.label.rfind("ddp", 0) != 0;
    const bool rc_none = c.label.find("rc none") != std::string::npos;
    const auto twin = by_label.find(c.label + " ao 2");
    CHECK((twin != by_label.end()) == (pp1 && rc_none));
    if (twin == by_label.end()) continue;
    ++eligible;
    CHECK(twin->second->knobs["strategy"].value("activation_offload", 0) == 2);
    CHECK(twin->second->model_states_gib < c.model_states_gib);
    CHECK(twin->second->lb_step_s == c.lb_step_s);
  }
  CHECK(eligible > 0);
  CHECK(with.candidates.size() == plain.candidates.size() + eligible);
}
