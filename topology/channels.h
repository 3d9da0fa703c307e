// Rings and trees for channels, built from the global view of every node's graph.
#pragma once

#include <string>
#include <vector>

#include "topology/graph.h"

namespace tutti::topo {

// One channel's ring: every rank once. Each node's ranks are contiguous, so the ring leaves and
// enters each node once; on a node with K network ports, ring c uses port c % K (by <net dev>),
// starting and ending at the GPUs closest to it.
struct Ring {
  std::vector<int> ranks;  // ranks[i] sends to ranks[i + 1], the last to the first
  std::vector<int> nets;   // per node: graph index of the port the ring uses, -1 for none
};

// One channel's tree over all ranks. Across nodes a binary tree of the nodes' head ranks (the
// GPU nearest the channel's port); inside a node the node's other ranks, in the order its chain
// walks them, hang from the head as an in-order binary tree (NCCL hangs a chain there, which
// pays when chunks are pipelined down it; the tree plan sends a tile's chunks down one at a
// time, so a chain's depth would cost latency). Channels alternate between two complementary
// node trees (a node interior in one is a leaf in the other where the node count allows), the
// double binary tree.
struct Tree {
  int root = -1;
  std::vector<int> parent;                 // per rank, -1 at the root
  std::vector<std::vector<int>> children;  // per rank
  std::vector<int> nets;                   // per node, as for rings
  bool mirrored = false;                   // the second of the two node trees
};

struct ChannelLayout {
  int channels = 0;
  std::string reason;  // how the channel count was chosen
  std::vector<Ring> rings;
  std::vector<Tree> trees;
};

// Throws tutti::Error when the bounds are inconsistent or a rank names an unknown node/GPU.
ChannelLayout buildChannels(const GlobalSystem& system, int minChannels, int maxChannels);

// Channel `channel`'s tree (its node heads nearest the channel's port), either of the two node
// trees: the layout holds the one the channel alternates to, the tree all-reduce runs both.
Tree channelTree(const GlobalSystem& system, int channel, bool mirrored);

// The number of channels the bandwidths call for (a NIC per ring across nodes, the NVLink or
// PCI bandwidth within one), clamped to [minChannels, maxChannels].
int chooseChannelCount(const GlobalSystem& system, int minChannels, int maxChannels, std::string* reason = nullptr);

// A node's ranks in the order a ring or tree walks them through port `net` (-1: no port).
std::vector<int> nodeChain(const GlobalSystem& system, int node, int net);

// The in-order binary tree over positions 1..n used for the node trees: the parent position of
// `position`, 0 at the root. Odd positions are leaves.
int binaryTreeParent(int position, int n);
// Node x's parent node in the first (mirrored = false) or second tree; -1 at the root.
int nodeTreeParent(int node, int nodes, bool mirrored);
// Where node x sits among positions 1..nodes of that binary tree, and the node at a position.
int nodeTreePosition(int node, int nodes, bool mirrored);
int nodeAtTreePosition(int position, int nodes, bool mirrored);
// The tree over `chains` (each node's ranks, head first; together a permutation of 0..nranks-1):
// heads joined by nodeTreeParent, the rest of each chain under its head as described at Tree. A
// head receives from its own node's subtree first, then from its child nodes. `nets` is left
// empty. Throws tutti::Error (InvalidArgument) when the chains are not such a permutation.
Tree treeOverChains(const std::vector<std::vector<int>>& chains, int nranks, bool mirrored);

// Path type and bandwidth between two ranks: NET across nodes, the graph's path within one.
Path rankPath(const GlobalSystem& system, int a, int b);

}  // namespace tutti::topo
