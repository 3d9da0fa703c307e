// The order in which a ring visits the ranks: a permutation, the same on every rank, that the
// ring plans walk instead of rank order so that a ring crosses between nodes as few times as
// the topology allows (topology/channels.h builds it).
#pragma once

#include <string>
#include <vector>

#include "base/error.h"

namespace tutti::plan {

class RingOrder {
 public:
  // `ranks[i]` sends to `ranks[i + 1]`, the last to the first; empty: rank order. Throws
  // tutti::Error (InvalidArgument) unless `ranks` is empty or a permutation of 0..nranks-1.
  RingOrder(int nranks, const std::vector<int>& ranks) : ranks_(ranks), position_(size_t(nranks), -1) {
    if (ranks_.empty())
      for (int r = 0; r < nranks; r++) ranks_.push_back(r);
    if (int(ranks_.size()) != nranks) fail("it has " + std::to_string(ranks_.size()) + " ranks");
    for (int i = 0; i < nranks; i++) {
      int r = ranks_[size_t(i)];
      if (r < 0 || r >= nranks || position_[size_t(r)] >= 0)
        fail("rank " + std::to_string(r) + " is out of range or repeated");
      position_[size_t(r)] = i;
    }
  }

  int size() const { return int(ranks_.size()); }
  int rankAt(int position) const { return ranks_[size_t(((position % size()) + size()) % size())]; }
  int positionOf(int rank) const { return position_.at(size_t(rank)); }
  // The rank `steps` places after `rank` along the ring (before it when negative).
  int step(int rank, int steps) const { return rankAt(positionOf(rank) + steps); }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(ErrorCode::InvalidArgument,
                "ring order over " + std::to_string(position_.size()) + " ranks is not a permutation: " + why);
  }

  std::vector<int> ranks_;
  std::vector<int> position_;
};

}  // namespace tutti::plan
