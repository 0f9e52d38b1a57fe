// The rank grid (parallel_plan.hpp; docs/program.md, "Ranks"): rank r at coordinates c with
// rank = sum of c[d] * stride[d], strides growing in strategy.rank_order (Megatron's default
// tp-cp-ep-dp-pp: tensor fastest and inside a node, pipeline outermost).
#include <algorithm>

#include "core/error.hpp"
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

void RankGrid::set_strides(const std::vector<ParallelDim>& order) {
  int stride = 1;
  for (ParallelDim d : order) {
    stride_[d] = stride;
    stride *= size_[d];
  }
  world_ = stride;
  // A dimension the order leaves out must have size 1 (the parser checks it): it adds nothing.
  for (int i = 0; i < kNumParallelDims; ++i)
    CSIM_ASSERT(size_.v[static_cast<std::size_t>(i)] == 1 ||
                std::find(order.begin(), order.end(), static_cast<ParallelDim>(i)) != order.end());
}

RankGrid::RankGrid(const ParallelSpec& ps) {
  size_[ParallelDim::kTp] = ps.tp;
  size_[ParallelDim::kCp] = ps.cp;
  size_[ParallelDim::kDp] = ps.dp;
  size_[ParallelDim::kPp] = ps.pp;
  set_strides(ps.rank_order);
}

RankGrid RankGrid::expert(const ParallelSpec& ps) {
  RankGrid g;
  g.size_[ParallelDim::kEtp] = ps.etp;
  g.size_[ParallelDim::kEp] = ps.ep;
  g.size_[ParallelDim::kEdp] = ps.size(ParallelDim::kEdp);
  g.size_[ParallelDim::kPp] = ps.pp;
  std::vector<ParallelDim> order;
  for (ParallelDim d : ps.rank_order) {
    if (d == ParallelDim::kTp) order.push_back(ParallelDim::kEtp);
    if (d == ParallelDim::kDp) order.push_back(ParallelDim::kEdp);
    if (d == ParallelDim::kEp || d == ParallelDim::kPp) order.push_back(d);
  }
  g.set_strides(order);
  return g;
}

int RankGrid::rank(const RankCoord& c) const {
  int r = 0;
  for (std::size_t i = 0; i < c.v.size(); ++i) r += c.v[i] * stride_.v[i];
  return r;
}

RankCoord RankGrid::coord(int rank) const {
  RankCoord c;
  for (std::size_t i = 0; i < c.v.size(); ++i)
    c.v[i] = stride_.v[i] > 0 ? rank / stride_.v[i] % size_.v[i] : 0;
  return c;
}

std::vector<int> RankGrid::group(int rank, std::initializer_list<ParallelDim> dims) const {
  // Mixed-radix count over the listed dimensions, the one with the smallest stride fastest.
  std::vector<ParallelDim> ds(dims);
  std::sort(ds.begin(), ds.end(),
            [&](ParallelDim a, ParallelDim b) { return stride_[a] < stride_[b]; });
  RankCoord c = coord(rank);
  int n = 1;
  for (ParallelDim d : ds) {
    c[d] = 0;
    n *= size_[d];
  }
  const int base = this->rank(c);
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    int r = base, rest = k;
    for (ParallelDim d : ds) {
      r += rest % size_[d] * stride_[d];
      rest /= size_[d];
    }
    out.push_back(r);
  }
  return out;
}

void RankGrid::for_each_group(
    std::initializer_list<ParallelDim> dims,
    const std::function<void(const std::vector<int>&, const RankCoord&)>& f) const {
  std::vector<ParallelDim> others;
  for (int i = 0; i < kNumParallelDims; ++i) {
    const auto d = static_cast<ParallelDim>(i);
    if (std::find(dims.begin(), dims.end(), d) == dims.end() && size_[d] > 1) others.push_back(d);
  }
  int n = 1;
  for (ParallelDim d : others) n *= size_[d];
  for (int k = 0; k < n; ++k) {
    RankCoord c;
    int rest = k;
    for (auto it = others.rbegin(); it != others.rend(); ++it) {  // the last dimension fastest
      c[*it] = rest % size_[*it];
      rest /= size_[*it];
    }
    f(group(rank(c), dims), c);
  }
}

}  // namespace csim::core
