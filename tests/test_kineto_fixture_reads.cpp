// Reading the real PyTorch-profiler (Kineto) traces (tests/kineto_fixtures.hpp): a profile_memory
// trace's [memory] events, a damaged .json.gz, and an NCCL trace read, summarised and rewritten.
// Part of tests_kineto_fixtures: skipped visibly when the fixtures are absent.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include "kineto_fixtures.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/summary.hpp"
#include "profiler/trace_classify.hpp"
#include "test_support.hpp"

using namespace csim;
using namespace csim::prof;

namespace {

std::string trace_text(const Trace& t) {
  std::ostringstream os;
  write_chrome_trace(t, os);
  return os.str();
}

}  // namespace

TEST_CASE("Kineto [memory] events give memory data, a damaged .json.gz is corrupt", "[kineto]") {
  const std::string fx = test::kineto_fixture("df_index_resolver.json.gz");
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

TEST_CASE("real PyTorch-profiler trace (NCCL, gzip) reads and summarises", "[trace][kineto]") {
  const std::string path = test::kineto_fixture("nccl_data.json.gz");
  ReadStats st;
  const Trace t = read_chrome_trace_file(path, &st);
  CHECK(st.events > 20000);
  CHECK(st.skipped_records == 0);
  CHECK(st.flows > 1000);  // ac2g launch → kernel and fwdbwd
  CHECK(t.rank == 0);
  CHECK(t.world_size == 2);
  int comm = 0;
  for (const TraceEvent& e : t.events) {
    if (e.cat == "kernel" && e.name.find("nccl") != std::string::npos) {
      CHECK(e.cls == EventClass::kCommunication);
      ++comm;
    }
  }
  CHECK(comm > 0);
  // Converted once, our file of it is stable: write → read → write gives the same bytes (the
  // reader rebased Kineto's far-from-base timestamps so that µs with 3 decimals stay exact).
  const std::string ours = trace_text(t);
  CHECK(trace_text(read_chrome_trace_string(ours, "ours.json")) == ours);
  const Summary s = summarize(t);
  CHECK_FALSE(s.has_memory_data);
  CHECK(s.imbalance == 0);
  CHECK(s.step_times_ns.size() == 3);  // ProfilerStep#4–6
  REQUIRE(s.per_gpu.size() == 1);
  CHECK(s.per_gpu[0].gpu == 0);
  CHECK(s.per_gpu[0].comm_s + s.per_gpu[0].overlapped_comm_s > 0);
  // Its NCCL kernels carry record_param_comms' "Process Group Description": "default_pg", so
  // all of its communication is that group's (docs/summary.md, "Communication by group"): the
  // group's exposed time is the GPU's exposed communication, its time the GPU's comm + overlap.
  REQUIRE(s.comm_by_group.size() == 1);
  CHECK(s.comm_by_group[0].group == "default_pg");
  CHECK(s.comm_by_group[0].exposed_s == Approx(s.per_gpu[0].exposed_comm_s));
  CHECK(s.comm_by_group[0].comm_s ==
        Approx(s.per_gpu[0].comm_s + s.per_gpu[0].overlapped_comm_s));
  std::ostringstream table;
  print_summary_table(s, table);
  CHECK(table.str().find("no memory data") != std::string::npos);
}
