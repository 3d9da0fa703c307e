// CommConfig, a communicator's configuration, and readConfig, which reads a user's ncclConfig_t
// (from any NCCL header from 2.14 to 2.31) into one, with defaults for everything the user left unset.
#pragma once

#include <optional>
#include <string>

#include "nccl.h"

namespace tutti {

// What a communicator was asked for. A std::nullopt field is one neither the user nor NCCL's
// documentation fixes: whoever consumes it (selector, device backend, net layer) chooses.
struct CommConfig {
  bool blocking = true;                     // false: init and collectives may return ncclInProgress
  std::optional<int> cgaClusterSize;        // CUDA thread-block cluster size (NCCL: 4 on sm90+, else 0)
  std::optional<int> minCTAs;               // fewest channels (NCCL default 1)
  std::optional<int> maxCTAs;               // most channels (NCCL default: its channel limit)
  std::string netName;                      // network backend by name; empty: automatic
  bool splitShare = false;                  // ncclCommSplit children share this comm's resources
  std::optional<int> trafficClass;          // network traffic class (IB TC / IP TOS byte)
  std::string commName;                     // a name for logs; empty: none
  bool collnetEnable = false;               // use in-network reduction (CollNet/SHARP) if present
  int ctaPolicy = NCCL_CTA_POLICY_DEFAULT;  // NCCL_CTA_POLICY_*
  bool shrinkShare = false;                 // ncclCommShrink children share this comm's resources
  std::optional<int> nvlsCTAs;              // channels for NVLink SHARP collectives
  std::optional<int> nChannelsPerNetPeer;   // channels per remote peer for network p2p
  bool nvlinkCentricSched = false;          // schedule for NVLink utilisation first
  std::optional<int> graphUsageMode;        // CUDA graph use: 0 none, 1 graphs only, 2 graphs mixed with eager calls
  std::optional<int> numRmaCtx;             // contexts of one-sided operations (0: none; unset: one)
  std::optional<int> maxP2pPeers;           // most peers a rank exchanges point-to-point with
  bool graphStreamOrdering = false;         // captured operations keep the order of their streams
  bool launchOrderImplicit = false;         // (2.31) a device launch-ordering flag: checked and kept
  std::optional<int> numRmaSig;             // (2.31) signal slots per peer for one-sided calls (unset: one)
  bool rmaEagerInit = false;                // (2.31) one-sided resources made at init, not at first use
  std::optional<int> hostCftMode;           // (2.31) ncclHostCftMode_t 1-3, a device feature: checked and kept
  std::optional<int> nvlsHostMode;          // ncclNvlsHostMode_t: NVLS parts turned off (no NVLS here): kept
  unsigned int headerVersion = 0;           // NCCL_VERSION of the caller's nccl.h; 0: no config given

  bool operator==(const CommConfig&) const = default;
};

// Reads a user's ncclConfig_t. NULL gives the defaults (blocking from NCCL_COMM_BLOCKING).
// Only the bytes the caller's header declared are read: up to config->size, and only fields
// that existed in config->version, so padding of an older struct is never taken for a field.
// A field the user left at NCCL_CONFIG_UNDEF_INT/PTR takes the default.
// Throws Error(InvalidArgument) naming `operation` and the field for: a config not made from
// NCCL_CONFIG_INITIALIZER (wrong magic), a version before 2.14, a size too small to hold the
// fields of 2.14, or a value out of range (blocking not 0/1, CTAs not positive, minCTAs >
// maxCTAs, a flag not 0/1, an unknown CTAPolicy, an unterminated name, ...).
CommConfig readConfig(const ncclConfig_t* config, const char* operation);

// One line for INFO logs: "blocking=1 minCTAs=unset ... commName=\"x\"".
std::string describeConfig(const CommConfig& config);

}  // namespace tutti
