// Measuring the host fabric at init: the handoff between the ranks of a host through their
// executor bells (a token's laps around them, each rank waiting for its predecessor as in a
// ring collective), one thread's copy and reduce
// bandwidth, and the cores each host's ranks can run on. Every rank contributes what it
// measured; the bootstrap allgather hands everyone the same samples, and the same reduction of
// them gives every rank the same figures (and so the same algorithm choices, without which
// collectives deadlock).
#pragma once

#include "algorithms/sim.h"

struct ncclComm;

namespace tutti {

struct HostCalibration {
  bool measured = false;       // every rank measured (TUTTI_CALIBRATE on everywhere)
  sim::HostMeasurements host;  // the figures agreed on; cores are counted even when not measured
  double seconds = 0;          // this rank's time in calibrateHost
};

// Collective over the communicator's ranks: every rank calls it at the same point of init, after
// the control blocks are mapped and before any worker runs. `measure` is this rank's
// TUTTI_CALIBRATE. Bounded: a few milliseconds of measuring; a wait for the previous rank gives up
// after a quarter of a second (that rank's handoff then counts as missing). Throws tutti::Error from
// the bootstrap.
HostCalibration calibrateHost(const ncclComm* comm, bool measure);

}  // namespace tutti
