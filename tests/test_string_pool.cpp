// The Program's name pool and the enum spelling tables (docs/program.md, "Names").
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "core/lowering/lowering.hpp"
#include "core/lowering/op_names.hpp"
#include "core/program/program.hpp"
#include "core/program/string_pool.hpp"
#include "core/scenario/scenario_parser.hpp"

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
  const char* where = pool.pattern(first).data();
  for (int i = 0; i < 10000; ++i) pool.intern("name " + std::to_string(i));
  CHECK(pool.pattern(first).data() == where);
  CHECK(pool.pattern(first) == "x");
  // Pieces that view the pool itself are read before the new name is stored.
  const NameId sim = pool.intern_cat({pool.pattern(first), " (simulated)"});
  CHECK(pool.str(sim) == "x (simulated)");
}

TEST_CASE("string pool: a structured name is a pattern and a field", "[names]") {
  StringPool pool;
  const std::string pat = std::string("mb") + kNameField + " h.5.attn.qkv.fwd";
  // One pattern for every micro-batch: the pool grows by one, the ids differ only in the field.
  const NameId m0 = pool.intern(pat, 0);
  const NameId m37 = pool.intern(pat, 37);
  const NameId m1234 =
      pool.intern_cat({std::string("mb") + kNameField + " ", "h.5.attn.qkv", ".fwd"}, 1234);
  CHECK(pool.size() == 2);  // "" and the pattern
  CHECK(m0.index == 1);
  CHECK(m37.index == 1);
  CHECK(m1234.index == 1);
  CHECK(m0 != m37);
  CHECK(pool.intern(pat, 37) == m37);
  // The text is the pattern with the field in decimal where kNameField is (0 is a digit too).
  CHECK(pool.str(m0) == "mb0 h.5.attn.qkv.fwd");
  CHECK(pool.str(m37) == "mb37 h.5.attn.qkv.fwd");
  CHECK(pool.str(m1234) == "mb1234 h.5.attn.qkv.fwd");
  // append() adds the same text to what the buffer holds.
  std::string buf = "[";
  pool.append(m37, buf);
  pool.append(pool.intern("]"), buf);
  CHECK(buf == "[mb37 h.5.attn.qkv.fwd]");
  // A field given to a name without the byte is dropped: the id is the plain name's.
  const NameId plain = pool.intern("tp all_reduce");
  CHECK(pool.intern("tp all_reduce", 5) == plain);
  CHECK(plain.field == -1);
  CHECK(pool.str(plain) == "tp all_reduce");
  // The pattern is what was interned; find() looks up plain names only.
  CHECK(pool.pattern(m37) == pat);
  NameId found;
  CHECK_FALSE(pool.find("mb37 h.5.attn.qkv.fwd", &found));
  // A NameRef with a field reads (and interns) the same way.
  const std::string prefix = op_names::micro_prefix(8), layer = "h.5.attn.qkv";
  const NameRef r = op_names::layer_kernel(prefix, 6, layer, Phase::kForward);
  CHECK(r.str(pool) == "mb6 h.5.attn.qkv.fwd");
  CHECK(r.intern(pool) == NameId{1, 6});
  // One micro-batch: no prefix, no field.
  const std::string none = op_names::micro_prefix(1);
  CHECK(none.empty());
  const std::string fc = "fc";
  CHECK(op_names::layer_kernel(none, 0, fc, Phase::kBackward).intern(pool).field == -1);
}

TEST_CASE("name ref: an id, a string or borrowed pieces", "[names]") {
  StringPool pool;
  const NameId id = pool.intern("loss");
  CHECK(NameRef(id).intern(pool) == id);
  CHECK(NameRef("loss").intern(pool) == id);
  // The pieces are borrowed: the prefix and the layer name must outlive the NameRef.
  const std::string prefix = op_names::micro_prefix(4), layer = "h.11.mlp.fc";
  const NameRef r = op_names::layer_kernel(prefix, 1, layer, Phase::kRecompute);
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
    CHECK(nccl_proto_names()[static_cast<std::size_t>(i)] == to_string(static_cast<NcclProto>(i)));
  CHECK(std::string(to_string(CollectiveAlgo::kHierarchical)) == "hierarchical");
  CHECK(std::string(to_string(NcclProto::kLL128)) == "LL128");
}

TEST_CASE("lowering: ops of one name share its id", "[names]") {
  const Scenario s =
      parse_scenario_file(std::string(CSIM_SOURCE_DIR) + "/scenarios/gpt_pipeline_8xa100.json");
  const Program p = lower(s);
  // Only the op factories intern, so the pool is exactly the ops' distinct patterns (and the
  // empty name at id 0), and one text has one id (pattern and field).
  std::map<std::string, std::pair<std::uint32_t, std::int32_t>> id_of;
  std::set<std::uint32_t> patterns;
  for (const Op& op : p.ops) {
    REQUIRE(op.name.index < p.names.size());
    const auto [it, fresh] = id_of.emplace(p.name_of(op), std::pair{op.name.index, op.name.field});
    CHECK(it->second == std::pair{op.name.index, op.name.field});
    patterns.insert(op.name.index);
  }
  CHECK(patterns.size() + (patterns.count(0) ? 0 : 1) == p.names.size());
  // Two steps (training.steps = 2) issue the same kernels: names repeat, the pool is smaller.
  CHECK(id_of.size() < p.ops.size());
  // 16 micro-batches (2p over 8 stages): a micro-batch's names are one pattern with 16 fields, so
  // the pool holds fewer patterns than there are distinct names.
  CHECK(s.strategy.parallel.micro_batches > 1);
  CHECK(p.names.size() < id_of.size());
  // The pipeline's sends are one name, and their phase is the pass's.
  int sends = 0;
  for (const Op& op : p.ops) {
    if (p.name_of(op) != "send activations") continue;
    ++sends;
    CHECK(op.phase == Phase::kForward);
  }
  CHECK(sends > 0);
}

TEST_CASE("lowering: the pool holds patterns, not one name per micro-batch", "[names]") {
  // gpt_pipeline_8xa100 lowered with its 16 micro-batches and with 32: every op name that holds a
  // micro-batch index is one pattern whatever the index, so the pool is the same size (and the
  // same patterns, in the same order) while the ops and their distinct names grow.
  Scenario s =
      parse_scenario_file(std::string(CSIM_SOURCE_DIR) + "/scenarios/gpt_pipeline_8xa100.json");
  Scenario s2 = s;
  s2.strategy.parallel.micro_batches *= 2;
  s2.training.global_batch *= 2;
  if (s2.training.gradient_accumulation == s.strategy.parallel.micro_batches)
    s2.training.gradient_accumulation *= 2;
  const Program a = lower(s), b = lower(s2);
  REQUIRE(b.ops.size() > a.ops.size());
  REQUIRE(a.names.size() == b.names.size());
  for (std::uint32_t i = 0; i < a.names.size(); ++i)
    CHECK(a.names.pattern(NameId{i, -1}) == b.names.pattern(NameId{i, -1}));
  // Each micro-batch's text appears: the field of the last micro-batch's kernels is m - 1.
  std::set<std::string> texts;
  for (const Op& op : b.ops) texts.insert(b.name_of(op));
  const std::string last = "mb" + std::to_string(s2.strategy.parallel.micro_batches - 1) + " ";
  CHECK(std::any_of(texts.begin(), texts.end(),
                    [&](const std::string& t) { return t.rfind(last, 0) == 0; }));
  CHECK(texts.size() > b.names.size());
}
