// simrun collective (docs/collective.md).
#include "run/collective_bench.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

#include "core/cost/collective_cost.hpp"
#include "core/error.hpp"
#include "core/hardware/nic_stack.hpp"
#include "core/hardware/topology.hpp"
#include "core/scenario/parse_nccl.hpp"
#include "core/scenario/scenario_parser.hpp"

namespace csim::run {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

[[noreturn]] void bad_option(const std::string& option, const std::string& message,
                             const std::string& hint) {
  throw InputError("(command line)", option, message, hint);
}

// nccl-tests' data types and their sizes (nccl-tests src/common.cu, test_typenames).
struct DtypeName {
  const char* name;
  int bytes;
};
constexpr DtypeName kDtypes[] = {{"int8", 1},   {"uint8", 1},    {"int32", 4},    {"uint32", 4},
                                 {"int64", 8},  {"uint64", 8},   {"half", 2},     {"float", 4},
                                 {"double", 8}, {"bfloat16", 2}, {"fp8_e4m3", 1}, {"fp8_e5m2", 1}};

bool rooted(core::CollectiveKind k) {
  return k == core::CollectiveKind::kBroadcast || k == core::CollectiveKind::kReduce;
}
bool reduces(core::CollectiveKind k) {
  return k == core::CollectiveKind::kAllReduce || k == core::CollectiveKind::kReduceScatter ||
         k == core::CollectiveKind::kReduce;
}
// nccl-tests splits the buffer over the ranks for these (count / ranks elements each).
bool per_rank_split(core::CollectiveKind k) {
  return k == core::CollectiveKind::kAllGather || k == core::CollectiveKind::kReduceScatter ||
         k == core::CollectiveKind::kAllToAll;
}

const char* op_name(core::CollectiveKind k) {
  switch (k) {
    case core::CollectiveKind::kAllReduce:
      return "all_reduce";
    case core::CollectiveKind::kAllGather:
      return "all_gather";
    case core::CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case core::CollectiveKind::kBroadcast:
      return "broadcast";
    case core::CollectiveKind::kReduce:
      return "reduce";
    case core::CollectiveKind::kAllToAll:
      return "alltoall";
    default:
      return core::to_string(k);
  }
}

// A number in `width` characters, as many decimals (2, 1, 0) as fit.
std::string fit(double v, int width) {
  char buf[64];
  for (int decimals = 2; decimals >= 0; --decimals) {
    const int n = std::snprintf(buf, sizeof buf, "%*.*f", width, decimals, v);
    if (n <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, "%*.1e", width, v);
  return buf;
}

}  // namespace

core::CollectiveKind parse_collective_op(const std::string& name, const std::string& option) {
  const std::string n = lower(name);
  const core::CollectiveKind kinds[] = {
      core::CollectiveKind::kAllReduce,     core::CollectiveKind::kAllGather,
      core::CollectiveKind::kReduceScatter, core::CollectiveKind::kBroadcast,
      core::CollectiveKind::kReduce,        core::CollectiveKind::kAllToAll};
  for (core::CollectiveKind k : kinds)
    if (n == op_name(k)) return k;
  bad_option(option, "unknown collective '" + name + "'",
             "all_reduce, all_gather, reduce_scatter, broadcast, reduce or alltoall");
}

core::CollectiveAlgo parse_collective_algo(const std::string& name, const std::string& option) {
  const std::string n = lower(name);
  if (n == "auto") return core::CollectiveAlgo::kAuto;
  if (n == "ring") return core::CollectiveAlgo::kRing;
  if (n == "tree") return core::CollectiveAlgo::kTree;
  if (n == "nvls") return core::CollectiveAlgo::kNvls;
  if (n == "hierarchical") return core::CollectiveAlgo::kHierarchical;
  if (n == "collnet") return core::CollectiveAlgo::kCollnet;
  if (n == "nvlstree") return core::CollectiveAlgo::kNvlsTree;
  if (n == "pat") return core::CollectiveAlgo::kPat;
  bad_option(option, "unknown algorithm '" + name + "'",
             "auto, ring, tree, nvls, hierarchical, collnet, nvlstree or pat");
}

core::NcclProto parse_collective_proto(const std::string& name, const std::string& option) {
  const std::string n = lower(name);
  if (n == "auto") return core::NcclProto::kAuto;
  if (n == "ll") return core::NcclProto::kLL;
  if (n == "ll128") return core::NcclProto::kLL128;
  if (n == "simple") return core::NcclProto::kSimple;
  bad_option(option, "unknown protocol '" + name + "'", "auto, ll, ll128 or simple");
}

std::int64_t parse_collective_size(const std::string& text, const std::string& option) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string suffix = lower(text.substr(digits));
  int shift = -1;
  if (suffix.empty() || suffix == "b") shift = 0;
  if (suffix == "k") shift = 10;
  if (suffix == "m") shift = 20;
  if (suffix == "g") shift = 30;
  if (suffix == "t") shift = 40;
  if (digits == 0 || digits > 12 || shift < 0)
    bad_option(option, "'" + text + "' is not a size",
               "bytes with an optional K, M, G or T suffix (powers of 1024), e.g. 1M or 8G");
  const std::int64_t v = std::stoll(text.substr(0, digits));
  if (v > (std::int64_t{1} << 50) >> shift)
    bad_option(option, "'" + text + "' is too large", "at most 1024T");
  return v << shift;
}

int collective_dtype_bytes(const std::string& dtype) {
  for (const DtypeName& d : kDtypes)
    if (dtype == d.name) return d.bytes;
  return 0;
}

CollectiveBenchResult run_collective_bench(const CollectiveBenchRequest& rq) {
  const int elt = collective_dtype_bytes(rq.dtype);
  if (elt == 0)
    bad_option("--dtype", "unknown data type '" + rq.dtype + "'",
               "int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, "
               "fp8_e4m3 or fp8_e5m2");
  if (rq.min_bytes < 0 || rq.max_bytes < rq.min_bytes)
    bad_option("-e", "the largest size is below the smallest (-b)",
               "give -b MIN -e MAX, MIN <= MAX");
  if (rq.factor < 2 && rq.step_bytes <= 0)
    bad_option("-f", "the sizes would not grow", "give -f 2 (or more), or -i BYTES");
  if (rq.factor < 2 && rq.min_bytes == 0 && rq.step_bytes <= 0)
    bad_option("-b", "a size of 0 cannot grow by a factor", "start at -b 8");

  CollectiveBenchResult r;
  std::vector<std::string> overrides = rq.overrides;
  core::ClusterSpec c = core::parse_cluster_file(rq.cluster_path, overrides, &r.warnings);
  if (rq.gpus > 0) {
    // --gpus N: whole nodes (nodes = N / gpus_per_node), or N <= gpus_per_node GPUs of one node.
    for (const std::string& o : rq.overrides)
      if (o.rfind("cluster.nodes=", 0) == 0)
        throw InputError("(command line)", "--gpus, --set cluster.nodes",
                         "both set the number of nodes", "give one of them");
    const int g = c.gpus_per_node;
    if (rq.gpus > g && rq.gpus % g != 0)
      bad_option("--gpus",
                 std::to_string(rq.gpus) + " GPUs is not a whole number of " + std::to_string(g) +
                     "-GPU nodes",
                 "give a multiple of " + std::to_string(g) + ", or at most " + std::to_string(g));
    overrides.push_back("cluster.nodes=" + std::to_string(std::max(1, rq.gpus / g)));
    c = core::parse_cluster_file(rq.cluster_path, overrides, &r.warnings);
  }
  r.cluster = c;
  r.ranks = rq.gpus > 0 ? rq.gpus : c.world_gpus();
  // A forced algorithm passes the gates a scenario's nccl.algo passes
  // (core/scenario/parse_nccl.cpp).
  if (const std::string why = core::parse::nccl_algo_gate(rq.algo, c); !why.empty())
    bad_option("--algo",
               std::string("\"") + core::to_string(rq.algo) + "\" cannot run here: " + why,
               "use auto (NCCL's gates choose), ring or tree");

  const core::Topology topo(c);
  core::CommParams params;  // the simulator's constants, with NCCL_ALGO / NCCL_PROTO forcing
  params.algo = rq.algo;
  params.proto = rq.proto;
  std::vector<int> ranks(static_cast<std::size_t>(r.ranks));
  for (int i = 0; i < r.ranks; ++i) ranks[static_cast<std::size_t>(i)] = i;
  const int root = rooted(rq.kind) ? 0 : -1;
  const std::int64_t align = std::max(1, 16 / elt);  // nccl-tests: per-rank counts of 16 bytes
  for (std::int64_t size = rq.min_bytes; size <= rq.max_bytes;) {
    CollectiveBenchRow row;
    row.count = size / elt;
    std::int64_t elems = row.count;
    if (per_rank_split(rq.kind)) elems = (row.count / r.ranks) / align * align * r.ranks;
    row.size_bytes = elems * elt;
    const core::TransferPlan plan = core::plan_collective(
        topo, params, rq.kind, rq.algo, ranks, root, static_cast<double>(row.size_bytes));
    row.time_ns = plan.predicted_ns;
    row.algo = plan.algo;
    row.proto = plan.proto;
    const double s = static_cast<double>(plan.predicted_ns) * 1e-9;
    // nccl-tests: algbw = size / time; busbw = algbw x factor (doc/PERFORMANCE.md), the factor of
    // core::busbw_factor (docs/cost-model.md, "nccl-tests bandwidth definitions").
    row.algbw_gb_s = s > 0 ? static_cast<double>(row.size_bytes) / s / 1e9 : 0.0;
    row.busbw_gb_s = row.algbw_gb_s * core::busbw_factor(rq.kind, r.ranks);
    r.rows.push_back(row);
    if (size > std::numeric_limits<std::int64_t>::max() / 4) break;
    const std::int64_t next = rq.factor >= 2
                                  ? static_cast<std::int64_t>(static_cast<double>(size) * rq.factor)
                                  : size + rq.step_bytes;
    size = next > size ? next : size + 1;
  }
  return r;
}

void print_collective_bench(const CollectiveBenchRequest& rq, const CollectiveBenchResult& r,
                            std::ostream& out) {
  const core::ClusterSpec& c = r.cluster;
  const char* intra = c.p2p ? core::to_string(c.intra.kind) : "pcie, P2P disabled (host staging)";
  out << "# simrun collective: " << op_name(rq.kind) << " on " << rq.cluster_path << ": " << c.nodes
      << " node" << (c.nodes == 1 ? "" : "s") << " x " << c.gpus_per_node << " " << c.gpu.name
      << " (" << intra;
  if (c.nodes > 1)
    out << "; " << c.nics_per_node << " NICs x " << c.nic_bytes_per_s / 1e9 << " GB/s "
        << core::to_string(c.nic.stack) << ", " << core::nic_latency_ns(c.nic) / 1e3
        << " us per hop, " << core::nic_efficiency(c.nic) << " of line rate";
  out << "), " << r.ranks << " ranks\n";
  out << "# model: plan_collective's predicted time, as the simulator times a lone collective "
         "(docs/collective.md); algo "
      << core::to_string(rq.algo) << ", proto " << core::to_string(rq.proto) << "\n#\n";
  char line[256];
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %s\n", "size",
                "count", "type", "redop", "root", "time", "algbw", "busbw", "algo/proto");
  out << line;
  std::snprintf(line, sizeof line, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s\n", "(B)",
                "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)");
  out << line;
  double busbw_sum = 0;
  for (const CollectiveBenchRow& row : r.rows) {
    const std::string algo =
        row.algo == core::CollectiveAlgo::kAuto
            ? std::string("p2p")
            : std::string(core::to_string(row.algo)) + "/" + core::to_string(row.proto);
    std::snprintf(line, sizeof line, "%12lld  %12lld  %8s  %6s  %6d  %7s  %6s  %6s  %s\n",
                  static_cast<long long>(row.size_bytes), static_cast<long long>(row.count),
                  rq.dtype.c_str(), reduces(rq.kind) ? "sum" : "none", rooted(rq.kind) ? 0 : -1,
                  fit(static_cast<double>(row.time_ns) / 1e3, 7).c_str(),
                  fit(row.algbw_gb_s, 6).c_str(), fit(row.busbw_gb_s, 6).c_str(), algo.c_str());
    out << line;
    busbw_sum += row.busbw_gb_s;
  }
  out << "# Avg bus bandwidth    : "
      << (r.rows.empty() ? 0.0 : busbw_sum / static_cast<double>(r.rows.size())) << "\n";
}

}  // namespace csim::run
