// How the cost model cuts an operation into channels, tiles and chunks, the same way the launch
// does (runtime/launch.cpp, kernels/host_executor.cpp). Shared by the exact and analytic models.
#pragma once

#include <algorithm>
#include <cstddef>

#include "algorithms/plan.h"

namespace tutti::sim {

inline size_t ceilDiv(size_t a, size_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

// The tiles of one lane on one channel: `count` tiles, all with chunks of `chunk` bytes except
// the last, whose chunks are `lastChunk` bytes.
struct Tiles {
  size_t count = 0;
  size_t chunk = 0;
  size_t lastChunk = 0;
  size_t chunkOf(size_t tile) const { return tile + 1 == count ? lastChunk : chunk; }
};

// Whether `bytes` (sim.h's convention) counts nranks blocks.
inline bool countsBlocks(plan::Coll coll) {
  return coll == plan::Coll::AllGather || coll == plan::Coll::ReduceScatter || coll == plan::Coll::AlltoAll ||
         coll == plan::Coll::Gather || coll == plan::Coll::Scatter;
}

// The bytes one channel covers of one buffer of the layout: the whole buffer for Split and
// Whole, one block for Blocks. Every channel is given the largest share (ceil), which the model
// then treats as the channel's range.
inline size_t channelRange(plan::Coll coll, plan::Layout layout, size_t bytes, int nranks, int nchannels) {
  size_t buffer = layout == plan::Layout::Blocks && countsBlocks(coll) ? ceilDiv(bytes, size_t(nranks)) : bytes;
  return ceilDiv(buffer, size_t(std::max(1, nchannels)));
}

// `perTile` chunks of at most `chunkBytes` make one tile of a `range`-byte channel (Split: the
// lane's tileChunks; Blocks and Whole: 1, each block advancing by one chunk per tile).
inline Tiles tilesOf(size_t range, size_t chunkBytes, size_t perTile) {
  Tiles t;
  if (range == 0 || chunkBytes == 0 || perTile == 0) return t;
  t.count = ceilDiv(range, chunkBytes * perTile);
  t.chunk = std::min(chunkBytes, ceilDiv(range, perTile));
  size_t rest = range - (t.count - 1) * chunkBytes * perTile;
  t.lastChunk = std::min(chunkBytes, ceilDiv(rest, perTile));
  return t;
}

}  // namespace tutti::sim
