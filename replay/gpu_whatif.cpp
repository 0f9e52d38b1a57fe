#include "replay/gpu_whatif.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include "core/cost/gemm_shape_cost.hpp"

namespace csim::replay {

double class_ratio(const GpuOpInfo& k, const core::GpuSpec& from, const core::GpuSpec& to,
                   std::string* rule) {
  std::ostringstream os;
  os << std::setprecision(3);
  double r = 1.0;
  switch (k.cls) {
    case KernelClass::kGemm: {
      const core::Dtype d = k.tf32          ? core::Dtype::kTf32
                            : k.tensor_core ? core::Dtype::kBf16
                                            : core::Dtype::kFp32;
      if (!k.shape.empty()) {
        // The cost model's time of this shape on both GPUs (docs/cost-model.md, "GEMM shape"):
        // the ratio holds the efficiency each reaches at this size, not only the peaks.
        const TimeNs ta = core::gemm_duration_ns(from, d, k.shape, core::GemmPass::kForward);
        const TimeNs tb = core::gemm_duration_ns(to, d, k.shape, core::GemmPass::kForward);
        if (ta > 0 && tb > 0) {
          r = static_cast<double>(tb) / static_cast<double>(ta);
          os << "x" << r << " (" << k.shape.batch << "x" << k.shape.m << "x" << k.shape.n << "x"
             << k.shape.k << " " << core::to_string(d) << ": model " << ta / 1000.0 << " -> "
             << tb / 1000.0 << " us)";
          break;
        }
      }
      const double a = from.peak_flops_per_s(d), b = to.peak_flops_per_s(d);
      r = a > 0 && b > 0 ? a / b : 1.0;
      os << "x" << r << " (" << core::to_string(d) << " peak " << a / 1e12 << " -> " << b / 1e12
         << " TFLOP/s)";
      break;
    }
    case KernelClass::kMemoryBound: {
      const double a = from.mem_bw_bytes_per_s, b = to.mem_bw_bytes_per_s;
      r = a > 0 && b > 0 ? a / b : 1.0;
      os << "x" << r << " (HBM " << a / 1e9 << " -> " << b / 1e9 << " GB/s)";
      break;
    }
    case KernelClass::kLaunchBound:
      os << "unchanged (<= " << kLaunchBoundNs / 1000 << " us: launch-bound)";
      break;
    case KernelClass::kCollective:
      os << "unchanged (collective: measured duration kept)";
      break;
    case KernelClass::kHostCopy:
      os << "unchanged (host copy: PCIe)";
      break;
  }
  *rule = os.str();
  return r;
}

std::vector<ExplainRow> apply_gpu_whatif(ReplayProgram& rp, const core::GpuSpec& from,
                                         const core::GpuSpec& to) {
  std::vector<ExplainRow> rows;
  std::map<std::pair<std::string, int>, std::size_t> row_of;
  for (const GpuOpInfo& k : rp.gpu_ops) {
    core::Op& op = rp.program.ops[static_cast<std::size_t>(k.op)];
    std::string rule;
    const double r = class_ratio(k, from, to, &rule);
    const auto scaled = static_cast<TimeNs>(std::llround(static_cast<double>(k.measured_ns) * r));
    op.fixed_ns = std::max(scaled, std::min(k.measured_ns, kLaunchBoundNs));
    std::string name = rp.program.name_of(op);
    auto [it, fresh] = row_of.emplace(std::make_pair(name, static_cast<int>(k.cls)), rows.size());
    if (fresh) rows.push_back({std::move(name), k.cls, rule, 0, 0, 0});
    ExplainRow& row = rows[it->second];
    ++row.count;
    row.measured_ns += k.measured_ns;
    row.replayed_ns += op.fixed_ns;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ExplainRow& a, const ExplainRow& b) {
    return a.measured_ns > b.measured_ns;
  });
  return rows;
}

void print_explain(const std::vector<ExplainRow>& rows, std::ostream& out, std::size_t limit) {
  // Totals per class over every row, in the classes' order.
  constexpr int kClasses = 5;
  TimeNs before[kClasses] = {}, after[kClasses] = {};
  for (const ExplainRow& r : rows) {
    before[static_cast<int>(r.cls)] += r.measured_ns;
    after[static_cast<int>(r.cls)] += r.replayed_ns;
  }
  out << "GPU time by class (measured -> what-if ms):";
  for (int c = 0; c < kClasses; ++c) {
    if (before[c] == 0) continue;
    out << "  " << to_string(static_cast<KernelClass>(c)) << " " << std::fixed
        << std::setprecision(3) << static_cast<double>(before[c]) / 1e6 << " -> "
        << static_cast<double>(after[c]) / 1e6 << std::defaultfloat;
  }
  out << "\n";
  out << "kernels by measured time (class, rule, count, measured -> what-if ms):\n";
  for (std::size_t i = 0; i < rows.size() && i < limit; ++i) {
    const ExplainRow& r = rows[i];
    std::string n = r.name.size() > 70 ? r.name.substr(0, 67) + "..." : r.name;
    out << "  " << std::left << std::setw(13) << to_string(r.cls) << std::right << std::setw(7)
        << r.count << "  " << std::fixed << std::setprecision(3) << std::setw(9)
        << static_cast<double>(r.measured_ns) / 1e6 << " -> " << std::setw(9)
        << static_cast<double>(r.replayed_ns) / 1e6 << std::defaultfloat << "  " << r.rule << "  "
        << n << "\n";
  }
  if (rows.size() > limit) out << "  ... " << rows.size() - limit << " more kernel names\n";
}

}  // namespace csim::replay
