// Host fabric calibration at init (see calibrate.h).
#include "runtime/comm/calibrate.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "kernels/bell.h"
#include "kernels/host_reduce.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/init_model.h"

namespace tutti {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmupRounds = 8;
constexpr int kTimedRounds = 64;
constexpr double kWaitSeconds = 0.25;  // a rank that does not answer by then is left out
constexpr int kBandwidthRepeats = 4;   // the fastest counts: a thread alone on its core
// Small buffers: on these VMs a fresh page costs ~40x copying it (18 us a page), so the
// figures are cache-resident rates (see sim_fabric.cpp's hostFigures for what follows from it).
constexpr size_t kBandwidthBytes = 64 << 10;
// No worker runs during init, so no bell is in use; the last is the one a worker would get last.
constexpr int kCalibrationBell = kMaxWorkers - 1;
// The network round trips: enough to take the fastest three quarters of; each reply is awaited
// at most kNetWaitSeconds (the pair then reports nothing, and the model keeps its default).
constexpr int kNetWarmupTrips = 8;
constexpr int kNetTimedTrips = 32;
constexpr double kNetWaitSeconds = 2.0;
// The bootstrap tag of the round trips: far above the connection handshakes' tags (connection_setup.cpp).
constexpr uint32_t kNetCalibrationTag = 0x7CA1B000u;

// What one rank contributes (the allgather's slot).
struct Sample {
  double hopUs = 0;  // 0: not the first rank of its host's ring, alone there, or the token stopped
  double copyGBps = 0;
  double reduceGBps = 0;
  int32_t measured = 0;                // TUTTI_CALIBRATE on at this rank
  int32_t inRing = 0;                  // took part in its host's measurements (HostRing)
  uint8_t cpus[CPU_SETSIZE / 8] = {};  // the CPUs this rank may run on, one bit each
};

double microsecondsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// The mean of the fastest three quarters: samples that other processes' work preempted say
// nothing about the algorithms.
double fastMean(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  v.resize(std::max<size_t>(1, v.size() * 3 / 4));
  double sum = 0;
  for (double x : v) sum += x;
  return sum / double(v.size());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Waits as the executor does (busy polls, yields, then sleeps on the bell) until the bell's seq
// moves past `seen`; false when the deadline passes first.
bool waitPast(kern::Bell* bell, uint32_t seen, const ncclComm* comm, Clock::time_point deadline) {
  kern::ExecutionContext polls;
  polls.spin = comm->settings.spin;
  polls.yields = comm->settings.yields;
  for (int idle = 0;; idle++) {
    if (bell->seq.load(std::memory_order_acquire) != seen) return true;
    if (kern::idlePoll(idle, polls)) continue;
    if (Clock::now() > deadline) return false;
    kern::waitBell(bell, seen, 1000 * 1000L);
  }
}

// Laps of a token around the host's ranks: the first rank of the host rings the next rank's
// bell, and each rank, once its own bell rings, rings the next, as a ring collective's steps hand
// off (each waiting for its predecessor; past the cores, for its predecessor to be scheduled).
// The first rank returns the mean of the fastest three quarters of the laps divided by the ranks
// in the ring, in us; the others, and a first rank whose token stopped coming back, return 0.
// `seen` is our bell's seq read before any rank could ring it.
//
// (A ring in which every rank rang its next at once, the earlier form, measured drift, not
// handoffs: once a rank fell behind, its predecessor's rings were already waiting, and at 4 ranks
// on 2 cores it reported 0.05 us, which made the model pick ring at 8-32 KiB where recursive
// doubling and oneshot were 1.6-2x faster.)
double tokenLapHopUs(const ncclComm* comm, int next, int ranksInRing, bool first, uint32_t seen) {
  kern::Bell* mine = &comm->control.own->bells[kCalibrationBell];
  kern::Bell* theirs = &comm->control.ofRank[size_t(next)]->bells[kCalibrationBell];
  auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kWaitSeconds));
  std::vector<double> laps;
  laps.reserve(kTimedRounds);
  for (int i = 0; i < kWarmupRounds + kTimedRounds; i++) {
    Clock::time_point start = Clock::now();
    if (first) kern::ringBell(theirs);
    if (!waitPast(mine, seen, comm, deadline)) return 0;
    seen++;
    if (!first) kern::ringBell(theirs);
    if (first && i >= kWarmupRounds) laps.push_back(microsecondsSince(start));
  }
  if (!first) return 0;
  return fastMean(std::move(laps)) / double(ranksInRing);
}

// The fastest of a few copies and float sums of `bytes` (the buffers touched beforehand: a
// fresh page costs far more than copying it).
void measureBandwidth(size_t bytes, double* copyGBps, double* reduceGBps) {
  size_t n = bytes / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  double copyUs = 1e30, reduceUs = 1e30;
  for (int rep = 0; rep < kBandwidthRepeats; rep++) {
    auto t = Clock::now();
    std::memcpy(c.data(), a.data(), n * sizeof(float));
    asm volatile("" : : "r"(c.data()) : "memory");  // the copy is the point: keep it
    copyUs = std::min(copyUs, microsecondsSince(t));
    t = Clock::now();
    kern::reduceHost(ncclFloat32, kern::RedOp{}, c.data(), a.data(), b.data(), n, 0);
    asm volatile("" : : "r"(c.data()) : "memory");
    reduceUs = std::min(reduceUs, microsecondsSince(t));
  }
  // 1 GB/s moves 1e3 bytes per microsecond
  *copyGBps = double(n * sizeof(float)) / std::max(copyUs, 1e-3) / 1e3;
  *reduceGBps = double(n * sizeof(float)) / std::max(reduceUs, 1e-3) / 1e3;
}

void ownCpus(Sample& s) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) == 0) {
    CPU_ZERO(&set);
    long online = std::clamp(sysconf(_SC_NPROCESSORS_ONLN), 1L, long(CPU_SETSIZE));
    for (long c = 0; c < online; c++) CPU_SET(size_t(c), &set);
  }
  for (size_t c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) s.cpus[c / 8] |= uint8_t(1u << (c % 8));
}

// The host's ranks that measure: enough to load the cores past one rank per core, as a
// collective's steps do, without the lap (and the medians) growing with the ranks. A thousand
// ranks as threads on two cores would otherwise pass the token past the wait below.
constexpr size_t kMaxRingRanks = 16;

// The ring of the first (up to kMaxRingRanks) ranks of this rank's host whose control blocks it
// maps: the next rank (-1 when it is alone there or not in the ring), their number, and whether
// this rank is the ring's first.
struct HostRing {
  int next = -1;
  int size = 1;
  bool first = true;
};
HostRing ringOnHost(const ncclComm* comm) {
  std::vector<int> local;
  for (int r = 0; r < comm->identity.nranks; r++)
    if (comm->identity.peers[size_t(r)].hostHash == comm->identity.peers[size_t(comm->identity.rank)].hostHash &&
        comm->control.ofRank[size_t(r)] != nullptr)
      local.push_back(r);
  HostRing ring;
  if (local.size() > kMaxRingRanks) local.resize(kMaxRingRanks);
  size_t me = size_t(std::find(local.begin(), local.end(), comm->identity.rank) - local.begin());
  if (me == local.size()) {  // not in the ring: measures nothing
    ring.first = false;
    return ring;
  }
  if (local.size() < 2) return ring;
  ring.next = local[(me + 1) % local.size()];
  ring.size = int(local.size());
  ring.first = me == 0;
  return ring;
}

// Round trips of 8 bytes over the bootstrap's connection to `partner` (the lower rank of the
// pair sends first). Returns the one-way time (half the mean of the fastest three quarters of
// the round trips) on the lower rank, 0 on the other and when a reply does not come in time. The
// bootstrap's receiving side has the wake-ups of a network step through the proxy thread: the
// thread polling the socket wakes and hands the message to the thread waiting for it. (Its
// sending side has none: the caller sends; a worker hands its slot to the proxy thread.)
double networkOneWayUs(const ncclComm* comm, int partner) {
  bool first = comm->identity.rank < partner;
  uint64_t token = 0;
  std::vector<double> trips;
  trips.reserve(kNetTimedTrips);
  try {
    for (int i = 0; i < kNetWarmupTrips + kNetTimedTrips; i++) {
      Clock::time_point start = Clock::now();
      if (first) comm->identity.bootstrap->send(partner, kNetCalibrationTag, &token, sizeof token);
      comm->identity.bootstrap->recv(partner, kNetCalibrationTag, &token, sizeof token, kNetWaitSeconds);
      if (!first) comm->identity.bootstrap->send(partner, kNetCalibrationTag, &token, sizeof token);
      if (first && i >= kNetWarmupTrips) trips.push_back(microsecondsSince(start));
    }
  } catch (const Error& e) {
    if (e.code() != ErrorCode::Timeout) throw;
    return 0;
  }
  return first ? fastMean(std::move(trips)) / 2 : 0;
}

// The same reduction on every rank of the same samples: per host the union of its ranks' CPUs
// (the fewest of any host count), the medians of the measured figures.
HostCalibration agree(const std::vector<Sample>& samples, const std::vector<RankInfo>& peers) {
  HostCalibration out;
  std::map<uint64_t, std::vector<uint8_t>> cpusOfHost;
  std::vector<double> hops, copies, reduces;
  out.measured = true;
  for (size_t r = 0; r < samples.size(); r++) {
    const Sample& s = samples[r];
    auto& cpus = cpusOfHost[peers[r].hostHash];
    cpus.resize(sizeof s.cpus, 0);
    for (size_t i = 0; i < sizeof s.cpus; i++) cpus[i] |= s.cpus[i];
    out.measured = out.measured && s.measured != 0;
    if (!s.inRing) continue;
    out.measured = out.measured && s.copyGBps > 0 && s.reduceGBps > 0;
    if (s.hopUs > 0) hops.push_back(s.hopUs);
    copies.push_back(s.copyGBps);
    reduces.push_back(s.reduceGBps);
  }
  out.nodes = int(cpusOfHost.size());
  int cores = 0;
  for (auto& [host, cpus] : cpusOfHost) {
    int count = 0;
    for (uint8_t byte : cpus) count += __builtin_popcount(byte);
    cores = cores == 0 ? count : std::min(cores, count);
  }
  out.host.cores = std::max(1, cores);
  if (!out.measured) return out;
  out.host.hopUs = median(hops);
  out.host.copyGBps = median(copies);
  out.host.reduceGBps = median(reduces);
  return out;
}

}  // namespace

size_t calibrationSampleBytes() { return sizeof(Sample); }

int networkPartner(const std::vector<uint64_t>& hostOfRank, int rank) {
  std::vector<uint64_t> hosts;
  std::map<uint64_t, std::vector<int>> ranksOfHost;
  for (size_t r = 0; r < hostOfRank.size(); r++) {
    if (ranksOfHost[hostOfRank[r]].empty()) hosts.push_back(hostOfRank[r]);
    ranksOfHost[hostOfRank[r]].push_back(int(r));
  }
  const uint64_t mine = hostOfRank[size_t(rank)];
  const size_t other = size_t(std::find(hosts.begin(), hosts.end(), mine) - hosts.begin()) ^ 1;
  if (other >= hosts.size()) return -1;
  const std::vector<int>& here = ranksOfHost[mine];
  const std::vector<int>& there = ranksOfHost[hosts[other]];
  const size_t index = size_t(std::find(here.begin(), here.end(), rank) - here.begin());
  return index < there.size() ? there[index] : -1;
}

HostCalibration calibrateHost(const ncclComm* comm, bool measure) {
  auto start = Clock::now();
  Sample mine;
  ownCpus(mine);
  mine.measured = measure ? 1 : 0;
  // Every rank takes part in the barrier and the allgather, measuring or not, so that a rank
  // whose TUTTI_CALIBRATE differs still follows the same bootstrap sequence.
  const HostRing ring = ringOnHost(comm);
  uint32_t seen = comm->control.own->bells[kCalibrationBell].seq.load(std::memory_order_acquire);
  comm->identity.bootstrap->barrier();  // the host's ranks start together, loading the cores as a collective does
  mine.inRing = ring.next >= 0 || ring.first ? 1 : 0;
  if (measure && mine.inRing) {
    if (ring.next >= 0) mine.hopUs = tokenLapHopUs(comm, ring.next, ring.size, ring.first, seen);
    measureBandwidth(kBandwidthBytes, &mine.copyGBps, &mine.reduceGBps);
  }
  std::vector<Sample> samples(size_t(comm->identity.nranks));
  samples[size_t(comm->identity.rank)] = mine;
  comm->identity.bootstrap->allGather(samples.data(), sizeof(Sample));
  HostCalibration out = agree(samples, comm->identity.peers);
  // The network, once every rank agreed to measure: all cross-host pairs at once, then the
  // median of the pairs' figures, agreed through a second allgather.
  if (out.measured && out.nodes > 1) {
    std::vector<uint64_t> hostOfRank;
    for (const RankInfo& p : comm->identity.peers) hostOfRank.push_back(p.hostHash);
    int partner = networkPartner(hostOfRank, comm->identity.rank);
    std::vector<double> oneWay(size_t(comm->identity.nranks), 0.0);
    if (partner >= 0) oneWay[size_t(comm->identity.rank)] = networkOneWayUs(comm, partner);
    comm->identity.bootstrap->allGather(oneWay.data(), sizeof(double));
    std::vector<double> measured;
    for (double us : oneWay)
      if (us > 0) measured.push_back(us);
    out.networkUs = median(measured);
  }
  out.seconds = microsecondsSince(start) / 1e6;
  return out;
}

}  // namespace tutti
