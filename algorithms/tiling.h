// The one tiling rule: how an operation is cut into channels, tiles and chunks. The launch, the
// host and device executors and both cost models all cut buffers through these functions, so the
// plan that runs is the plan that was timed. Read by both compilers: no heavy includes.
//
//   * Channels: a buffer of `count` elements (Split, Whole) or each block of it (Blocks) is cut
//     into nchannels ranges of `channelElems` elements (the last ones shorter or empty), each
//     range a multiple of 16 elements so that every channel starts 16-element aligned.
//   * Chunks: a lane moves its range chunk by chunk; a chunk holds at most `chunkElems`
//     elements, cut from the FIFO slot (chunkBytesFor) and, for a plan that joins steps into one
//     message, from what fits one slot with its table (plan::joinedChunkBytes).
//   * Tiles: a Split lane takes `perTile` consecutive chunks per tile (one per rank in a ring),
//     and the chunks of the last tile shrink so that every chunk gets a share; Blocks and Whole
//     lanes take one chunk per tile.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TUTTI_TILING_HD __host__ __device__ inline
#else
#define TUTTI_TILING_HD inline
#endif

namespace tutti::tiling {

// A chunk is cut from a FIFO slot: an operation smaller than kChunksPerOperation chunks of a slot
// takes half slots, halved again as long as it stays smaller and the chunk stays at least
// kMinChunkBytes (so short operations still pipeline; long ones pay one step per slot).
constexpr size_t kChunksPerOperation = 32;
constexpr size_t kMinChunkBytes = 512 * 1024;
// Every channel's range is a multiple of this many elements.
constexpr size_t kChannelAlignElems = 16;

TUTTI_TILING_HD size_t ceilDiv(size_t a, size_t b) { return b == 0 ? 0 : (a + b - 1) / b; }
TUTTI_TILING_HD size_t minSize(size_t a, size_t b) { return a < b ? a : b; }

// The chunk, in bytes, for an operation of `bytes` (the cost model's convention: the whole
// buffer, or all blocks) over FIFO slots of `slotBytes`.
TUTTI_TILING_HD size_t chunkBytesFor(size_t slotBytes, size_t bytes) {
  size_t chunk = slotBytes;
  while (chunk / 2 >= kMinChunkBytes && bytes < chunk * kChunksPerOperation) chunk /= 2;
  return chunk;
}

// Elements of each channel's range of a buffer (or block) of `count` elements.
TUTTI_TILING_HD size_t channelElems(size_t count, int nchannels) {
  size_t per = ceilDiv(count, size_t(nchannels < 1 ? 1 : nchannels));
  return ceilDiv(per, kChannelAlignElems) * kChannelAlignElems;
}

// Channel `channel`'s range [begin, end) of a buffer of `count` elements.
struct Range {
  size_t begin = 0, end = 0;
  TUTTI_TILING_HD size_t size() const { return end > begin ? end - begin : 0; }
};
TUTTI_TILING_HD Range channelRange(size_t count, int nchannels, int channel) {
  size_t per = channelElems(count, nchannels);
  size_t begin = minSize(count, size_t(channel) * per);
  return Range{begin, minSize(count, begin + per)};
}

// The tiles of a lane's range: `count` tiles, every chunk `chunk` elements except those of the
// last tile, which are `lastChunk` elements.
struct Tiles {
  size_t count = 0;
  size_t chunk = 0;
  size_t lastChunk = 0;
  TUTTI_TILING_HD size_t chunkOf(size_t tile) const { return tile + 1 == count ? lastChunk : chunk; }
};

// `perTile` chunks of at most `chunkElems` make one tile of a `range`-element lane.
TUTTI_TILING_HD Tiles tilesOf(size_t range, size_t chunkElems, size_t perTile) {
  Tiles t;
  if (range == 0 || chunkElems == 0 || perTile == 0) return t;
  t.count = ceilDiv(range, chunkElems * perTile);
  t.chunk = minSize(chunkElems, ceilDiv(range, perTile));
  size_t rest = range - (t.count - 1) * chunkElems * perTile;
  t.lastChunk = minSize(chunkElems, ceilDiv(rest, perTile));
  return t;
}

// A Split tile's chunk: tile `tile` of a range [begin, end) with chunks of at most `chunkElems`
// and `perTile` chunks per tile starts at begin + tile * perTile * chunkElems, and its chunks
// share what is left of the range (the same as tilesOf(...).chunkOf(tile)).
TUTTI_TILING_HD size_t splitTileChunk(size_t begin, size_t end, size_t tile, size_t chunkElems, size_t perTile) {
  size_t start = begin + tile * perTile * chunkElems;
  return start >= end ? 0 : minSize(chunkElems, ceilDiv(end - start, perTile));
}

}  // namespace tutti::tiling
