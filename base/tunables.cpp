// The catalogue of tunables, one definition each. The order of definition is the order of
// registration, and so of tutti-info --env and of docs/environment.md, which that generates: NCCL's
// names first, then ours.
#include "base/tunables.h"

namespace tutti::tunables {

using params::Bool;
using params::Int;
using params::Size;
using params::String;

const String kDebug{"NCCL_DEBUG", "", "log level: VERSION, WARN, INFO, ABORT or TRACE (unset: no output)"};
const String kDebugSubsys{"NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP,ENV",
                          "subsystems logged at INFO/TRACE: comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, "
                          "ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS or ALL; ^ excludes"};
const String kDebugFile{"NCCL_DEBUG_FILE", "",
                        "write the log to this file instead of stdout; %h expands to the host name, %p to the pid"};
const String kCommId{"NCCL_COMM_ID", "",
                     "host:port of a fixed bootstrap root, instead of the one ncclGetUniqueId opens"};
const String kSocketIfname{"NCCL_SOCKET_IFNAME", "",
                           "network interfaces to use: prefix list, ^ excludes, = matches exactly (unset: automatic)"};
const String kSocketFamily{"NCCL_SOCKET_FAMILY", "", "address family of sockets: AF_INET or AF_INET6 (unset: either)"};
const String kNet{
    "NCCL_NET", "",
    "network backend by name: a loaded plugin's name or Socket (unset: the first that works, plugins first)"};
const String kNetPlugin{
    "NCCL_NET_PLUGIN", "",
    "external net plugins: a name (libnccl-net-<name>.so), a library file or path, a comma list, or none "
    "(unset: libnccl-net.so when present); interface versions v6 to v11"};
const Int kSocketNthreads{"NCCL_SOCKET_NTHREADS", 1,
                          "Socket backend: helper threads per connection, each driving NCCL_NSOCKS_PERTHREAD sockets "
                          "(1: the proxy thread drives them; sockets at most 64)"};
const Int kNsocksPerthread{"NCCL_NSOCKS_PERTHREAD", 1,
                           "Socket backend: sockets per group; a message is striped over all sockets of a connection"};
const Bool kIbDisable{"NCCL_IB_DISABLE", false, "IB backend: off (the Socket backend then carries inter-host traffic)"};
const String kIbHca{"NCCL_IB_HCA", "",
                    "IB backend: devices and ports to use, e.g. 'mlx5_0:1,mlx5_1'; ^ excludes, = matches names exactly "
                    "(otherwise by prefix)"};
const Int kIbGidIndex{"NCCL_IB_GID_INDEX", -1,
                      "IB backend on RoCE: the GID index (-1: the first GID that is not link-local, else 0)"};
const Int kIbTimeout{"NCCL_IB_TIMEOUT", 20, "IB backend: QP ack timeout exponent (4.096 us x 2^value), 1 to 31"};
const Int kIbRetryCnt{"NCCL_IB_RETRY_CNT", 7, "IB backend: QP transport retries before an error completion, 0 to 7"};
const Int kIbSl{"NCCL_IB_SL", 0, "IB backend: service level of the QPs, 0 to 15"};
const Int kIbTc{"NCCL_IB_TC", 0, "IB backend on RoCE: traffic class of the QPs' GRH, 0 to 255"};
const Int kIbQpsPerConnection{"NCCL_IB_QPS_PER_CONNECTION", 1,
                              "IB backend: RC QPs per connection, 1 to 128; data goes over all of them (see "
                              "NCCL_IB_SPLIT_DATA_ON_QPS)"};
const Bool kIbSplitDataOnQps{"NCCL_IB_SPLIT_DATA_ON_QPS", false,
                             "IB backend with several QPs: 1 splits every message evenly over all QPs, 0 sends "
                             "consecutive messages round-robin over the QPs"};
const Int kIbPciRelaxedOrdering{"NCCL_IB_PCI_RELAXED_ORDERING", 2,
                                "IB backend: PCI relaxed ordering of memory registrations: 0 off, 1 required (an "
                                "error where unsupported), 2 used where supported"};
const Int kIbAdaptiveRouting{
    "NCCL_IB_ADAPTIVE_ROUTING", -1,
    "IB backend: 1 sends data above NCCL_IB_AR_THRESHOLD by plain RDMA write followed by a "
    "separate completion write, 0 in one write with immediate (-1: on for InfiniBand, off for RoCE)"};
const Size kIbArThreshold{
    "NCCL_IB_AR_THRESHOLD", 8192,
    "IB backend with adaptive routing: messages larger than this go as data write plus completion write"};
const String kAlgo{"NCCL_ALGO", "",
                   "algorithms the selector may use: a list (ring, tree, pat, ... or a custom plan file's "
                   "names), ^ to exclude, per collective as 'allreduce:tree,ring;broadcast:ring' (case-insensitive)"};
const String kProto{
    "NCCL_PROTO", "",
    "protocols: Simple carries everything; LL the small messages of device executors (emulated, cuda) where "
    "allowed; LL128 is not implemented; ^ excludes (Simple cannot be)"};
const String kTopoFile{"NCCL_TOPO_FILE", "",
                       "an NCCL topology XML file describing this node, used instead of discovery"};
const String kTopoDumpFile{"NCCL_TOPO_DUMP_FILE", "",
                           "write this node's topology (as discovered or loaded) to this file, in NCCL's XML format"};
const Size kBuffsize{
    "NCCL_BUFFSIZE", 4 << 20,
    "bytes of FIFO per connection (K, M, G suffixes accepted); unset with TUTTI_NSTEPS, a communicator "
    "whose ranks are each alone on their node uses 4 slots of 1 MiB"};
const Int kMinNchannels{"NCCL_MIN_NCHANNELS", 1, "fewest channels a communicator uses"};
const Int kMaxNchannels{
    "NCCL_MAX_NCHANNELS", 0,
    "most channels a communicator uses; unset (0): 2 in host mode and on the emulated device, 16 on a GPU, "
    "fewer where ranks sharing one GPU would not all stay resident"};
const Bool kShmDisable{"NCCL_SHM_DISABLE", false,
                       "1: no shared-memory connections between processes of a node (use the network)"};
const Bool kP2pDisable{"NCCL_P2P_DISABLE", false,
                       "1: no peer-to-peer connections: none in-process between rank threads, none through CUDA IPC "
                       "between processes (use shared memory or network)"};
const String kP2pLevel{"NCCL_P2P_LEVEL", "",
                       "the farthest two GPUs of a node may be for peer-to-peer connections (p2p between processes, "
                       "local between rank threads): LOC (never), NVL, NVB, PIX, PXB, PHB or SYS, or NCCL's legacy "
                       "0 LOC, 1 PIX, 2 PXB, 3 PHB, 4+ SYS; unset: PXB (SYS on AMD x86 hosts with at most 2 GPUs)"};
const Int kP2pReadEnable{
    "NCCL_P2P_READ_ENABLE", -2,
    "p2p read mode (the Simple slots in the sender's memory, read by the receiver): 1 asks for it, "
    "0 refuses it (the sender writes into the receiver's FIFO), -2 chooses as NCCL does (NVLink "
    "between compute capability 8.0 GPUs)"};
const Bool kP2pUseCudaMemcpy{"NCCL_P2P_USE_CUDA_MEMCPY", false,
                             "1: p2p messages between GPUs cross by the copy engine (a proxy thread's cuMemcpyAsync "
                             "from the sender's staging FIFO) instead of the executor's stores"};
const Bool kCommBlocking{"NCCL_COMM_BLOCKING", true, "default of ncclConfig_t.blocking"};
const String kHostid{"NCCL_HOSTID", "", "overrides the host identity that decides which ranks share a node"};

const String kNetGdrLevel{
    "NCCL_NET_GDR_LEVEL", "PXB",
    "GPUDirect RDMA: the farthest GPU-NIC path (LOC, PIX, PXB, PHB, SYS, or NCCL's 0 to 5) at which "
    "network FIFOs are device memory the NIC registers by dmabuf; an unknown path counts as SYS"};
const Bool kNetGdrRead{"NCCL_NET_GDR_READ", false,
                       "GPUDirect RDMA: the sending side's network FIFOs in device memory too (the NIC reads the GPU)"};
const Bool kGdrFlushDisable{
    "NCCL_GDR_FLUSH_DISABLE", false,
    "GPUDirect RDMA: skip the flush (an RDMA read from the received buffer) after a receive into "
    "device memory"};

const String kDevice{"TUTTI_DEVICE", "auto",
                     "device backend: auto (cuda when a device is usable, else host), host, cuda, or emulated "
                     "(emulated: the cuda backend over this library's emulated CUDA driver, which runs the kernels' "
                     "device code on host threads), or the name of a backend a program registered (the registry, "
                     "kernels/backend.h, refuses a name it does not know)"};
const String kCudaLibrary{"TUTTI_CUDA_LIBRARY", "libcuda.so.1",
                          "cuda backend: the CUDA driver library to load (a file name the loader searches for, or a "
                          "path): NVIDIA's libcuda.so.1, or a stand-in such as the emulated driver the build makes "
                          "(emulated-cuda/libcuda.so.1)"};
const Int kEmulatedThreads{"TUTTI_EMULATED_THREADS", 4,
                           "emulated CUDA driver: host threads per emulated thread block (1 to 64)"};
const String kEmulatedMemory{
    "TUTTI_EMULATED_MEMORY",
    "host",
    "emulated device backend: host (its devices are integrated with the host: their memory is the "
    "host's) or device (counted as a GPU's: "
    "FIFOs set up through copies, shared-memory and network FIFOs mapped for it, as on a GPU)",
    {"host", "device"}};
const String kEmulatedIpc{
    "TUTTI_EMULATED_IPC",
    "descriptor",
    "emulated device with device memory: how a p2p FIFO travels to the peer process, as a "
    "descriptor (CUDA virtual memory's POSIX handle) or as handle bytes (CUDA's legacy IPC handle)",
    {"descriptor", "handle"}};
const String kEmulatedLacks{"TUTTI_EMULATED_LACKS", "",
                            "emulated CUDA driver: capabilities its devices lack, comma-separated: vmm (virtual memory "
                            "management), posix-fd (exporting memory as a POSIX descriptor), dmabuf, gdr (GPUDirect "
                            "RDMA), pageable (reaching pageable host memory, as GPUs with HMM or ATS do), so that the "
                            "fallbacks a GPU without them takes run in tests; unset: it has them all"};
const String kEmulatedBusIds{
    "TUTTI_EMULATED_BUS_IDS", "",
    "emulated device backend: the PCI bus ids of emulated devices 0, 1, ... (comma-separated), "
    "each to be found as a GPU in the node's topology (NCCL_TOPO_FILE), so that the GPUs' "
    "distance decides p2p and rings as on a GPU host; unset: the devices have none"};
const String kEmulatedNoPeerAccess{
    "TUTTI_EMULATED_NO_PEER_ACCESS", "",
    "emulated device backend: pairs of emulated devices that cannot access each other's "
    "memory, as CUDA peer access would say (\"0:1,2:3\"): rank threads of one process on "
    "such a pair connect through host memory, and the executor refuses the other device's "
    "memory as a GPU would fault on it; unset: every pair has peer access"};
const Int kEmulatedDevice{"TUTTI_EMULATED_DEVICE", 0,
                          "emulated device backend: the device a rank takes where the call names none (what "
                          "cudaGetDevice would say: ncclCommInitRank); ncclCommInitAll's list names its own"};
const Bool kAllowSharedGpu{"TUTTI_ALLOW_SHARED_GPU", false,
                           "cuda backend: 1 lets several ranks use one GPU (ranks as threads of one process, or "
                           "processes under CUDA MPS); 0 refuses, naming both ranks, the host and the device"};
const Int kBootstrapTimeout{"TUTTI_BOOTSTRAP_TIMEOUT", 120,
                            "seconds the bootstrap waits for every rank before failing"};
const Int kTimeout{"TUTTI_TIMEOUT", 300,
                   "seconds an operation may make no progress before it fails naming the peer it waits for"};
const String kAlgoFile{"TUTTI_ALGO_FILE", "",
                       "custom algorithms: plan files (':'-separated), verified at init and selectable by name"};
const Bool kDeterministic{
    "TUTTI_DETERMINISTIC", false,
    "1: only algorithms with a fixed reduction order, so results are bitwise identical across runs "
    "and message sizes for a given rank count, type and op (slower: see docs/algorithms.md, Determinism)"};
const Int kNetLinkTimeout{"TUTTI_NET_LINK_TIMEOUT", 15,
                          "seconds a network connection may leave data unacknowledged (or keepalive probes unanswered) "
                          "before it counts as broken, so a cut link fails in seconds (0: the kernel's defaults)"};
const String kNetRequire{"TUTTI_NET_REQUIRE", "",
                         "network backend that must be used: init fails instead of falling back to another"};
const Int kNsteps{"TUTTI_NSTEPS", 8,
                  "FIFO slots per connection; an operation under 32 slots' worth is cut into chunks of half a slot, "
                  "down to 512 KiB"};
const Int kNthreads{"TUTTI_NTHREADS", 0,
                    "host worker threads per communicator (0: one per channel); never more than the channels"};
const Int kSpin{"TUTTI_SPIN", 200,
                "busy-poll iterations before a wait yields (unset: 20 when a host's ranks outnumber its cores)"};
const Int kYield{"TUTTI_YIELD", 50,
                 "polls that yield the CPU (sched_yield) after the busy polls, before a wait sleeps (unset: 50; 0 "
                 "where a communicator spans hosts and its ranks outnumber their cores, so proxy threads carry the "
                 "network)"};
const Bool kCalibrate{
    "TUTTI_CALIBRATE", true,
    "1: measure the host fabric at init (handoff between ranks, copy and reduce bandwidth, cores) for "
    "the selector's cost model; 0: fixed default figures (every rank takes them when the ranks differ)"};
const Bool kCma{"TUTTI_CMA", false,
                "1: between rank processes of a host, a receiver reads a peer's registered buffer in place with "
                "process_vm_readv (zero-copy, host executor) where a probe at connection setup allows it; 0: copy "
                "(the default: the one kernel copy measured slower than the two copies through shared memory)"};
const Bool kReadInPlace{
    "TUTTI_READ_IN_PLACE", true,
    "1: a receiver reads a peer's user buffer in place, registered or not, where it reaches any address of "
    "the peer (all-gather, broadcast, the second half of all-reduce: one copy instead of two): between rank "
    "threads of one process on the host and emulated backends, and between rank processes where TUTTI_CMA "
    "allows; 0: only registered buffers are read in place"};
const Size kReadInPlaceMin{"TUTTI_READ_IN_PLACE_MIN", 256 << 10,
                           "the smallest message of an unregistered buffer that is read in place "
                           "(TUTTI_READ_IN_PLACE); smaller ones are copied through the FIFO, which lets the "
                           "sender finish without waiting for the receiver's read"};
const Bool kMapRegistered{"TUTTI_MAP_REGISTERED", true,
                          "1: between rank processes of a host on a device backend (cuda; emulated with device "
                          "memory), a registered buffer's allocation is exported and mapped by the peers, which read "
                          "it in place (zero-copy); 0: such buffers are copied as others"};
const String kFlightRecorder{
    "TUTTI_FLIGHT_RECORDER", "",
    "a directory: each rank writes its communicator's flight record there as JSON when the "
    "communicator fails, times out or is aborted mid-operation (tools/tutti-trace reads them)"};
const Int kFlightRecorderEntries{"TUTTI_FLIGHT_RECORDER_ENTRIES", 1024,
                                 "operations each communicator's flight recorder keeps, the latest (0: none recorded)"};
const String kFlightRecorderSignal{
    "TUTTI_FLIGHT_RECORDER_SIGNAL", "",
    "a signal (SIGUSR1, SIGUSR2, ... or its number) on which every communicator of the "
    "process dumps its flight record, to TUTTI_FLIGHT_RECORDER or else the working directory"};
const String kIbverbsLib{
    "TUTTI_IBVERBS_LIB", "",
    "IB backend: the verbs library to load instead of libibverbs.so.1 (a software stand-in for tests)"};

}  // namespace tutti::tunables
