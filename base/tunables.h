// The catalogue of tunables: every NCCL_* variable tutti honours and every TUTTI_* one it adds,
// each a typed handle (base/params.h) declared here once and read everywhere through it, e.g.
// tunables::kNsteps.get(). Defined in base/tunables.cpp in the order tutti-info --env lists them.
#pragma once

#include "base/params.h"

namespace tutti::tunables {

// NCCL's names.
extern const params::String kDebug;              // NCCL_DEBUG
extern const params::String kDebugSubsys;        // NCCL_DEBUG_SUBSYS
extern const params::String kDebugFile;          // NCCL_DEBUG_FILE
extern const params::String kCommId;             // NCCL_COMM_ID
extern const params::String kSocketIfname;       // NCCL_SOCKET_IFNAME
extern const params::String kSocketFamily;       // NCCL_SOCKET_FAMILY
extern const params::String kNet;                // NCCL_NET
extern const params::String kNetPlugin;          // NCCL_NET_PLUGIN
extern const params::Int kSocketNthreads;        // NCCL_SOCKET_NTHREADS
extern const params::Int kNsocksPerthread;       // NCCL_NSOCKS_PERTHREAD
extern const params::Bool kIbDisable;            // NCCL_IB_DISABLE
extern const params::String kIbHca;              // NCCL_IB_HCA
extern const params::Int kIbGidIndex;            // NCCL_IB_GID_INDEX
extern const params::Int kIbTimeout;             // NCCL_IB_TIMEOUT
extern const params::Int kIbRetryCnt;            // NCCL_IB_RETRY_CNT
extern const params::Int kIbSl;                  // NCCL_IB_SL
extern const params::Int kIbTc;                  // NCCL_IB_TC
extern const params::Int kIbQpsPerConnection;    // NCCL_IB_QPS_PER_CONNECTION
extern const params::Bool kIbSplitDataOnQps;     // NCCL_IB_SPLIT_DATA_ON_QPS
extern const params::Int kIbPciRelaxedOrdering;  // NCCL_IB_PCI_RELAXED_ORDERING
extern const params::Int kIbAdaptiveRouting;     // NCCL_IB_ADAPTIVE_ROUTING
extern const params::Size kIbArThreshold;        // NCCL_IB_AR_THRESHOLD
extern const params::String kIbverbsLib;         // TUTTI_IBVERBS_LIB
extern const params::String kNetGdrLevel;        // NCCL_NET_GDR_LEVEL
extern const params::Bool kNetGdrRead;           // NCCL_NET_GDR_READ
extern const params::Bool kGdrFlushDisable;      // NCCL_GDR_FLUSH_DISABLE
extern const params::String kAlgo;               // NCCL_ALGO
extern const params::String kProto;              // NCCL_PROTO
extern const params::String kTopoFile;           // NCCL_TOPO_FILE
extern const params::String kTopoDumpFile;       // NCCL_TOPO_DUMP_FILE
extern const params::Size kBuffsize;             // NCCL_BUFFSIZE
extern const params::Int kMinNchannels;          // NCCL_MIN_NCHANNELS
extern const params::Int kMaxNchannels;          // NCCL_MAX_NCHANNELS
extern const params::Bool kShmDisable;           // NCCL_SHM_DISABLE
extern const params::Bool kP2pDisable;           // NCCL_P2P_DISABLE
extern const params::String kP2pLevel;           // NCCL_P2P_LEVEL
extern const params::Int kP2pReadEnable;         // NCCL_P2P_READ_ENABLE
extern const params::Bool kP2pUseCudaMemcpy;     // NCCL_P2P_USE_CUDA_MEMCPY
extern const params::Bool kCommBlocking;         // NCCL_COMM_BLOCKING
extern const params::String kHostid;             // NCCL_HOSTID

// Ours.
extern const params::String kDevice;                // TUTTI_DEVICE
extern const params::String kCudaLibrary;           // TUTTI_CUDA_LIBRARY
extern const params::Int kEmulatedThreads;          // TUTTI_EMULATED_THREADS
extern const params::String kEmulatedMemory;        // TUTTI_EMULATED_MEMORY
extern const params::String kEmulatedIpc;           // TUTTI_EMULATED_IPC
extern const params::String kEmulatedLacks;         // TUTTI_EMULATED_LACKS
extern const params::String kEmulatedBusIds;        // TUTTI_EMULATED_BUS_IDS
extern const params::String kEmulatedNoPeerAccess;  // TUTTI_EMULATED_NO_PEER_ACCESS
extern const params::Int kEmulatedDevice;           // TUTTI_EMULATED_DEVICE
extern const params::Bool kAllowSharedGpu;          // TUTTI_ALLOW_SHARED_GPU
extern const params::Int kBootstrapTimeout;         // TUTTI_BOOTSTRAP_TIMEOUT
extern const params::Int kTimeout;                  // TUTTI_TIMEOUT
extern const params::String kAlgoFile;              // TUTTI_ALGO_FILE
extern const params::Bool kDeterministic;           // TUTTI_DETERMINISTIC
extern const params::Int kNetLinkTimeout;           // TUTTI_NET_LINK_TIMEOUT
extern const params::String kNetRequire;            // TUTTI_NET_REQUIRE
extern const params::Int kNsteps;                   // TUTTI_NSTEPS
extern const params::Int kNthreads;                 // TUTTI_NTHREADS
extern const params::Int kSpin;                     // TUTTI_SPIN
extern const params::Int kYield;                    // TUTTI_YIELD
extern const params::Bool kCalibrate;               // TUTTI_CALIBRATE
extern const params::Bool kCma;                     // TUTTI_CMA
extern const params::Bool kReadInPlace;             // TUTTI_READ_IN_PLACE
extern const params::Size kReadInPlaceMin;          // TUTTI_READ_IN_PLACE_MIN
extern const params::Bool kMapRegistered;           // TUTTI_MAP_REGISTERED
extern const params::String kFlightRecorder;        // TUTTI_FLIGHT_RECORDER
extern const params::Int kFlightRecorderEntries;    // TUTTI_FLIGHT_RECORDER_ENTRIES
extern const params::String kFlightRecorderSignal;  // TUTTI_FLIGHT_RECORDER_SIGNAL

}  // namespace tutti::tunables
