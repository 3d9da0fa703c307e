// The settings rank 0 proposes and every rank adopts at init (channels, FIFO slots, workers,
// timeouts), and how the waits are then fitted to the host's cores.
#include <algorithm>
#include <map>

#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"
#include "kernels/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/comm_settings.h"
#include "runtime/comm/select.h"
#include "transports/fifo_setup.h"

namespace tutti {
namespace {

// FIFO slots of a communicator whose ranks are each on their own node, unless NCCL_BUFFSIZE or
// TUTTI_NSTEPS says otherwise: over TCP between two namespaces 1 MiB chunks moved 10-30% more than
// 512 KiB ones from 64 MiB up, and 4 slots carried smaller operations' 512 KiB chunks as well as 8
// (perf/RESULTS.md, "1 MiB slots for network-only communicators"; where from 16 to 64 MiB the
// whole slot starts to pay was within the benchmark's spread).
constexpr int kNetworkSlots = 4;
constexpr size_t kNetworkSlotBytes = size_t(1) << 20;
// Busy polls before a wait yields, when a host's ranks outnumber its cores (TUTTI_SPIN unset).
constexpr int kOversubscribedSpin = 20;

}  // namespace

void proposeSettings(const ncclComm* comm, RankInfo* me, const kern::BackendTraits& traits) {
  int maxChannels = tunables::kMaxNchannels.get() > 0 ? int(tunables::kMaxNchannels.get()) : traits.maxChannels;
  int minChannels = int(tunables::kMinNchannels.get());
  if (comm->identity.config.maxCTAs) maxChannels = std::min(maxChannels, *comm->identity.config.maxCTAs);
  if (comm->identity.config.minCTAs) minChannels = std::max(minChannels, *comm->identity.config.minCTAs);
  // NCCL_MIN_NCHANNELS above NCCL_MAX_NCHANNELS: the minimum wins, as the larger request.
  if (minChannels > maxChannels)
    TUTTI_WARN("%s: NCCL_MIN_NCHANNELS (or minCTAs) %d is above NCCL_MAX_NCHANNELS (or maxCTAs) %d: using %d channels",
               comm->where().c_str(), minChannels, maxChannels, std::clamp(minChannels, 1, kMaxChannels));
  me->nchannels = std::clamp(std::max(minChannels, maxChannels), 1, kMaxChannels);
  me->minChannels = std::clamp(minChannels, 1, me->nchannels);
  int64_t nsteps = tunables::kNsteps.get();
  transport::checkFifoSteps(nsteps, "");
  me->nsteps = int32_t(nsteps);
  int64_t buffsize = tunables::kBuffsize.get();
  if (buffsize < int64_t(me->nsteps) * 4096)
    throw Error(ErrorCode::InvalidUsage, "NCCL_BUFFSIZE=" + std::to_string(buffsize) +
                                             " is too small: it needs at least 4096 bytes for each of the " +
                                             std::to_string(me->nsteps) + " FIFO slots (TUTTI_NSTEPS)");
  me->slotBytes = uint64_t(buffsize / me->nsteps) / 4096 * 4096;
  me->buffersSet = tunables::kBuffsize.isSet() || tunables::kNsteps.isSet();
  int threads = int(tunables::kNthreads.get());
  me->nworkers = std::clamp(threads <= 0 ? me->nchannels : std::min(threads, me->nchannels), 1, kMaxWorkers);
}

void adoptSettings(ncclComm* comm) {
  const RankInfo& first = comm->identity.peers[0];
  comm->settings.nchannels = first.nchannels;
  comm->settings.minChannels = first.minChannels;
  comm->settings.nsteps = first.nsteps;
  comm->settings.nworkers = first.nworkers;
  comm->settings.slotBytes = size_t(first.slotBytes);
  if (!first.buffersSet && comm->identity.nranks > 1 && nodeCount(comm) == comm->identity.nranks) {
    // Every rank alone on its node, so every connection crosses the network: larger slots, which
    // operations from 32 MiB use whole (tiling::chunkBytesFor), in the same memory per connection.
    comm->settings.nsteps = kNetworkSlots;
    comm->settings.slotBytes = kNetworkSlotBytes;
  }
  comm->settings.timeoutSeconds = double(tunables::kTimeout.get());
  if (comm->settings.timeoutSeconds <= 0)
    throw Error(ErrorCode::InvalidUsage, "TUTTI_TIMEOUT must be a positive number of seconds");
  comm->settings.spin = int(std::max<int64_t>(1, tunables::kSpin.get()));
  comm->settings.yields = int(std::max<int64_t>(0, tunables::kYield.get()));
  comm->settings.readInPlace = tunables::kReadInPlace.get();
  comm->settings.readInPlaceMinBytes =
      uint32_t(std::clamp<int64_t>(tunables::kReadInPlaceMin.get(), 0, std::numeric_limits<uint32_t>::max()));
}

void fitChannelsToDevice(ncclComm* comm) {
  const uint32_t resident = comm->executor.backend->residentWorkers();
  if (resident == 0) return;
  // The most ranks of this job on one GPU: their blocks must all stay resident (every rank computes
  // the same, its GPUs being of one kind).
  std::map<std::pair<uint64_t, int>, int> sharing;
  int most = 1;
  for (const RankInfo& p : comm->identity.peers) most = std::max(most, ++sharing[{p.hostHash, p.device}]);
  const int fit = std::max(1, int(resident) / most);
  if (comm->settings.nchannels <= fit) return;
  TUTTI_INFO(log::Init,
             "%s: %d channel(s) instead of %d: %d rank(s) share a GPU that holds %u of the executor's blocks at once",
             comm->where().c_str(), fit, comm->settings.nchannels, most, resident);
  comm->settings.nchannels = fit;
  comm->settings.minChannels = std::min(comm->settings.minChannels, fit);
  comm->settings.nworkers = std::min(comm->settings.nworkers, fit);
}

void fitWaitsToHost(ncclComm* comm) {
  // When this host's ranks outnumber its cores, the rank a wait needs is often not running: a
  // long busy poll only delays it. Measured with 4 and 8 ranks on 2 cores, 8-byte all-reduce
  // (perf/RESULTS.md): 20 polls before yielding instead of 200 halves the latency.
  const RankInfo& me = comm->identity.peers[size_t(comm->identity.rank)];
  const int coresHere = comm->planning.selector->fabric().coresPerNode;
  int ranksHere = 0;
  for (const RankInfo& p : comm->identity.peers) ranksHere += p.hostHash == me.hostHash ? 1 : 0;
  if (!tunables::kSpin.isSet() && coresHere > 0 && ranksHere > coresHere)
    comm->settings.spin = std::min(comm->settings.spin, kOversubscribedSpin);
  // Workers waiting for network FIFOs move them themselves (NetProxy::tryProgress) rather than
  // hand each slot to the proxy thread and back, as long as every worker of a launch has a core
  // of this host's to itself (perf/RESULTS.md). Two hosts of one core each: 8 B-32 KiB
  // all-reduces took 145-200 us through the proxy, 53-92 us so; one channel's 256 KiB-4 MiB
  // 1.2-1.8x faster. Each poll is a system call per connection, and where a launch's workers
  // outnumber the cores that polling takes the core the awaited thread needs: two ranks per core,
  // 260 us became 450 us; two channels' workers on one core, 1.3-2x slower.
  if (coresHere > 0) comm->settings.drivingWorkers = coresHere / std::max(1, ranksHere);
  // Where the proxy threads carry the network, a wait sleeps after its busy polls rather than
  // yield first: a yielding waiter stays runnable and shares the core with the proxy thread whose
  // socket just became ready. Two namespaces of two ranks on one core each (perf/RESULTS.md):
  // 128 KiB-1 MiB all-reduces 1.1-1.5x faster, 8 B-32 KiB unchanged. (On one host yielding first
  // is what keeps 4 ranks on 2 cores at 50 us rather than 280 us for 8 bytes.)
  if (!tunables::kYield.isSet() && nodeCount(comm) > 1 && comm->settings.drivingWorkers == 0) comm->settings.yields = 0;
}

}  // namespace tutti
