// Init as a model: the bootstrap exchanges initCommunicator runs, in order, with what each costs
// one rank (rounds, bytes) and the root, for any number of ranks and nodes. It follows the code
// (comm_init.cpp, control_block.cpp, topo_init.cpp, calibrate.cpp, connection_setup.cpp) and
// takes its sizes from the structures that travel, so `tutti-sim --init` can say what 100,000
// ranks would send without running them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tutti {

struct InitShape {
  int64_t nranks = 1;
  int64_t nodes = 1;
  int channels = 2;             // ring connections per rank: two per channel
  size_t topologyBytes = 4096;  // one node's serialised graph
  int rootsCount = 1;           // unique ids (ncclCommInitRankScalable): ranks split in blocks
};

struct InitExchange {
  std::string name;
  std::string kind;      // "join", "allGather", "allGatherV", "barrier", "handshakes", "round trips"
  int64_t rounds = 0;    // sequential message steps of one rank
  double bytesIn = 0;    // received by one rank (the most any rank receives)
  double bytesOut = 0;   // sent by one rank
  double rootBytes = 0;  // sent and received by one root (join only)
};

// The exchanges of one init, in order.
std::vector<InitExchange> modelInit(const InitShape& shape);

// What a rank shows the others of its network identity when the job spans nodes (comm_init.cpp).
constexpr size_t kNetIdentityBytes = 96;

// The size of one rank's calibration sample (calibrate.cpp), for the model.
size_t calibrationSampleBytes();

}  // namespace tutti
