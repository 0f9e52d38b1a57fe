// simrun collective (docs/collective.md): one collective alone on a cluster, as nccl-tests runs it
// (all_reduce_perf -b MIN -e MAX -f FACTOR), timed by the collective cost API the simulator itself
// calls (core/cost/collective_cost.hpp, plan_collective: the plan's uncontended predicted_ns, which
// the flow network reproduces for a lone ring, chain or hierarchical plan), one row per size with
// nccl-tests' columns.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"
#include "core/units.hpp"

namespace csim::run {

struct CollectiveBenchRequest {
  std::string cluster_path;            // a cluster file (scenarios/clusters/*.json)
  std::vector<std::string> overrides;  // --set cluster.KEY=VALUE, in order
  core::CollectiveKind kind = core::CollectiveKind::kAllReduce;
  core::CollectiveAlgo algo = core::CollectiveAlgo::kAuto;  // NCCL_ALGO; kAuto: NCCL's choice
  core::NcclProto proto = core::NcclProto::kAuto;           // NCCL_PROTO
  int gpus = 0;                                             // ranks; 0 = every GPU of the cluster
  std::string dtype = "float";                              // nccl-tests -d
  std::int64_t min_bytes = 8;                               // -b
  std::int64_t max_bytes = 128 << 20;                       // -e
  double factor = 2;                                        // -f; 0 = step by step_bytes
  std::int64_t step_bytes = 0;                              // -i
};

struct CollectiveBenchRow {
  std::int64_t size_bytes = 0;  // nccl-tests "size": the buffer per rank (all-gather: the output)
  std::int64_t count = 0;       // elements of dtype
  TimeNs time_ns = 0;           // predicted time
  double algbw_gb_s = 0;        // size / time
  double busbw_gb_s = 0;        // algbw x busbw_factor(op, ranks)
  core::CollectiveAlgo algo = core::CollectiveAlgo::kAuto;  // the algorithm the plan chose
  core::NcclProto proto = core::NcclProto::kAuto;           // and its protocol
};

struct CollectiveBenchResult {
  core::ClusterSpec cluster;  // as loaded (overrides and --gpus applied)
  int ranks = 0;
  std::vector<CollectiveBenchRow> rows;
  std::vector<std::string> warnings;  // the cluster file's
};

// Names as the command line spells them (nccl-tests binary names without _perf; NCCL_ALGO /
// NCCL_PROTO values, case-insensitive). Throw InputError naming `option` on an unknown one.
core::CollectiveKind parse_collective_op(const std::string& name, const std::string& option);
core::CollectiveAlgo parse_collective_algo(const std::string& name, const std::string& option);
core::NcclProto parse_collective_proto(const std::string& name, const std::string& option);
// nccl-tests sizes: bytes with an optional K, M, G or T suffix (powers of 1024).
std::int64_t parse_collective_size(const std::string& text, const std::string& option);
// Bytes of an nccl-tests dtype (int8, uint8, int32, uint32, int64, uint64, half, float, double,
// bfloat16, fp8_e4m3, fp8_e5m2); 0 for an unknown one.
int collective_dtype_bytes(const std::string& dtype);

// Loads the cluster, checks the request (InputError, exit 2) and times every size.
CollectiveBenchResult run_collective_bench(const CollectiveBenchRequest& rq);

// The nccl-tests table: a header naming the cluster and the model, then one line per size.
void print_collective_bench(const CollectiveBenchRequest& rq, const CollectiveBenchResult& r,
                            std::ostream& out);

}  // namespace csim::run
