// The rank grid (parallel_plan.hpp; docs/program.md, "Ranks"): rank r at (dp, tp, pp) with
// rank = sum of coord[d] * stride[d], strides growing in strategy.rank_order (Megatron's default
// tp-dp-pp: tensor fastest and inside a node, pipeline outermost).
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

RankGrid::RankGrid(const ParallelSpec& ps) {
  size_[static_cast<int>(ParallelDim::kTp)] = ps.tp;
  size_[static_cast<int>(ParallelDim::kDp)] = ps.dp;
  size_[static_cast<int>(ParallelDim::kPp)] = ps.pp;
  int stride = 1;
  for (ParallelDim d : ps.rank_order) {
    stride_[static_cast<int>(d)] = stride;
    stride *= size_[static_cast<int>(d)];
  }
}

int RankGrid::rank(RankCoord c) const {
  return c.tp * stride_[static_cast<int>(ParallelDim::kTp)] +
         c.dp * stride_[static_cast<int>(ParallelDim::kDp)] +
         c.pp * stride_[static_cast<int>(ParallelDim::kPp)];
}

RankCoord RankGrid::coord(int rank) const {
  RankCoord c;
  c.tp = rank / stride_[static_cast<int>(ParallelDim::kTp)] %
         size_[static_cast<int>(ParallelDim::kTp)];
  c.dp = rank / stride_[static_cast<int>(ParallelDim::kDp)] %
         size_[static_cast<int>(ParallelDim::kDp)];
  c.pp = rank / stride_[static_cast<int>(ParallelDim::kPp)] %
         size_[static_cast<int>(ParallelDim::kPp)];
  return c;
}

std::vector<int> RankGrid::tp_ranks(int dp, int pp) const {
  std::vector<int> out;
  for (int t = 0; t < size_[static_cast<int>(ParallelDim::kTp)]; ++t)
    out.push_back(rank({dp, t, pp}));
  return out;
}

std::vector<int> RankGrid::dp_ranks(int tp, int pp) const {
  std::vector<int> out;
  for (int d = 0; d < size_[static_cast<int>(ParallelDim::kDp)]; ++d)
    out.push_back(rank({d, tp, pp}));
  return out;
}

}  // namespace csim::core
