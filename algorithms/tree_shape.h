// The shape of one tree of the tree all-reduce, given rather than derived: every rank's parent
// and children. The runtime takes it from the topology's node trees (topology/channels.h) when a
// communicator spans several nodes; tree.cpp checks it and builds the plan along it.
#pragma once

#include <vector>

namespace tutti::plan {

struct TreeShape {
  std::vector<int> parent;                 // per rank, -1 at the root
  std::vector<std::vector<int>> children;  // per rank, in the order it receives from them

  bool operator==(const TreeShape& other) const { return parent == other.parent && children == other.children; }
};

}  // namespace tutti::plan
