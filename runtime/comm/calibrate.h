// Measuring the host fabric at init: the handoff between the ranks of a host through their
// executor bells (a token's laps around them, each rank waiting for its predecessor as in a
// ring collective), one thread's copy and reduce bandwidth, the cores each host's ranks can run
// on, and, across hosts, the one-way time of a small message (round trips between pairs of
// ranks on different hosts, all pairs at once). Every rank contributes what it
// measured; the bootstrap allgather hands everyone the same samples, and the same reduction of
// them gives every rank the same figures (and so the same algorithm choices, without which
// collectives deadlock).
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/sim.h"

struct ncclComm;

namespace tutti {

struct HostCalibration {
  bool measured = false;       // every rank measured (TUTTI_CALIBRATE on everywhere)
  sim::HostMeasurements host;  // the figures agreed on; cores are counted even when not measured
  int nodes = 1;               // hosts of the communicator
  double networkUs = 0;        // one way between hosts (median of the pairs); 0: not measured
  double seconds = 0;          // this rank's time in calibrateHost
};

// Collective over the communicator's ranks: every rank calls it at the same point of init, after
// the control blocks are mapped and before any worker runs. `measure` is this rank's
// TUTTI_CALIBRATE. Bounded: a few milliseconds of measuring; a wait for the previous rank gives up
// after a quarter of a second (that rank's handoff then counts as missing), a wait for a network
// reply after two seconds (that pair's figure then counts as missing). Throws tutti::Error from
// the bootstrap.
HostCalibration calibrateHost(const ncclComm* comm, bool measure);

// The rank on another host that `rank` times the network with (hostOfRank: each rank's host):
// hosts numbered by their first rank, host 2k paired with host 2k+1 (the last of an odd number
// sits out), and in a pair the i-th rank of one host with the i-th of the other. Every pair runs
// at once, as a collective's network steps do, so the figure includes the cores a host's ranks
// share. -1: none.
int networkPartner(const std::vector<uint64_t>& hostOfRank, int rank);

}  // namespace tutti
