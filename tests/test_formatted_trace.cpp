// The trace formatted while it is built (backend::build_formatted_trace, prof::FormattedTrace;
// docs/trace-format.md, "Formatting while building") against the file of the trace built in memory
// (build_trace, then write_chrome_trace): the same bytes, on scenarios covering every event kind
// (DDP, DataParallel's GIL waits and host syncs, data-loader workers, a pipeline and 3D under rank
// symmetry, FSDP, copies), an interrupted run, and through run::run and the file writer.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/common/trace_builder.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/lowering/lowering.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/atomic_file.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "run/run.hpp"
#include "test_support.hpp"

using namespace csim;

namespace {

std::string written(const prof::Trace& t) {
  std::ostringstream os;
  prof::write_chrome_trace(t, os);
  return os.str();
}
std::string written(const prof::FormattedTrace& t,
                    const prof::FormattedTrace::Producer& produce = {}) {
  std::ostringstream os;
  prof::write_chrome_trace(t, os, produce);
  return os.str();
}

// An event of the hand-made cases below: its lane, time and name.
struct HandEvent {
  int pid, tid;
  TimeNs ts;
  const char* name;
};

// A kernel event of the hand-made cases below: 10 ns, op 4, compute, no args yet.
prof::TraceEvent& add_kernel(prof::Trace& tr, int pid, int tid, TimeNs ts, const char* name) {
  prof::TraceEvent& te = tr.events.emplace_back();
  te.pid = pid;
  te.tid = tid;
  te.ts_ns = ts;
  te.dur_ns = 10;
  te.name = name;
  te.cat = "kernel";
  te.cls = prof::EventClass::kCompute;
  te.op_id = 4;
  return te;
}

// INTERRUPT: the run stops in its last step (its ops' timings forgotten, as a cancel leaves
// them), then keeps the completed steps as run() does.
void same_trace(const core::Scenario& sc, bool interrupt = false) {
  const core::Program p = core::lower(sc);
  sim::SimExecutor exec(sc);
  core::ExecutionResult res = exec.run(p, {});
  if (interrupt) {
    for (const core::Op& op : p.ops)
      if (op.step == p.steps) res.timings[op.id] = core::OpTiming{};
    res.complete = false;
    backend::keep_completed_steps(p, &res);
  }
  const core::MemoryReport mem = core::memory_timeline(p, res.timings, sc.cluster);
  const prof::Trace tr = backend::build_trace(sc, p, res, mem);
  const prof::FormattedTrace ft = backend::build_formatted_trace(sc, p, res, mem);
  const prof::FormattedTrace::Producer produce =
      backend::formatted_trace_producer(ft, sc, p, res, mem);
  // Expected: the same events and flows were added, so the same bytes.
  CHECK(ft.event_count() == tr.events.size());
  CHECK(ft.flow_count() == tr.flows.size());
  const std::string a = written(tr), b = written(ft, produce);
  CHECK(a.size() == b.size());
  CHECK(a == b);
}

void same_file(const std::string& file, const std::vector<std::string>& sets = {},
               bool interrupt = false) {
  INFO(file);
  same_trace(core::parse_scenario_file(test::scenario_path(file), sets), interrupt);
}

}  // namespace

// The formatted trace copies an op's name without escaping it when its interned pattern needs
// none (docs/trace-format.md, "Plain strings"); the trace built in memory escapes every name as
// it is written. Layer names with a quote, a backslash and a tab, a control byte, and a plain
// one, in a pipeline whose ops' names are patterns with the micro-batch as their field
// ("mb\x1f a\"q.fwd"): the same bytes, so the plain ones were plain and the others escaped.
TEST_CASE("formatted trace: names that need escaping", "[trace][formatted]") {
  const std::string doc = R"({"name": "escaped_names",
    "cluster": {"nodes": 1, "gpus_per_node": 2, "gpu": "A100-SXM4-80GB"},
    "model": {"name": "m\"q", "layers": [
      {"type": "linear", "name": "a\"q", "in": 1024, "out": 1024},
      {"type": "linear", "name": "b\\c\td", "in": 1024, "out": 1024},
      {"type": "linear", "name": "e\u0001f", "in": 1024, "out": 1024},
      {"type": "linear", "name": "plain", "in": 1024, "out": 1024}]},
    "training": {"global_batch": 4, "precision": "bf16", "optimizer": "adam", "steps": 2},
    "strategy": {"kind": "pipeline", "pp": 2, "micro_batch_size": 1, "schedule": "1f1b"}})";
  const core::Scenario sc = core::parse_scenario_string(doc, "escaped_names");
  same_trace(sc);
  // The file holds the escaped spellings (and so did the test above compare them).
  const core::Program p = core::lower(sc);
  sim::SimExecutor exec(sc);
  const core::ExecutionResult res = exec.run(p, {});
  const core::MemoryReport mem = core::memory_timeline(p, res.timings, sc.cluster);
  const prof::FormattedTrace ft = backend::build_formatted_trace(sc, p, res, mem);
  const std::string text = written(ft, backend::formatted_trace_producer(ft, sc, p, res, mem));
  CHECK(text.find(R"("name": "mb1 a\"q.fwd")") != std::string::npos);
  CHECK(text.find(R"("name": "mb0 b\\c\td.bwd")") != std::string::npos);
  CHECK(text.find(R"("name": "mb1 e\u0001f.fwd")") != std::string::npos);
  CHECK(text.find(R"("name": "mb0 plain.fwd")") != std::string::npos);
}

TEST_CASE("formatted trace: the same file as the trace built in memory", "[trace][formatted]") {
  same_file("gpt2_small_8xa100.json");
  same_file("gpt2_small_8xa100.json", {"strategy.kind=ddp"});
  same_file("mlp_gil_4x1080ti.json");
  same_file("ddp_batch512_workers.json");
  same_file("dp_vs_ddp_4x1080ti.json");
  same_file("gpt_pipeline_8xa100.json");
  same_file("gpt_20b_64xa100_3d.json");
  same_file("llama3_8b_64xh100_fsdp.json");
  same_file("resnet50_model_parallel_2gpu.json");
  same_file("single_gpu_linear.json");
  // An interrupted run: the metadata says "complete": false and the last step is gone.
  same_file("dp_vs_ddp_4x1080ti.json", {"training.steps=3"}, true);
  same_file("gpt_pipeline_8xa100.json", {}, true);
}

TEST_CASE("formatted trace: run() with format_trace, and the file writer", "[trace][formatted]") {
  const core::Scenario sc =
      core::parse_scenario_file(test::scenario_path("dp_vs_ddp_4x1080ti.json"));
  run::RunRequest rq;
  rq.scenario = &sc;
  const run::RunResult in_memory = run::run(rq);
  rq.format_trace = true;
  const run::RunResult formatted = run::run(rq);
  CHECK(!in_memory.trace_formatted);
  REQUIRE(formatted.trace_formatted);
  CHECK(formatted.trace.events.empty());
  const std::filesystem::path dir = test::fresh_dir("csim_", "formatted_trace");
  const std::string pa = (dir / "a.json").string(), pb = (dir / "b.json").string();
  prof::write_chrome_trace_file(in_memory.trace, pa);
  run::write_trace_file(formatted, sc, pb);
  const auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CHECK(!slurp(pa).empty());
  CHECK(slurp(pa) == slurp(pb));
  // A RunResult moved before it is written (its program, result and memory at new addresses):
  // the streamed trace refers to none of them, so the same bytes.
  run::RunResult first = run::run(rq);
  const run::RunResult moved(std::move(first));
  const std::string pc = (dir / "c.json").string();
  run::write_trace_file(moved, sc, pc);
  CHECK(slurp(pc) == slurp(pa));
}

TEST_CASE("formatted trace: lanes and flows out of order, no processes", "[trace][formatted]") {
  // Hand-made: events of two lanes interleaved, one lane out of ts order with a tie (stable: the
  // earlier-added event first), flows out of id order, a string to escape, no process or thread
  // (so the first line of traceEvents is an event's, without its comma).
  prof::Trace tr;
  prof::FormattedTrace ft;
  tr.base_ns = ft.rest.base_ns = 100;
  const std::vector<HandEvent> events = {{1, 2, 500, "b"},  {0, 7, 300, "x"}, {1, 2, 200, "a\"q\n"},
                                         {1, 2, 500, "c"},  {0, 7, 100, "y"}, {1, 2, 100, "d"},
                                         {-1, 3, 50, "neg"}};
  for (const HandEvent& e : events) {
    prof::TraceEvent& te = add_kernel(tr, e.pid, e.tid, e.ts, e.name);
    te.args.push_back({"n", std::int64_t{-3}});
    te.args.push_back({"g", 2.0});
    te.args.push_back({"s", std::string("v\t")});
    ft.begin_event(e.pid, e.tid, e.ts, 10, e.name, "kernel", prof::EventClass::kCompute, 4, -1);
    ft.arg("n", std::int64_t{-3});
    ft.arg("g", 2.0);
    ft.arg("s", std::string("v\t"));
    ft.end_event();
  }
  for (const std::int64_t id : {5, 2, 9, 2}) {
    tr.flows.push_back({id, "dependency", "dependency", 0, 7, 300, 1, 2, 500});
    ft.add_flow(id, "dependency", "dependency", 0, 7, 300, 1, 2, 500);
  }
  const std::string a = written(tr), b = written(ft);
  CHECK(a == b);
  // Expected first line of traceEvents: the (-1, 3) lane's event, as the first line.
  CHECK(b.find("\"traceEvents\": [\n    {\"ph\": \"X\"") != std::string::npos);
}

TEST_CASE("formatted trace: streamed, lanes and flows out of order, no processes",
          "[trace][formatted]") {
  // The hand-made case above, streamed (FormattedTrace::stream_from, as build_formatted_trace
  // makes it): the lines are counted, then formatted again into their places, through a stream
  // and through the file writer (pwrite at offsets). A producer whose lines change between its
  // calls is refused, and leaves no file. The names have every kind of escape (\", \n, \u0001,
  // \\), which the first build counts without writing.
  prof::Trace tr;
  tr.base_ns = 100;
  const std::vector<HandEvent> events = {
      {1, 2, 500, "b"}, {0, 7, 300, "x"}, {1, 2, 200, "a\"q\n"},   {1, 2, 500, "c"},
      {0, 7, 100, "y"}, {1, 2, 100, "d"}, {-1, 3, 50, "neg\x01\\"}};
  const std::vector<std::int64_t> flow_ids = {5, 2, 9, 2};
  for (const HandEvent& e : events) {
    prof::TraceEvent& te = add_kernel(tr, e.pid, e.tid, e.ts, e.name);
    te.args.push_back({"n", std::int64_t{-3}});
    te.args.push_back({"s", std::string("v\t")});
  }
  for (const std::int64_t id : flow_ids)
    tr.flows.push_back({id, "dependency", "dependency", 0, 7, 300, 1, 2, 500});
  int calls = 0;
  bool change = false;
  const auto produce = [&](prof::FormattedTrace& ft) {
    ++calls;
    ft.rest.base_ns = 100;
    for (const HandEvent& e : events) {
      ft.begin_event(e.pid, e.tid, e.ts, 10, e.name, "kernel", prof::EventClass::kCompute, 4, -1);
      ft.arg("n", std::int64_t{change && calls > 1 ? 300 : -3});
      ft.arg("s", std::string("v\t"));
      ft.end_event();
    }
    for (const std::int64_t id : flow_ids)
      ft.add_flow(id, "dependency", "dependency", 0, 7, 300, 1, 2, 500);
  };
  prof::FormattedTrace ft;
  ft.stream_from(produce);
  REQUIRE(ft.streamed());
  CHECK(calls == 1);
  CHECK(ft.event_count() == events.size());
  CHECK(ft.flow_count() == flow_ids.size());
  const std::string a = written(tr);
  CHECK(written(ft, produce) == a);
  CHECK(calls == 2);
  const std::filesystem::path dir = test::fresh_dir("csim_", "formatted_streamed");
  const std::string path = (dir / "t.json").string();
  prof::write_chrome_trace_file(ft, path, produce);
  std::ifstream in(path, std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == a);
  // Expected: the trace keeps no producer (nothing it could refer to after its data moved):
  // written without one it is refused before anything is written.
  const std::string none = (dir / "none.json").string();
  CHECK_THROWS_AS(prof::write_chrome_trace_file(ft, none), std::logic_error);
  CHECK(!std::filesystem::exists(none));
  std::ostringstream none_os;
  CHECK_THROWS_AS(prof::write_chrome_trace(ft, none_os), std::logic_error);
  CHECK(none_os.str().empty());
  // Expected: a line of another length at the second call is refused; no file, no temporary.
  change = true;
  calls = 0;
  prof::FormattedTrace changing;
  changing.stream_from(produce);
  const std::string bad = (dir / "bad.json").string();
  CHECK_THROWS_AS(prof::write_chrome_trace_file(changing, bad, produce), std::logic_error);
  CHECK(!std::filesystem::exists(bad));
  CHECK(prof::inflight_temporary_count() == 0);
}

TEST_CASE("formatted trace: a lane's thread added after its events is refused",
          "[trace][formatted]") {
  prof::FormattedTrace ft;
  ft.begin_event(0, 1000, 0, 5, "k", "kernel", prof::EventClass::kCompute, -1, -1);
  ft.end_event();
  // The event was formatted without a stream arg; a stream lane named now would need one.
  ft.rest.threads.push_back({0, 1000, "stream 0", prof::LaneRole::kCompute, 1000});
  std::ostringstream os;
  CHECK_THROWS_AS(prof::write_chrome_trace(ft, os), std::logic_error);
}
