// Kineto conventions in the simulator's traces (docs/trace-format.md, "Kineto conventions" and
// "Stream dependencies"), which Holistic Trace Analysis and other PyTorch-profiler tools rely on:
// copy and NCCL kernel names, categories and args, the NCCL launch call, and the CUDA events that
// make stream and host dependencies visible, each pointing at a real cudaEventRecord. Also the
// reader's side: Kineto [memory] events become memory counters; a damaged .json.gz is "corrupt".
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/scenario_parser.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/summary.hpp"
#include "run/run.hpp"
#include "test_support.hpp"

using namespace csim;

namespace {

const prof::Arg* arg(const prof::TraceEvent& e, const std::string& key) {
  for (const prof::Arg& a : e.args) {
    if (a.key == key) return &a;
  }
  return nullptr;
}
std::string str_arg(const prof::TraceEvent& e, const std::string& key) {
  const prof::Arg* a = arg(e, key);
  return a && std::holds_alternative<std::string>(a->value) ? std::get<std::string>(a->value) : "";
}
std::int64_t int_arg(const prof::TraceEvent& e, const std::string& key) {
  const prof::Arg* a = arg(e, key);
  return a && std::holds_alternative<std::int64_t>(a->value) ? std::get<std::int64_t>(a->value)
                                                             : -999;
}

prof::Trace simulate(const std::string& scenario, const std::vector<std::string>& overrides) {
  return run::simulate(core::parse_scenario_file(test::scenario_path(scenario), overrides)).trace;
}

// The trace as a tool reads it: written and read back (what HTA sees is the written file).
prof::Trace round_trip(const prof::Trace& t) {
  std::ostringstream o;
  prof::write_chrome_trace(t, o);
  return prof::read_chrome_trace_string(o.str(), "trace");
}

}  // namespace

TEST_CASE("DataParallel copies carry Kineto's memcpy names, category and args", "[kineto]") {
  // dp_vs_ddp_4x1080ti as DataParallel: the batch goes host -> GPU 0 (H2D), is scattered to the
  // replicas and the outputs gathered back to GPU 0 (peer copies between GPUs: PtoP).
  const prof::Trace t = round_trip(simulate("dp_vs_ddp_4x1080ti.json", {"training.steps=1"}));
  std::set<std::string> names;
  for (const prof::TraceEvent& e : t.events) {
    if (e.cls != prof::EventClass::kCopy) continue;
    names.insert(e.name);
    CHECK(e.cat == "gpu_memcpy");
    const std::int64_t bytes = int_arg(e, "bytes");
    CHECK(bytes > 0);
    const prof::Arg* bw = arg(e, "memory bandwidth (GB/s)");
    REQUIRE(bw != nullptr);
    // Kineto's bandwidth is bytes over the duration: bytes per ns is GB/s.
    if (e.dur_ns > 0)
      CHECK(std::get<double>(bw->value) == Approx(double(bytes) / double(e.dur_ns)));
  }
  CHECK(names.count("Memcpy PtoP (Device -> Device)") == 1);
  for (const std::string& n : names) {
    INFO(n);
    CHECK((n == "Memcpy PtoP (Device -> Device)" || n == "Memcpy HtoD (Pinned -> Device)" ||
           n == "Memcpy HtoD (Pageable -> Device)" || n == "Memcpy DtoH (Device -> Pageable)" ||
           n == "Memcpy DtoD (Device -> Device)"));
  }
}

TEST_CASE("NCCL kernels: NCCL 2.2x names, modelled algorithm and protocol, real dtype",
          "[kineto]") {
  // DDP on 4 GPUs, fp32: every bucket all-reduce runs in NCCL's one fp32 sum kernel,
  // ncclDevKernel_AllReduce_Sum_f32_RING_LL (generate.py's best_kernel), launched with the
  // driver's cuLaunchKernelEx as NCCL 2.28's ncclLaunchKernel does.
  const prof::Trace t =
      round_trip(simulate("dp_vs_ddp_4x1080ti.json", {"strategy.kind=ddp", "training.steps=1"}));
  std::map<std::int64_t, const prof::TraceEvent*> launch_of;
  for (const prof::TraceEvent& e : t.events) {
    if (e.cls == prof::EventClass::kHost && e.correlation >= 0) launch_of[e.correlation] = &e;
  }
  int all_reduces = 0;
  for (const prof::TraceEvent& e : t.events) {
    if (e.cls != prof::EventClass::kCommunication) continue;
    CHECK(e.cat == "kernel");
    CHECK(e.name.rfind("ncclDevKernel_", 0) == 0);
    CHECK(e.name.find(' ') == std::string::npos);  // no text of ours in the name
    const std::string coll = str_arg(e, "Collective name");
    if (coll == "allreduce") {
      ++all_reduces;
      const std::string algo = str_arg(e, "algorithm");
      CHECK(e.name == (algo == "TREE" ? "ncclDevKernel_AllReduce_Sum_f32_TREE_LL"
                                      : "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
      CHECK((algo == "RING" || algo == "TREE" || algo == "HIERARCHICAL"));
      const std::string proto = str_arg(e, "protocol");
      CHECK((proto == "LL" || proto == "LL128" || proto == "SIMPLE"));
      CHECK(str_arg(e, "dtype") == "Float");
      // fp32 payload: elements are bytes / 4, the same in and out for an all-reduce.
      CHECK(int_arg(e, "In msg nelems") == int_arg(e, "bytes") / 4);
      CHECK(int_arg(e, "Out msg nelems") == int_arg(e, "In msg nelems"));
      CHECK(int_arg(e, "Group size") == 4);
    }
    REQUIRE(launch_of.count(e.correlation) == 1);
    CHECK(launch_of[e.correlation]->name == "cuLaunchKernelEx");
    CHECK(launch_of[e.correlation]->cat == "cuda_driver");
  }
  CHECK(all_reduces > 0);
}

TEST_CASE("bf16 collectives: dtype BFloat16 and elements of 2 bytes", "[kineto]") {
  // gpt_pipeline_8xa100 in bf16: the gradient all-reduces and pipeline sends carry bf16
  // tensors, so "In msg nelems" is bytes / 2 and the kernel type suffix bf16.
  const prof::Trace t =
      simulate("gpt_pipeline_8xa100.json", {"training.steps=1", "training.precision=bf16"});
  int bf16 = 0;
  for (const prof::TraceEvent& e : t.events) {
    if (e.cls != prof::EventClass::kCommunication || str_arg(e, "dtype") != "BFloat16") continue;
    ++bf16;
    const std::string coll = str_arg(e, "Collective name");
    if (coll == "allreduce" || coll == "sendrecv")
      CHECK(int_arg(e, "In msg nelems") == int_arg(e, "bytes") / 2);
    if (coll == "allreduce") CHECK(e.name.find("_Sum_bf16_") != std::string::npos);
  }
  CHECK(bf16 > 0);
}

TEST_CASE("stream dependencies: cuda_sync events point at real cudaEventRecord calls", "[kineto]") {
  // DDP: each bucket's all-reduce (NCCL stream) waits for the backward kernel that made its
  // gradients ready (compute stream), and the optimizer waits for the all-reduces: cross-stream
  // dependencies of one process, which PyTorch expresses with CUDA events.
  const prof::Trace t =
      round_trip(simulate("dp_vs_ddp_4x1080ti.json", {"strategy.kind=ddp", "training.steps=2"}));
  std::map<std::pair<int, std::int64_t>, const prof::TraceEvent*> record, wait_call, sync_call;
  std::map<std::pair<int, std::int64_t>, const prof::TraceEvent*> device_by_corr;
  for (const prof::TraceEvent& e : t.events) {
    if (e.name == "cudaEventRecord") record[{e.pid, e.correlation}] = &e;
    if (e.name == "cudaStreamWaitEvent") wait_call[{e.pid, e.correlation}] = &e;
    if (e.name == "cudaEventSynchronize") sync_call[{e.pid, e.correlation}] = &e;
  }
  int stream_waits = 0, event_syncs = 0;
  for (const prof::TraceEvent& e : t.events) {
    if (e.cat != "cuda_sync") continue;
    const std::int64_t rec = int_arg(e, "wait_on_cuda_event_record_corr_id");
    INFO(e.name << " corr " << e.correlation << " record " << rec);
    // The record is a real cudaEventRecord of this process (the GPU's file), issued before the
    // wait.
    REQUIRE(record.count({e.pid, rec}) == 1);
    const prof::TraceEvent& r = *record[{e.pid, rec}];
    CHECK(int_arg(e, "wait_on_cuda_event_id") > 0);
    CHECK(int_arg(e, "wait_on_stream") >= 1000);  // a stream lane of ours (stream_tid)
    if (e.name == "Stream Wait Event") {
      ++stream_waits;
      // Its correlation is the cudaStreamWaitEvent call's, which comes after the record...
      REQUIRE(wait_call.count({e.pid, e.correlation}) == 1);
      CHECK(wait_call[{e.pid, e.correlation}]->ts_ns >= r.ts_ns);
      // ...and it sits on the waiting stream, which is not the recording one.
      CHECK(e.tid != int_arg(e, "wait_on_stream"));
      CHECK(e.dur_ns >= 0);
    } else {
      CHECK(e.name == "Event Sync");
      ++event_syncs;
      REQUIRE(sync_call.count({e.pid, e.correlation}) == 1);
    }
  }
  CHECK(stream_waits > 0);
  // Per step, about one Stream Wait Event per bucket all-reduce and per optimizer dependency.
}

TEST_CASE("Kineto [memory] events give memory data, a damaged .json.gz is corrupt", "[kineto]") {
  const std::string fx = test::repo_path("../shared/fixtures/kineto/df_index_resolver.json.gz");
  if (!std::filesystem::exists(fx)) {
    WARN("fixture absent: " << fx);
    return;
  }
  prof::ReadStats st;
  const prof::Trace t = prof::read_chrome_trace_file(fx, &st);
  // 28,010 [memory] events: 26,770 on CUDA device 1 (the rest are host memory, Device Type 0).
  CHECK(st.memory_events == 26770);
  const prof::Summary s = prof::summarize(t);
  CHECK(s.has_memory_data);
  // The largest "Total Allocated" of device 1 in the file is 6,629,508,096 bytes.
  bool found = false;
  for (const auto& g : s.per_gpu) {
    if (g.peak_bytes > 0) {
      CHECK(g.peak_bytes == 6629508096);
      found = true;
    }
  }
  CHECK(found);

  // A gzip header followed by garbage, and the fixture cut in half.
  const auto dir = test::fresh_dir("kineto_conv", "corrupt");
  const std::string bad = (dir / "bad.json.gz").string(), cut = (dir / "cut.json.gz").string();
  {
    std::ofstream(bad, std::ios::binary)
        << std::string("\x1f\x8b\x08\x00garbage that is not deflate", 31);
    const std::string all = test::read_file(fx);
    std::ofstream(cut, std::ios::binary) << all.substr(0, all.size() / 2);
  }
  for (const std::string& f : {bad, cut}) {
    INFO(f);
    try {
      (void)prof::read_chrome_trace_file(f);
      FAIL("no error");
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find("corrupt") != std::string::npos);
      CHECK(msg.find(f) != std::string::npos);
      CHECK(msg.find("empty input") == std::string::npos);
    }
  }
}
