// The Program's name pool and the enum spelling tables (docs/program.md, "Names").
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>

#include "core/lowering/lowering.hpp"
#include "core/lowering/op_names.hpp"
#include "core/program.hpp"
#include "core/scenario_parser.hpp"
#include "core/string_pool.hpp"

using namespace csim::core;

TEST_CASE("string pool: one id per distinct name, in first-interned order", "[names]") {
  StringPool pool;
  // Id 0 is the empty name, held from the start, so a default NameId reads as "".
  CHECK(pool.size() == 1);
  CHECK(pool.str(NameId{}).empty());
  const NameId a = pool.intern("h.0.attn.qkv.fwd");
  const NameId b = pool.intern("tp all_reduce");
  CHECK(a.index == 1);  // the first name interned after ""
  CHECK(b.index == 2);
  CHECK(pool.intern(std::string("h.0.attn.qkv.fwd")) == a);  // found again, nothing added
  CHECK(pool.size() == 3);
  CHECK(pool.str(a) == "h.0.attn.qkv.fwd");
  // A name assembled from pieces is the same name as its concatenation.
  CHECK(pool.intern_cat({"tp", " ", "all_reduce"}) == b);
  const NameId c = pool.intern_cat({"mb3 ", "h.0.attn.qkv", ".fwd"});
  CHECK(c.index == 3);
  CHECK(pool.str(c) == "mb3 h.0.attn.qkv.fwd");
  NameId found;
  CHECK(pool.find("mb3 h.0.attn.qkv.fwd", &found));
  CHECK(found == c);
  CHECK_FALSE(pool.find("mb4 h.0.attn.qkv.fwd", &found));
  CHECK(pool.size() == 4);
}

TEST_CASE("string pool: a name stays where it is while more are added", "[names]") {
  StringPool pool;
  const NameId first = pool.intern("x");  // short: held inside the std::string itself (SSO)
  const std::string* where = &pool.str(first);
  for (int i = 0; i < 10000; ++i) pool.intern("name " + std::to_string(i));
  CHECK(&pool.str(first) == where);
  CHECK(*where == "x");
  // Pieces that view the pool itself are read before the new name is stored.
  const NameId sim = pool.intern_cat({pool.view(first), " (simulated)"});
  CHECK(pool.str(sim) == "x (simulated)");
}

TEST_CASE("name ref: an id, a string or borrowed pieces", "[names]") {
  StringPool pool;
  const NameId id = pool.intern("loss");
  CHECK(NameRef(id).intern(pool) == id);
  CHECK(NameRef("loss").intern(pool) == id);
  // The pieces are borrowed: the prefix and the layer name must outlive the NameRef.
  const std::string prefix = "mb1 ", layer = "h.11.mlp.fc";
  const NameRef r = op_names::layer_kernel(prefix, layer, Phase::kRecompute);
  CHECK(r.str(pool) == "mb1 h.11.mlp.fc.recompute");
  const std::size_t before = pool.size();
  const NameId k = r.intern(pool);
  CHECK(pool.size() == before + 1);
  CHECK(r.intern(pool) == k);  // the second time: found, nothing added
  CHECK(op_names::collective("dp", CollectiveKind::kAllReduce, "grads").str(pool) ==
        "dp all_reduce grads");
  CHECK(op_names::collective("tp", CollectiveKind::kAllGather, "").str(pool) == "tp all_gather");
  CHECK(op_names::p2p(false, true).str(pool) == "recv activations");
  CHECK(op_names::optimizer_step(OptimizerKind::kAdam).str(pool) == "optimizer.step (adam)");
}

TEST_CASE("phase: one spelling per value, parsed back", "[names]") {
  // Every value has a distinct spelling and parses back to itself.
  for (int i = 0; i < kNumPhases; ++i) {
    const Phase p = static_cast<Phase>(i);
    Phase back = Phase::kCalibration;
    REQUIRE(parse_phase(to_string(p), &back));
    CHECK(back == p);
  }
  CHECK(std::string(to_string(Phase::kNone)).empty());
  CHECK(std::string(to_string(Phase::kParallelApply)) == "parallel_apply");
  Phase out;
  CHECK_FALSE(parse_phase("Forward", &out));  // spellings are exact
}

TEST_CASE("nccl: algorithm and protocol parsed once, into the enums", "[names]") {
  // The parser's choices are the tables themselves: index = enum value.
  for (int i = 0; i < kNumCollectiveAlgos; ++i)
    CHECK(collective_algo_names()[static_cast<std::size_t>(i)] ==
          to_string(static_cast<CollectiveAlgo>(i)));
  for (int i = 0; i < kNumNcclProtos; ++i)
    CHECK(nccl_proto_names()[static_cast<std::size_t>(i)] ==
          to_string(static_cast<NcclProto>(i)));
  CHECK(std::string(to_string(CollectiveAlgo::kHierarchical)) == "hierarchical");
  CHECK(std::string(to_string(NcclProto::kLL128)) == "LL128");
}

TEST_CASE("lowering: ops of one name share its id", "[names]") {
  const Scenario s = parse_scenario_file(std::string(CSIM_SOURCE_DIR) +
                                         "/scenarios/gpt_pipeline_8xa100.json");
  const Program p = lower(s);
  // Only the op factories intern, so the pool is exactly the ops' distinct names (and the empty
  // name at id 0), each with one id.
  std::map<std::string, std::uint32_t> id_of;
  for (const Op& op : p.ops) {
    REQUIRE(op.name.index < p.names.size());
    const auto [it, fresh] = id_of.emplace(p.name_of(op), op.name.index);
    CHECK(it->second == op.name.index);
  }
  CHECK(id_of.size() + (id_of.count("") ? 0 : 1) == p.names.size());
  // Two steps (training.steps = 2) issue the same kernels: names repeat, the pool is smaller.
  CHECK(id_of.size() < p.ops.size());
  // The pipeline's sends are one name, and their phase is the pass's.
  int sends = 0;
  for (const Op& op : p.ops) {
    if (p.name_of(op) != "send activations") continue;
    ++sends;
    CHECK(op.phase == Phase::kForward);
  }
  CHECK(sends > 0);
}
