// Kineto conventions in the simulator's traces (docs/trace-format.md, "Kineto conventions" and
// "Stream dependencies"), which Holistic Trace Analysis and other PyTorch-profiler tools rely on:
// copy and NCCL kernel names, categories and args, the NCCL launch call, and the CUDA events that
// make stream and host dependencies visible, each pointing at a real cudaEventRecord. Also the
// reader's side: Kineto [memory] events become memory counters; a damaged .json.gz is "corrupt".
#include <catch2/catch.hpp>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "backends/common/kineto_names.hpp"
#include "core/scenario/scenario_parser.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/op_classes.hpp"
#include "profiler/summary.hpp"
#include "profiler/trace_classify.hpp"
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

TEST_CASE("NCCL kernels: NCCL 2.28 names, modelled algorithm and protocol, real dtype",
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

// nccl_kernel_name against NCCL 2.28 (v2.28.9-1): the kernel ncclLaunchKernel launches is
// ncclDevKernelForFunc[devFuncId] (src/enqueue.cc), the one src/device/generate.py's best_kernel()
// gives each function. One case per rule of that mapping (backends/common/kineto_names.cpp).
namespace {
using core::CollectiveAlgo;
using core::CollectiveKind;
using core::Dtype;
constexpr std::array kEveryAlgo = {CollectiveAlgo::kAuto,     CollectiveAlgo::kRing,
                                   CollectiveAlgo::kTree,     CollectiveAlgo::kNvls,
                                   CollectiveAlgo::kNvlsTree, CollectiveAlgo::kCollnet,
                                   CollectiveAlgo::kPat,      CollectiveAlgo::kHierarchical};
constexpr std::array kEveryDtype = {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16, Dtype::kBf16,
                                    Dtype::kFp8};
}  // namespace

TEST_CASE("NCCL kernel names: every non-TREE algorithm runs a reduction's RING_LL kernel",
          "[kineto]") {
  // generate.py best_kernel(): `return (coll, "Sum", ty, ("TREE" if algo=="TREE" else "RING"),
  // "LL")` for AllReduce, Reduce and ReduceScatter. NVLS, NVLS_TREE, COLLNET_DIRECT and PAT (and
  // our HIERARCHICAL, not an NCCL algorithm) are not kernels of their own
  // (ncclDevKernelForFuncIsSpecialized = 0): they run in the (collective, type)'s RING_LL kernel,
  // which calls the function through ncclDevFuncTable.
  for (CollectiveAlgo a : kEveryAlgo) {
    if (a == CollectiveAlgo::kTree) continue;
    INFO(static_cast<int>(a));
    CHECK(backend::nccl_kernel_name(CollectiveKind::kAllReduce, Dtype::kBf16, a) ==
          "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
    CHECK(backend::nccl_kernel_name(CollectiveKind::kReduceScatter, Dtype::kFp32, a) ==
          "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL");
    CHECK(backend::nccl_kernel_name(CollectiveKind::kReduce, Dtype::kFp16, a) ==
          "ncclDevKernel_Reduce_Sum_f16_RING_LL");
  }
}

TEST_CASE("NCCL kernel names: an all-reduce on TREE runs the TREE_LL kernel", "[kineto]") {
  // best_kernel()'s `"TREE" if algo=="TREE"`; TREE is in generate.py's
  // algos_of_coll["AllReduce"], so ncclDevKernel_AllReduce_Sum_<ty>_TREE_LL is built.
  CHECK(
      backend::nccl_kernel_name(CollectiveKind::kAllReduce, Dtype::kFp32, CollectiveAlgo::kTree) ==
      "ncclDevKernel_AllReduce_Sum_f32_TREE_LL");
  CHECK(
      backend::nccl_kernel_name(CollectiveKind::kAllReduce, Dtype::kBf16, CollectiveAlgo::kTree) ==
      "ncclDevKernel_AllReduce_Sum_bf16_TREE_LL");
}

TEST_CASE("NCCL kernel names: reduce and reduce-scatter have no TREE kernel", "[kineto]") {
  // generate.py algos_of_coll: "Reduce": ["RING"], "ReduceScatter": ["RING", "COLLNET_DIRECT",
  // "NVLS", "PAT"]. kernel_funcs holds best_kernel() of the functions that exist, so no
  // ncclDevKernel_{Reduce,ReduceScatter}_*_TREE_LL is ever built; their kernel is RING_LL.
  CHECK(backend::nccl_kernel_name(CollectiveKind::kReduce, Dtype::kFp32, CollectiveAlgo::kTree) ==
        "ncclDevKernel_Reduce_Sum_f32_RING_LL");
  CHECK(backend::nccl_kernel_name(CollectiveKind::kReduceScatter, Dtype::kBf16,
                                  CollectiveAlgo::kTree) ==
        "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL");
}

TEST_CASE("NCCL kernel names: all-gather and broadcast have one kernel, no redop nor type",
          "[kineto]") {
  // best_kernel(): `if coll in ("AllGather","Broadcast"): return (coll, None, None, "RING",
  // "LL")`, and paste("_", "ncclDevKernel", *kfn) skips the Nones: one kernel per collective,
  // whatever the type, algorithm (RING, COLLNET_DIRECT, NVLS, PAT) and protocol.
  for (Dtype d : kEveryDtype) {
    for (CollectiveAlgo a : kEveryAlgo) {
      CHECK(backend::nccl_kernel_name(CollectiveKind::kAllGather, d, a) ==
            "ncclDevKernel_AllGather_RING_LL");
      CHECK(backend::nccl_kernel_name(CollectiveKind::kBroadcast, d, a) ==
            "ncclDevKernel_Broadcast_RING_LL");
    }
  }
}

TEST_CASE("NCCL kernel names: a reduction's type suffix is generate.py's all_tys name",
          "[kineto]") {
  // generate.py all_tys: "f16", "f32", "bf16", "f8e4m3" (TF32 math runs on f32 tensors), and
  // best_kernel() names every reduction "Sum" whatever its redop (ncclAvg runs as PreMulSum in
  // the Sum kernel); equivalent_primary() only renames signed integer types, which we never carry.
  const std::map<Dtype, std::string> suffix = {{Dtype::kFp32, "f32"},
                                               {Dtype::kTf32, "f32"},
                                               {Dtype::kFp16, "f16"},
                                               {Dtype::kBf16, "bf16"},
                                               {Dtype::kFp8, "f8e4m3"}};
  for (const auto& [d, ty] : suffix)
    CHECK(backend::nccl_kernel_name(CollectiveKind::kAllReduce, d, CollectiveAlgo::kRing) ==
          "ncclDevKernel_AllReduce_Sum_" + ty + "_RING_LL");
}

TEST_CASE("NCCL kernel names: point-to-point work runs ncclDevKernel_SendRecv", "[kineto]") {
  // best_kernel(): `if coll=="SendRecv": return ("SendRecv", None, None, None, None)`. Gather,
  // scatter and all-to-all are sends and receives: PyTorch groups ncclSend / ncclRecv, and
  // NCCL 2.28's own ncclAlltoAll / ncclGather / ncclScatter become p2pTaskAppend sends and
  // receives (src/enqueue.cc, taskAppend).
  for (CollectiveKind k : {CollectiveKind::kSendRecv, CollectiveKind::kGather,
                           CollectiveKind::kScatter, CollectiveKind::kAllToAll})
    CHECK(backend::nccl_kernel_name(k, Dtype::kBf16, CollectiveAlgo::kAuto) ==
          "ncclDevKernel_SendRecv");
}

TEST_CASE("NCCL kernel names: algorithm and protocol are in the args, never in the name",
          "[kineto]") {
  // gpt_fsdp2_8xh100 (8 H100 on NVSwitch): its all-gathers and reduce-scatters forced to NVLS
  // (which runs Simple), then to LL128 on rings. best_kernel() ignores the protocol and maps
  // NVLS to RING, so the names stay NCCL's RING_LL kernels while "algorithm" and "protocol"
  // follow the cost model's plan.
  struct Want {
    std::string set_algo, set_proto, algo, proto;
  };
  for (const Want& w : {Want{"nccl.algo=nvls", "nccl.proto=Simple", "NVLS", "SIMPLE"},
                        Want{"nccl.algo=ring", "nccl.proto=LL128", "RING", "LL128"}}) {
    INFO(w.set_algo << " " << w.set_proto);
    const prof::Trace t =
        simulate("gpt_fsdp2_8xh100.json", {"training.steps=1", w.set_algo, w.set_proto});
    int gathers = 0, scatters = 0;
    for (const prof::TraceEvent& e : t.events) {
      if (e.cls != prof::EventClass::kCommunication) continue;
      CHECK(str_arg(e, "algorithm") == w.algo);
      CHECK(str_arg(e, "protocol") == w.proto);
      const std::string coll = str_arg(e, "Collective name");
      if (coll == "_allgather_base") {
        ++gathers;
        CHECK(e.name == "ncclDevKernel_AllGather_RING_LL");
      } else if (coll == "_reduce_scatter_base") {
        ++scatters;
        CHECK(e.name == "ncclDevKernel_ReduceScatter_Sum_" +
                            std::string(str_arg(e, "dtype") == "Float" ? "f32" : "bf16") +
                            "_RING_LL");
      }
    }
    CHECK(gathers > 0);
    CHECK(scatters > 0);
  }
}

TEST_CASE("NCCL kernel names classify as their collective", "[kineto]") {
  // A PyTorch-profiler trace has no "class" arg nor, for a kernel, our "Collective name": the
  // reader classifies by name (trace_classify.cpp: "nccl" -> communication) and tracediff groups
  // by op class from the name (op_classes.cpp). Every name nccl_kernel_name makes must land on
  // its collective.
  const std::pair<CollectiveKind, const char*> want[] = {
      {CollectiveKind::kAllReduce, "all_reduce"},
      {CollectiveKind::kReduceScatter, "reduce_scatter"},
      {CollectiveKind::kReduce, "reduce"},
      {CollectiveKind::kAllGather, "all_gather"},
      {CollectiveKind::kBroadcast, "broadcast"},
      {CollectiveKind::kSendRecv, "send_recv"}};
  // CUPTI names a kernel by its demangled symbol, parameter list included (the kernels take one
  // ncclDevKernelArgs4K, src/include/device.h: ncclDevKernelArgsStorage<(4<<10)>): both forms.
  for (const auto& [k, cls] : want) {
    for (CollectiveAlgo a : kEveryAlgo) {
      for (const char* params : {"", "(ncclDevKernelArgsStorage<4096ul>)"}) {
        prof::TraceEvent e;
        e.cat = "kernel";
        e.name = backend::nccl_kernel_name(k, Dtype::kBf16, a) + params;
        INFO(e.name);
        e.cls = prof::classify(e.cat, e.name);
        CHECK(e.cls == prof::EventClass::kCommunication);
        CHECK(prof::op_class(e) == cls);
      }
    }
  }
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
