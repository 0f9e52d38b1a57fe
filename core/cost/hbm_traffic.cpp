// docs/cost-model.md, "Resource sharing" (HBM traffic of NCCL kernels).
#include "core/cost/hbm_traffic.hpp"

#include <algorithm>

#include "core/cost/collective_cost.hpp"

namespace csim::core {

double nccl_hbm_bytes(CollectiveKind kind, CollectiveAlgo algo, int p, double bytes) {
  // NVLS: each GPU reads its buffer into the switch and writes the result (2 S). NVLSTree: the
  // same inside the node; its trees' S/g share across nodes is not counted.
  if (algo == CollectiveAlgo::kNvls || algo == CollectiveAlgo::kNvlsTree) return 2 * bytes;
  // Accesses per received byte: the sender's store into this GPU's buffer (1), the local kernel's
  // read of it (1), a reduction's read of the local operand (1), the write of the result or of
  // the copy into the output buffer (1). A send/recv pair splits the store, read and write of each
  // byte (and the sender's read) between its two GPUs: 2 each.
  double h = 3;
  switch (kind) {
    case CollectiveKind::kAllReduce:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kReduce:
      h = 4;
      break;
    case CollectiveKind::kSendRecv:
      h = 2;
      break;
    default:
      break;
  }
  return h * busbw_factor(kind, p) * bytes;
}

// Water-filling by increasing ask: an ask within the fair share of what is left is served in full;
// at the first that is not, it and every later one (the newcomer last) get that share.
double hbm_level(double capacity, std::span<double> asks) {
  std::sort(asks.begin(), asks.end());
  double left = capacity;
  std::size_t unserved = asks.size() + 1;
  for (const double a : asks) {
    const double share = left / static_cast<double>(unserved);
    if (a > share) return share;
    left -= a;
    --unserved;
  }
  return left;
}

}  // namespace csim::core
