// CUPTI records -> trace additions (profiler/cupti/cupti_records.hpp), with hand-made records:
// no CUPTI and no GPU needed. The trace they join is shaped like build_trace's (one process per
// GPU, op events on stream lanes with correlation op.id + 1 and an ac2g flow of that id).
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "profiler/chrome_trace_reader.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/cupti/cupti_records.hpp"

using namespace csim;
using cupti::Record;
using cupti::RecordKind;

namespace {

// GPU 0, one thread; ops 0-2 are host work, op 3 a GEMM on stream 0, op 4 an H2D copy on stream 1.
core::Program program() {
  core::Program p;
  p.world_gpus = 1;
  p.gpus_per_node = 1;
  p.active_gpus = {0};
  p.processes.push_back({0, 0, "test", false});
  p.threads.push_back({0, 0, 0, "main"});
  p.streams.push_back({0, 0, core::StreamRole::kCompute, "compute"});
  p.streams.push_back({1, 0, core::StreamRole::kCopy, "copy"});
  for (int i = 0; i < 5; ++i) {
    core::Op op;
    op.id = i;
    op.thread = 0;
    op.gpu = 0;
    op.name = p.names.intern("host " + std::to_string(i));
    op.kind = core::OpKind::kHostWork;
    p.ops.push_back(op);
  }
  p.ops[3].name = p.names.intern("fc.fwd");
  p.ops[3].kind = core::OpKind::kCompute;
  p.ops[3].stream = 0;
  p.ops[4].name = p.names.intern("input h2d");
  p.ops[4].kind = core::OpKind::kCopy;
  p.ops[4].stream = 1;
  return p;
}

// What build_trace makes of ops 3 and 4: their events on stream lanes 1000 and 1001, correlations
// 4 and 5 (op.id + 1), and one ac2g flow of id 5.
prof::Trace op_trace() {
  prof::Trace t;
  t.processes.push_back({0, "node 0 / GPU 0", 0, 0, 0, 0, 0});
  t.threads.push_back({0, 1, "main", prof::LaneRole::kHost, 0});
  t.threads.push_back({0, 1000, "stream 0 compute", prof::LaneRole::kCompute, 1000});
  t.threads.push_back({0, 1001, "stream 1 copy", prof::LaneRole::kCopy, 1001});
  t.events.push_back({0, 1000, 950, 900, "fc.fwd", "kernel", prof::EventClass::kCompute, 3, 4, {}});
  t.events.push_back(
      {0, 1001, 1950, 700, "input h2d", "gpu_memcpy", prof::EventClass::kCopy, 4, 5, {}});
  t.flows.push_back({5, "ac2g", "ac2g", 0, 1, 1900, 0, 1001, 1950});
  return t;
}

Record rec(RecordKind kind, std::string name, TimeNs start, TimeNs end, std::int64_t corr) {
  Record r;
  r.kind = kind;
  r.name = std::move(name);
  r.start_ns = start;
  r.end_ns = end;
  r.correlation = corr;
  return r;
}

// Two kernels of op 3 (400 + 300 ns), one memcpy of op 4 (600 ns), the launch of the first
// kernel, and a runtime call that launched nothing; op ids come from external correlation.
std::vector<Record> records() {
  std::vector<Record> rs;
  Record k1 = rec(RecordKind::kKernel, "gemm_tile_a", 1000, 1400, 10);
  Record k2 = rec(RecordKind::kKernel, "gemm_tile_b", 1500, 1800, 11);
  Record m = rec(RecordKind::kMemcpy, "Memcpy HtoD (Pinned -> Device)", 2000, 2600, 12);
  for (Record* r : {&k1, &k2, &m}) {
    r->device = 0;
    r->gpu = 0;
    r->stream = 7;
  }
  m.stream = 9;
  m.bytes = 4096;
  m.copy_kind = "HtoD";
  Record launch = rec(RecordKind::kRuntime, "cudaLaunchKernel", 900, 990, 10);
  launch.thread = 4242;
  Record event = rec(RecordKind::kRuntime, "cudaEventRecord", 1990, 1995, 13);
  event.thread = 4242;
  rs = {launch, k1, k2, event, m};
  cupti::resolve_op_ids(rs, {{10, 3}, {11, 3}, {12, 4}, {13, 4}});
  return rs;
}

const prof::TraceEvent* find(const prof::Trace& t, const std::string& name) {
  for (const prof::TraceEvent& e : t.events)
    if (e.name == name) return &e;
  return nullptr;
}

const prof::ArgValue* arg(const prof::TraceEvent& e, const std::string& key) {
  for (const prof::Arg& a : e.args)
    if (a.key == key) return &a.value;
  return nullptr;
}

}  // namespace

TEST_CASE("cupti records: op ids resolve through external correlation", "[cupti]") {
  const std::vector<Record> rs = records();
  // launch (corr 10 -> op 3), kernels (10, 11 -> op 3), event (13 -> op 4), memcpy (12 -> op 4)
  CHECK(rs[0].op_id == 3);
  CHECK(rs[1].op_id == 3);
  CHECK(rs[2].op_id == 3);
  CHECK(rs[3].op_id == 4);
  CHECK(rs[4].op_id == 4);
  std::vector<Record> unmapped = {rec(RecordKind::kKernel, "k", 0, 1, 77)};
  cupti::resolve_op_ids(unmapped, {{10, 3}});
  CHECK(unmapped[0].op_id == -1);  // no external id for correlation 77
}

TEST_CASE("cupti records: per-op GPU time sums the op's kernels and copies", "[cupti]") {
  const std::vector<cupti::OpGpuTime> t = cupti::gpu_time_by_op(records());
  REQUIRE(t.size() == 2);
  CHECK(t[0].op == 3);
  CHECK(t[0].kernel_ns == 700);  // (1400 - 1000) + (1800 - 1500)
  CHECK(t[0].kernels == 2);
  CHECK(t[0].copy_ns == 0);
  CHECK(t[1].op == 4);
  CHECK(t[1].copy_ns == 600);  // 2600 - 2000
  CHECK(t[1].copies == 1);
  CHECK(t[1].kernels == 0);
}

TEST_CASE("cupti records: events on CUPTI lanes, one launch flow, per-op args", "[cupti]") {
  const core::Program p = program();
  prof::Trace t = op_trace();
  const std::size_t events_before = t.events.size(), threads_before = t.threads.size();
  const cupti::AppendStats st = cupti::append_to_trace(records(), p, &t);

  // 3 GPU records + the one launch that issued GPU work; cudaEventRecord launched nothing.
  CHECK(st.records == 5);
  CHECK(st.gpu_records == 3);
  CHECK(st.gpu_records_without_op == 0);
  CHECK(st.events == 4);
  CHECK(t.events.size() == events_before + 4);
  CHECK(st.flows == 1);
  CHECK(t.flows.size() == 2);
  CHECK(st.skipped == 0);
  CHECK(st.ops_with_gpu_time == 2);
  CHECK(find(t, "cudaEventRecord") == nullptr);

  // Lanes: CUPTI streams 7 and 9 and the launching thread, all under GPU 0, role other.
  CHECK(t.threads.size() == threads_before + 3);
  const prof::ThreadInfo* s7 = t.thread(0, cupti::kStreamTidBase + 7);
  const prof::ThreadInfo* s9 = t.thread(0, cupti::kStreamTidBase + 9);
  const prof::ThreadInfo* host = t.thread(0, cupti::kHostTidBase + 0);
  REQUIRE(s7 != nullptr);
  REQUIRE(s9 != nullptr);
  REQUIRE(host != nullptr);
  CHECK(s7->name == "CUPTI stream 7");
  CHECK(s7->role == prof::LaneRole::kOther);
  CHECK(host->name == "CUPTI host thread 0 (tid 4242)");
  CHECK(t.processes.size() == 1);  // GPU 0's process already existed

  const prof::TraceEvent* k1 = find(t, "gemm_tile_a");
  const prof::TraceEvent* k2 = find(t, "gemm_tile_b");
  const prof::TraceEvent* m = find(t, "Memcpy HtoD (Pinned -> Device)");
  const prof::TraceEvent* launch = find(t, "cudaLaunchKernel");
  REQUIRE(k1 != nullptr);
  REQUIRE(k2 != nullptr);
  REQUIRE(m != nullptr);
  REQUIRE(launch != nullptr);
  CHECK(k1->pid == 0);
  CHECK(k1->tid == cupti::kStreamTidBase + 7);
  CHECK(k1->ts_ns == 1000);
  CHECK(k1->dur_ns == 400);
  CHECK(k1->cat == "kernel");
  CHECK(k1->cls == prof::EventClass::kCompute);
  CHECK(k1->op_id == 3);
  REQUIRE(arg(*k1, "op") != nullptr);
  CHECK(std::get<std::string>(*arg(*k1, "op")) == "fc.fwd");
  CHECK(k2->op_id == 3);
  CHECK(m->tid == cupti::kStreamTidBase + 9);
  CHECK(m->cat == "gpu_memcpy");
  CHECK(m->cls == prof::EventClass::kCopy);
  CHECK(m->op_id == 4);
  CHECK(std::get<std::int64_t>(*arg(*m, "bytes")) == 4096);
  CHECK(std::get<std::string>(*arg(*m, "cupti_copy_kind")) == "HtoD");
  CHECK(launch->tid == cupti::kHostTidBase);
  CHECK(launch->cat == "cuda_runtime");
  CHECK(launch->cls == prof::EventClass::kHost);

  // Correlation ids are shifted past the trace's largest id (correlation 5, flow 5): base 6, so
  // CUPTI's correlation 10 becomes 16, on the kernel, its launch and their flow.
  CHECK(k1->correlation == 16);
  CHECK(launch->correlation == 16);
  CHECK(std::get<std::int64_t>(*arg(*k1, "cupti_correlation")) == 10);
  const prof::FlowEvent& f = t.flows.back();
  CHECK(f.id == 16);
  CHECK(f.cat == "ac2g");
  CHECK(f.from_pid == 0);
  CHECK(f.from_tid == cupti::kHostTidBase);
  CHECK(f.from_ts_ns == 900);
  CHECK(f.to_pid == 0);
  CHECK(f.to_tid == cupti::kStreamTidBase + 7);
  CHECK(f.to_ts_ns == 1000);

  // The ops' own events carry the sums: op 3 700 ns of kernels, op 4 600 ns of copies.
  const prof::TraceEvent& op3 = t.events[0];
  const prof::TraceEvent& op4 = t.events[1];
  REQUIRE(arg(op3, "cupti_kernel_ns") != nullptr);
  CHECK(std::get<std::int64_t>(*arg(op3, "cupti_kernel_ns")) == 700);
  CHECK(arg(op3, "cupti_copy_ns") == nullptr);
  REQUIRE(arg(op4, "cupti_copy_ns") != nullptr);
  CHECK(std::get<std::int64_t>(*arg(op4, "cupti_copy_ns")) == 600);
  CHECK(t.metadata["cupti"]["gpu_records"] == 3);
  CHECK(t.metadata["cupti"]["flows"] == 1);

  // The result is an ordinary trace: written and read back, nothing is lost.
  std::ostringstream os;
  prof::write_chrome_trace(t, os);
  const prof::Trace back = prof::read_chrome_trace_string(os.str(), "cupti test");
  CHECK(back.events.size() == t.events.size());
  CHECK(back.flows.size() == t.flows.size());
  CHECK(back.threads.size() == t.threads.size());
}

TEST_CASE("cupti records: NCCL kernels, nested launches, syncs, markers, no GPU", "[cupti]") {
  const core::Program p = program();
  prof::Trace t = op_trace();
  Record nccl = rec(RecordKind::kKernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100, 500, 1);
  nccl.stream = 3;
  nccl.op_id = 3;  // no gpu: placed on its op's GPU (0)
  // A runtime call and the driver call it made share correlation 1: both are shown, the flow
  // starts at the runtime call, which began first.
  Record rt = rec(RecordKind::kRuntime, "cudaLaunchKernel", 50, 90, 1);
  Record drv = rec(RecordKind::kDriver, "cuLaunchKernelEx", 60, 80, 1);
  rt.thread = drv.thread = 7;
  // A stream wait whose call is known goes on that call's thread lane.
  Record wait = rec(RecordKind::kSync, "Event Synchronize", 600, 900, 1);
  wait.gpu = 0;
  Record range = rec(RecordKind::kMarker, "nccl: AllReduce", 40, 95, -1);
  range.thread = 7;
  Record lost = rec(RecordKind::kKernel, "nowhere", 0, 10, 2);  // no gpu, no op: skipped
  const cupti::AppendStats st = cupti::append_to_trace({rt, drv, nccl, wait, range, lost}, p, &t);
  CHECK(st.gpu_records == 2);
  CHECK(st.gpu_records_without_op == 1);
  CHECK(st.skipped == 1);
  CHECK(st.events == 5);  // nccl kernel, 2 API calls, the wait, the range
  CHECK(st.flows == 1);
  const prof::TraceEvent* k = find(t, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  REQUIRE(k != nullptr);
  CHECK(k->pid == 0);
  CHECK(k->cls == prof::EventClass::kCommunication);
  CHECK(t.flows.back().from_ts_ns == 50);
  const prof::TraceEvent* w = find(t, "Event Synchronize");
  REQUIRE(w != nullptr);
  CHECK(w->tid == cupti::kHostTidBase);
  CHECK(w->cat == "cuda_sync");
  const prof::TraceEvent* r = find(t, "nccl: AllReduce");
  REQUIRE(r != nullptr);
  CHECK(r->tid == cupti::kNvtxTidBase);
  CHECK(r->cls == prof::EventClass::kAnnotation);
  CHECK(r->dur_ns == 55);
}
