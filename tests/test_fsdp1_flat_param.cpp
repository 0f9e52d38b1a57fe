// PyTorch FSDP1's flat-parameter memory (core/lowering/fsdp1_flat_param.{hpp,cpp}; docs/memory.md,
// "FSDP1 flat parameters"): the padded shard and all-gather buffer, the padded gradient copy and
// the reduce-scatter's output shard. Every expected value is derived in a comment first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/lowering/fsdp1_flat_param.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

TEST_CASE("FSDP1 pads its flat parameter to N x ceil(P / N)", "[memory][fsdp]") {
  // P = 10 over N = 4: shard ceil(10/4) = 3, padded 12; 10 % 4 != 0, so _reduce_grad's F.pad
  // makes a 12-element copy; the reduce-scatter's output is one 3-element shard.
  const Fsdp1FlatParam a = fsdp1_flat_param(10, 4);
  CHECK(a.shard == 3);
  CHECK(a.padded == 12);
  CHECK(a.pad_copy == 12);
  CHECK(a.sharded_grad == 3);
  // P = 12 over 4 divides evenly: no padding, no copy (numel_to_pad = 0 keeps the gradient).
  const Fsdp1FlatParam b = fsdp1_flat_param(12, 4);
  CHECK(b.padded == 12);
  CHECK(b.pad_copy == 0);
  CHECK(b.sharded_grad == 3);
  // One rank: nothing sharded, nothing reduce-scattered.
  const Fsdp1FlatParam c = fsdp1_flat_param(10, 1);
  CHECK(c.padded == 10);
  CHECK(c.pad_copy == 0);
  CHECK(c.sharded_grad == 0);
}

TEST_CASE("FSDP1's low-precision shard exists only under parameter mixed precision",
          "[memory][fsdp]") {
  // _mp_shard = torch.empty_like(_local_shard, dtype=param_dtype): one shard, ceil(10/4) = 3
  // elements, with MixedPrecision; none without it, and none on one rank (post_unshard frees it
  // only for sharded strategies).
  CHECK(fsdp1_flat_param(10, 4, true).mp_shard == 3);
  CHECK(fsdp1_flat_param(10, 4, false).mp_shard == 0);
  CHECK(fsdp1_flat_param(10, 1, true).mp_shard == 0);
  CHECK(fsdp1_flat_param(0, 4, true).mp_shard == 0);
}

TEST_CASE("FSDP1's model state: the sharded flat parameter is the fp32 copy", "[memory][fsdp]") {
  // Psi = 1000 over N = 8: S = ceil(1000 / 8) = 125.
  TrainingSpec t;
  t.optimizer = OptimizerKind::kAdam;
  // bf16 + Adam (W 2, G 4, master 4, K 12): the fp32 _local_shard 4 S = 500, the fp32 gradient
  // shard 4 S = 500, Adam's moments (12 - 4) S = 1000: 2000 B = 16 Psi / N, where
  // model_state_bytes at stage 3 counts a bf16 copy besides the master: 2 S + 4 S + 12 S = 2250.
  t.precision = Precision::kBf16;
  ModelStateBytes m = fsdp1_state_bytes(1000, t, 8);
  CHECK(m.params == 500);
  CHECK(m.grads == 500);
  CHECK(m.optimizer == 1000);
  const ModelStateBytes z = model_state_bytes(1000, t, 3, 8);
  CHECK(z.params + z.grads + z.optimizer == 2250);
  // fp16 (W = G = 2, master 4): the fp16 gradient shard is cast back to fp32
  // (_cast_grad_to_param_dtype): the same 500 + 500 + 1000.
  t.precision = Precision::kFp16;
  m = fsdp1_state_bytes(1000, t, 8);
  CHECK(m.params == 500);
  CHECK(m.grads == 500);
  CHECK(m.optimizer == 1000);
  // fp32 without a master: W = 4, Adam 8 S = 1000.
  t.precision = Precision::kFp32;
  m = fsdp1_state_bytes(1000, t, 8);
  CHECK(m.params == 500);
  CHECK(m.grads == 500);
  CHECK(m.optimizer == 1000);
  // bf16 + SGD with momentum (K = master 4 + momentum 4): the momentum alone, 4 S = 500; without
  // momentum (K = master 4) nothing.
  t.precision = Precision::kBf16;
  t.optimizer = OptimizerKind::kSgd;
  t.sgd_momentum = 0.9;
  CHECK(fsdp1_state_bytes(1000, t, 8).optimizer == 500);
  t.sgd_momentum = 0;
  CHECK(fsdp1_state_bytes(1000, t, 8).optimizer == 0);
}

namespace {

// Two GPT blocks of h = 1024 under FSDP1 full_shard over 3 GPUs, bf16 (the Program cases below).
const std::string& fsdp1_blocks_json() {
  static const std::string json =
      "{\"cluster\":{\"nodes\":1,\"gpus_per_node\":3,\"gpu\":\"A100-SXM4-80GB\"},"
      "\"host\":{\"python\":false},\"model\":{\"gpt\":{\"layers\":2,\"hidden\":1024,\"heads\":16,"
      "\"seq_len\":512,\"vocab\":32000}},\"training\":{\"global_batch\":3,\"precision\":\"bf16\","
      "\"optimizer\":\"adam\",\"steps\":1},\"strategy\":{\"kind\":\"fsdp\","
      "\"fsdp_sharding\":\"full_shard\",\"micro_batch_size\":1}}";
  return json;
}
Program lower_block_scenario() {
  return lower(parse_scenario_string(fsdp1_blocks_json(), "test.json", {}));
}

}  // namespace

TEST_CASE("an FSDP1 block's gather, padded copy and gradient shard in the Program",
          "[memory][fsdp]") {
  // A GPT block of h = 1024: qkv 3h^2 + 3h, proj h^2 + h, fc 4h^2 + 4h, mlp proj 4h^2 + h and two
  // LayerNorms of 2h: 12 h^2 + 13 h = 12,596,224 elements. Over N = 3 ranks: shard
  // ceil(12,596,224 / 3) = 4,198,742, padded 12,596,226 (2 elements of padding), so
  //   gathered params  W x padded = 2 x 12,596,226 = 25,192,452 B (bf16 weights)
  //   padded grad copy G x padded = 4 x 12,596,226 = 50,384,904 B (bf16 recipe: G = 4)
  //   sharded grad     G x shard  = 4 x  4,198,742 = 16,794,968 B
  const Program p = lower_block_scenario();
  auto count = [&](OpKind kind, const std::string& name, Bytes bytes) {
    return std::count_if(p.ops.begin(), p.ops.end(), [&](const Op& op) {
      return op.kind == kind && op.gpu == 0 && op.bytes == bytes && p.name_of(op) == name;
    });
  };
  // Each of the 2 blocks is gathered for its forward and again for its backward: 4 allocs and 4
  // frees on GPU 0, each free marked record_stream (FSDP1's _free_unsharded_flat_param).
  CHECK(count(OpKind::kAlloc, "gathered params", 25'192'452) == 4);
  CHECK(count(OpKind::kFree, "gathered params", 25'192'452) == 4);
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kFree && p.name_of(op) == "gathered params") CHECK(op.record_stream);
  // One backward per block: one padded copy and one sharded gradient each, allocated and freed.
  CHECK(count(OpKind::kAlloc, "fsdp1 padded grad", 50'384'904) == 2);
  CHECK(count(OpKind::kFree, "fsdp1 padded grad", 50'384'904) == 2);
  CHECK(count(OpKind::kAlloc, "fsdp1 sharded grad", 16'794'968) == 2);
  CHECK(count(OpKind::kFree, "fsdp1 sharded grad", 16'794'968) == 2);
}

TEST_CASE(
    "FSDP1's _mp_shard: allocated on the pre-unshard stream, freed with record_stream on "
    "the all-gather's",
    "[memory][fsdp]") {
  // The scenario above: bf16 keeps an fp32 master, so FSDP1 runs MixedPrecision(param_dtype =
  // bf16) and each unshard casts the local shard into _mp_shard, W x shard = 2 x 4,198,742 =
  // 8,397,484 B per block: 2 blocks x (forward + backward gather) = 4 allocs and 4 frees on
  // GPU 0. _unshard (_runtime_utils.py) allocates it in pre_unshard -> _use_low_precision_shard
  // under `with stream(pre_unshard_stream)`, makes the unshard stream wait for that stream, and
  // frees it in post_unshard under `with stream(unshard_stream)`:
  // _free_low_precision_sharded_param (_flat_param.py) calls _no_dispatch_record_stream(_mp_shard,
  // current_stream()), the unshard stream, then _free_storage. So each free is marked
  // record_stream, sits on the stream of the all-gather that sent the shard, and that stream is
  // not the allocation's: the cross-stream case of docs/memory.md, "Allocation backpressure"
  // (the block is reusable once the all-gather has run).
  const Program p = lower_block_scenario();
  const Bytes mp = 8'397'484;
  std::vector<OpId> allocs;
  int frees = 0;
  for (const Op& op : p.ops) {
    if (op.gpu != 0 || op.bytes != mp || p.name_of(op) != "fsdp1 mp shard") continue;
    if (op.kind == OpKind::kAlloc) {
      allocs.push_back(op.id);
      CHECK(p.streams[static_cast<std::size_t>(op.stream)].name == "fsdp1 pre_unshard");
      continue;
    }
    if (op.kind != OpKind::kFree) continue;
    ++frees;
    CHECK(op.record_stream);
    REQUIRE(!allocs.empty());
    CHECK(op.stream != p.ops[static_cast<std::size_t>(allocs.back())].stream);
    // The all-gather issued just before the free, on the same stream (the unshard stream),
    // waits for the allocation (unshard_stream.wait_stream(pre_unshard_stream)).
    const auto g = std::find_if(
        p.ops.rbegin() + static_cast<long>(p.ops.size() - op.id), p.ops.rend(), [&](const Op& o) {
          return o.gpu == 0 && o.kind == OpKind::kCollective && o.stream == op.stream;
        });
    REQUIRE(g != p.ops.rend());
    CHECK(g->collective == CollectiveKind::kAllGather);
    CHECK(std::any_of(g->deps.begin(), g->deps.end(), [&](const Dep& d) {
      return d.op == allocs.back() && d.kind == DepKind::kStreamWaits;
    }));
  }
  CHECK(allocs.size() == 4);
  CHECK(frees == 4);
  // Without mixed precision (fp32: no master) there is no _mp_shard, and no pre-unshard stream.
  const std::string& json = fsdp1_blocks_json();
  const std::string fp32 = std::string(json).replace(json.find("bf16"), 4, "fp32");
  const Program q = lower(parse_scenario_string(fp32, "test.json", {}));
  CHECK(std::none_of(q.ops.begin(), q.ops.end(),
                     [&](const Op& op) { return q.name_of(op) == "fsdp1 mp shard"; }));
  CHECK(std::none_of(q.streams.begin(), q.streams.end(),
                     [](const StreamDesc& sd) { return sd.name == "fsdp1 pre_unshard"; }));
}
