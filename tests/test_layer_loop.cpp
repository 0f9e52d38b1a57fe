// The one layer loop (core/lowering/layer_loop.hpp; docs/program.md, "One layer loop"): the order
// it runs a pass's hooks in, the host costs it gives every strategy's kernels, its kernel copies,
// and the strategies that walk it.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/lowering/layer_loop.hpp"
#include "core/lowering/lowering.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

namespace {

// Three explicit layers (2 GFLOP forward per sample each; the second has 20 us of its own Python
// per forward), fp32 + SGD on one A100; `host` and `model_extra` add keys.
Scenario three_layers(const std::string& strategy, bool python, bool hooks) {
  const std::string json =
      std::string("{\"cluster\":{\"nodes\":1,\"gpus_per_node\":2,\"gpu\":\"A100-SXM4-80GB\"},") +
      "\"host\":{\"python\":" + (python ? "true" : "false") +
      "},\"model\":{\"explicit\":["
      "{\"name\":\"a\",\"kind\":\"gemm\",\"params\":1000,\"fwd_flops_per_sample\":2e9,"
      "\"activation_bytes_per_sample\":100,\"output_bytes_per_sample\":100},"
      "{\"name\":\"b\",\"kind\":\"gemm\",\"params\":1000,\"fwd_flops_per_sample\":2e9,"
      "\"activation_bytes_per_sample\":100,\"output_bytes_per_sample\":100,"
      "\"extra_python_us\":20},"
      "{\"name\":\"c\",\"kind\":\"gemm\",\"params\":1000,\"fwd_flops_per_sample\":2e9,"
      "\"activation_bytes_per_sample\":100,\"output_bytes_per_sample\":100}],"
      "\"input_bytes_per_sample\":0,\"python_hooks\":" +
      (hooks ? "true" : "false") +
      "},\"training\":{\"global_batch\":4,\"precision\":\"fp32\",\"optimizer\":\"sgd\","
      "\"steps\":1},\"strategy\":{" +
      strategy + "}}";
  return parse_scenario_string(json, "test.json", {});
}

// A builder with one process, thread and compute stream on GPU 0, in step 1.
struct OneLane {
  explicit OneLane(const Scenario& s) : b(s) {
    const int proc = b.add_process(0, "python", true);
    lane.thread = b.add_thread(proc, 0, "main");
    lane.stream = b.add_stream(0, StreamRole::kCompute, "compute");
    lane.gpu = 0;
    b.set_step(1);
  }
  ProgramBuilder b;
  Lane lane;
};

// Logs each hook it sees as "<tag>.<hook> <layer>".
class Recorder : public LayerHook {
 public:
  Recorder(const char* tag, std::vector<std::string>& log) : tag_(tag), log_(log) {}
  void enter(LayerVisit& v) override { add("enter", v); }
  void begin_kernel(LayerVisit& v) override { add("begin", v); }
  void end_kernel(LayerVisit& v) override {
    REQUIRE(v.kernel != kNoOp);  // the kernel exists once the end hooks run
    add("end", v);
  }
  void leave(LayerVisit& v) override { add("leave", v); }

 private:
  void add(const char* hook, const LayerVisit& v) {
    log_.push_back(std::string(tag_) + "." + hook + " " + std::to_string(v.layer));
  }
  const char* tag_;
  std::vector<std::string>& log_;
};

LayerVisit visit(int layer, StepPhase phase, std::int64_t batch, const Lane& lane) {
  LayerVisit v;
  v.layer = layer;
  v.phase = phase;
  v.batch = batch;
  v.lane = lane;
  return v;
}

}  // namespace

TEST_CASE("The layer loop nests its hooks around each kernel, backward in reverse",
          "[lowering][layer_loop]") {
  const Scenario s = three_layers("\"kind\":\"single\"", false, false);
  OneLane one(s);
  LayerLoop loop(one.b, whole_layer_figures(s.model));
  std::vector<std::string> log;
  Recorder outer("o", log), inner("i", log);
  LayerHook* const hooks[] = {&outer, &inner};
  const OpId go = one.b.marker(one.lane.thread, 0, "go", {}, Phase::kForward);
  std::vector<int> first_layers;
  loop.walk(0, 3, true, hooks, [&](int i, bool first) {
    LayerVisit v = visit(i, StepPhase::kForward, 4, one.lane);
    if (first) {
      first_layers.push_back(i);
      v.deps = {{go, DepKind::kHostWaits}};
    }
    return v;
  });
  // Forward: layers 0, 1, 2; enter and begin outermost first, end and leave innermost first (the
  // hooks nest like wrappers around the kernel).
  std::vector<std::string> want;
  for (int i : {0, 1, 2}) {
    const std::string n = " " + std::to_string(i);
    want.insert(want.end(), {"o.enter" + n, "i.enter" + n, "o.begin" + n, "i.begin" + n,
                             "i.end" + n, "o.end" + n, "i.leave" + n, "o.leave" + n});
  }
  CHECK(log == want);
  // Only the pass's first layer takes the pass's deps: op 0 is `go`, op 1 layer 0's kernel.
  CHECK(first_layers == std::vector<int>{0});
  const Program& p = one.b.program();
  REQUIRE(p.ops.size() == 4);  // go + three kernels (no FP8, no hook emits anything)
  CHECK(p.ops[1].deps.size() == 1);
  CHECK(p.ops[2].deps.empty());

  // Backward: layers 2, 1, 0, the first of the pass being layer 2.
  log.clear();
  first_layers.clear();
  loop.walk(0, 3, false, hooks, [&](int i, bool first) {
    if (first) first_layers.push_back(i);
    return visit(i, StepPhase::kBackward, 4, one.lane);
  });
  CHECK(first_layers == std::vector<int>{2});
  REQUIRE(log.size() == 24);
  CHECK(log.front() == "o.enter 2");
  CHECK(log.back() == "o.leave 0");
}

TEST_CASE("The layer loop gives every kernel the same host costs: Python forward only",
          "[lowering][layer_loop]") {
  // With Python on and no Python hooks: a forward's launches hold the GIL (python_ns of its
  // kernels > 0) and layer b's adds its 20 us; a recompute (autograd's C++ re-running the saved
  // forward) and a backward hold none. With hooks, the backward takes the GIL for its launches,
  // without layer b's forward Python.
  for (const bool hooks : {false, true}) {
    const Scenario s = three_layers("\"kind\":\"single\"", true, hooks);
    OneLane one(s);
    LayerLoop loop(one.b, whole_layer_figures(s.model));
    const std::vector<Op>& ops = one.b.program().ops;
    auto kernel_of = [&](int layer, StepPhase phase) {
      LayerVisit v = visit(layer, phase, 4, one.lane);
      return ops[static_cast<std::size_t>(loop.emit(v, {}))];
    };
    const TimeNs launch = one.b.python_ns(1);  // an explicit layer is one kernel
    REQUIRE(launch > 0);
    CHECK(kernel_of(0, StepPhase::kForward).python_ns == launch);
    CHECK(kernel_of(1, StepPhase::kForward).python_ns == launch + us_to_ns(20));
    CHECK(kernel_of(1, StepPhase::kRecompute).python_ns == 0);
    // The backward of an explicit layer is 2 kernels (backward_kernels): 2 launches with hooks.
    CHECK(kernel_of(1, StepPhase::kBackward).python_ns == (hooks ? one.b.python_ns(2) : 0));
    CHECK(kernel_of(1, StepPhase::kBackward).dispatch_ns == one.b.dispatch_ns(2));
  }
}

TEST_CASE("A copied layer kernel is the kernel the loop would emit afresh",
          "[lowering][layer_loop]") {
  const Scenario s = three_layers("\"kind\":\"single\"", true, false);
  // Loop A emits layer b's forward twice at batch 4 (the second a copy of the first) and once at
  // batch 2; loop B, on a fresh builder, emits its batch-2 forward afresh.
  OneLane a(s), fresh(s);
  LayerLoop loop_a(a.b, whole_layer_figures(s.model));
  LayerLoop loop_b(fresh.b, whole_layer_figures(s.model));
  std::vector<OpId> ids;
  for (const std::int64_t batch : {4, 4, 2}) {
    LayerVisit v = visit(1, StepPhase::kForward, batch, a.lane);
    ids.push_back(loop_a.emit(v, {}));
  }
  LayerVisit vb = visit(1, StepPhase::kForward, 2, fresh.lane);
  const Op& want2 = fresh.b.program().ops[static_cast<std::size_t>(loop_b.emit(vb, {}))];
  const std::vector<Op>& ops = a.b.program().ops;
  const Op& first = ops[static_cast<std::size_t>(ids[0])];
  const Op& copy = ops[static_cast<std::size_t>(ids[1])];
  const Op& two = ops[static_cast<std::size_t>(ids[2])];
  CHECK(copy.id == ids[1]);
  for (const auto& [got, want] : {std::pair<const Op*, const Op*>{&copy, &first}, {&two, &want2}}) {
    CHECK(a.b.program().name_of(*got) == fresh.b.program().name_of(*want));
    CHECK(got->flops == want->flops);
    CHECK(got->bytes == want->bytes);
    CHECK(got->batch == want->batch);
    CHECK(got->python_ns == want->python_ns);
    CHECK(got->dispatch_ns == want->dispatch_ns);
    CHECK(got->gemm.m == want->gemm.m);
    CHECK(got->max_efficiency == want->max_efficiency);
  }
  // Batch 2 runs half of batch 4's FLOPs: 2 samples x 2 GFLOP.
  CHECK(two.flops == Approx(4e9));
  CHECK(first.flops == Approx(8e9));
}

TEST_CASE("Model parallel walks the same loop: a layer's own Python is kept on its device",
          "[lowering][layer_loop]") {
  // Before the one loop, only single / DataParallel / DDP added extra_python_us. Layer b's forward
  // kernel costs the same Python under model parallel (b on GPU 1 after split_at) as on one GPU.
  auto forward_b = [](const Program& p) {
    for (const Op& op : p.ops)
      if (op.kind == OpKind::kCompute && p.name_of(op) == "b.fwd") return op;
    FAIL("no b.fwd kernel");
    return Op{};
  };
  const Program single = lower(three_layers("\"kind\":\"single\"", true, false));
  const Program split =
      lower(three_layers("\"kind\":\"model_parallel\",\"split_at\":[\"b\"]", true, false));
  const Op one = forward_b(single), two = forward_b(split);
  CHECK(two.gpu == 1);
  CHECK(two.python_ns == one.python_ns);
  CHECK(two.python_ns > us_to_ns(20));
}
