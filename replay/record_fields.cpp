#include "replay/record_fields.hpp"

#include <algorithm>
#include <cctype>

namespace csim::replay {

void Coverage::finish() {
  std::sort(raw_.begin(), raw_.end());
  for (const auto& [b, e] : raw_) {
    if (!iv_.empty() && b <= iv_.back().second) {
      iv_.back().second = std::max(iv_.back().second, e);
    } else {
      iv_.push_back({b, e});
    }
  }
  prefix_.assign(iv_.size() + 1, 0);
  for (std::size_t i = 0; i < iv_.size(); ++i)
    prefix_[i + 1] = prefix_[i] + (iv_[i].second - iv_[i].first);
}

TimeNs Coverage::upto(TimeNs t) const {
  auto it = std::upper_bound(iv_.begin(), iv_.end(), std::make_pair(t, TimeNs{0}),
                             [](const auto& x, const auto& y) { return x.first < y.first; });
  const std::size_t i = static_cast<std::size_t>(it - iv_.begin());
  if (i == 0) return 0;
  const auto& last = iv_[i - 1];
  return prefix_[i - 1] + std::min(t, last.second) - last.first;
}

namespace {
bool has(const std::string& s, const char* w) {
  return s.find(w) != std::string::npos;
}
}  // namespace

Bytes dtype_bytes(const std::string& d) {
  if (d == "Double" || d == "Long" || d == "ComplexFloat") return 8;
  if (d == "Half" || d == "BFloat16" || d == "Short") return 2;
  if (d == "Byte" || d == "Char" || d == "Bool" || d.rfind("Float8", 0) == 0) return 1;
  return 4;  // Float, Int and unknown
}

core::Dtype dtype_of(const std::string& d) {
  if (d == "BFloat16") return core::Dtype::kBf16;
  if (d == "Half") return core::Dtype::kFp16;
  return core::Dtype::kFp32;
}

// The collective a record_param_comms names, or else the NCCL kernel's name.
core::CollectiveKind collective_kind(const std::string& coll, const std::string& kernel) {
  const std::string& s = coll.empty() ? kernel : coll;
  std::string n;
  for (char c : s) n += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (has(n, "reduce_scatter") || has(n, "reducescatter"))
    return core::CollectiveKind::kReduceScatter;
  if (has(n, "allgather") || has(n, "all_gather")) return core::CollectiveKind::kAllGather;
  if (has(n, "alltoall") || has(n, "all_to_all")) return core::CollectiveKind::kAllToAll;
  if (has(n, "broadcast")) return core::CollectiveKind::kBroadcast;
  if (has(n, "sendrecv") || has(n, "send") || has(n, "recv"))
    return core::CollectiveKind::kSendRecv;
  if (has(n, "allreduce") || has(n, "all_reduce")) return core::CollectiveKind::kAllReduce;
  if (has(n, "reduce")) return core::CollectiveKind::kReduce;
  return core::CollectiveKind::kAllReduce;
}

core::CopyKind copy_kind(const std::string& name) {
  if (has(name, "HtoD"))
    return has(name, "Pinned") ? core::CopyKind::kH2DPinned : core::CopyKind::kH2DPageable;
  if (has(name, "DtoH")) return core::CopyKind::kD2H;
  return core::CopyKind::kD2D;  // DtoD, PtoP (the peer is not in the trace)
}

}  // namespace csim::replay
