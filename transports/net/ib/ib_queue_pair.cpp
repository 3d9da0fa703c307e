// RC queue pair setup (the state transitions with the attributes each requires) and completions.
#include "transports/net/ib/ib_queue_pair.h"

#include <cstring>
#include <random>

#include "base/error.h"
#include "base/tunables.h"

namespace tutti::transport::net::ib {

IbQueuePair::IbQueuePair(std::shared_ptr<IbDevice> device, std::string peer, int depth)
    : device_(std::move(device)), peer_(std::move(peer)) {
  IbVerbs& v = device_->verbs();
  std::random_device random;
  psn_ = random() & 0xffffff;
  cq_ = std::make_unique<IbCompletionQueue>(device_, peer_, 2 * depth);
  ibv_qp_init_attr init{};
  init.send_cq = cq_->cq();
  init.recv_cq = cq_->cq();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = uint32_t(depth);
  init.cap.max_recv_wr = uint32_t(depth);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  qp_ = v.createQp(device_->pd(), &init);
  if (!qp_) {
    int e = errno;
    throw Error(ErrorCode::System,
                "NET/IB: ibv_create_qp on " + device_->name() + " for " + peer_ + ": " + strerror(e));
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = uint8_t(device_->port());
  // Remote read: the GDR flush reads the received buffer back over a QP connected to itself.
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (int rc = v.modifyQp(qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    v.destroyQp(qp_);
    throw Error(ErrorCode::System,
                "NET/IB: ibv_modify_qp to INIT on " + device_->name() + " for " + peer_ + ": " + strerror(rc));
  }
}

IbQueuePair::~IbQueuePair() {
  IbVerbs& v = device_->verbs();
  v.destroyQp(qp_);
}

QpInfo IbQueuePair::localInfo() const {
  QpInfo info{};
  info.qpn = qp_->qp_num;
  info.psn = psn_;
  info.lid = device_->portAttr().lid;
  info.mtu = uint8_t(device_->portAttr().active_mtu);
  info.linkLayer = device_->portAttr().link_layer;
  info.gidIndex = uint32_t(device_->gidIndex());
  std::memcpy(info.gid, device_->gid().raw, 16);
  return info;
}

void IbQueuePair::connectTo(const QpInfo& remote) {
  IbVerbs& v = device_->verbs();
  std::string where = " on " + device_->name() + " to " + peer_ + " (local GID index " +
                      std::to_string(device_->gidIndex()) + ", remote QP " + std::to_string(remote.qpn) + " GID " +
                      gidText(*reinterpret_cast<const ibv_gid*>(remote.gid)) + " index " +
                      std::to_string(remote.gidIndex) + ")";
  if (remote.linkLayer != device_->portAttr().link_layer)
    throw Error(ErrorCode::Remote, "NET/IB: link layers differ (InfiniBand and Ethernet)" + where);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = ibv_mtu(std::min<int>(remote.mtu, device_->portAttr().active_mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = uint8_t(device_->port());
  attr.ah_attr.sl = uint8_t(tunables::kIbSl.get());
  if (device_->ethernet()) {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, 16);
    attr.ah_attr.grh.sgid_index = uint8_t(device_->gidIndex());
    attr.ah_attr.grh.hop_limit = 255;
    attr.ah_attr.grh.traffic_class = uint8_t(tunables::kIbTc.get());
  } else {
    attr.ah_attr.dlid = remote.lid;
  }
  if (int rc = v.modifyQp(qp_, &attr,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    throw Error(ErrorCode::System, std::string("NET/IB: ibv_modify_qp to RTR failed: ") + strerror(rc) + where);
  attr = ibv_qp_attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = uint8_t(tunables::kIbTimeout.get());
  attr.retry_cnt = uint8_t(tunables::kIbRetryCnt.get());
  attr.rnr_retry = 7;
  attr.sq_psn = psn_;
  attr.max_rd_atomic = 1;
  if (int rc = v.modifyQp(qp_, &attr,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                              IBV_QP_MAX_QP_RD_ATOMIC))
    throw Error(ErrorCode::System, std::string("NET/IB: ibv_modify_qp to RTS failed: ") + strerror(rc) + where);
}

int IbQueuePair::poll(ibv_wc* wc, int max, const char* operation) {
  if (error_) {
    Error e = *error_;
    error_.reset();
    throw e;
  }
  int n = cq_->poll(wc, max);
  if (n < 0)
    throw Error(ErrorCode::System, std::string("NET/IB: ") + operation + " with " + peer_ + " on " + device_->name() +
                                       ": ibv_poll_cq failed (completion queue overrun)");
  for (int i = 0; i < n; ++i)
    if (wc[i].status != IBV_WC_SUCCESS) {
      error_ = Error(ErrorCode::Remote,
                     std::string("NET/IB: ") + operation + " with " + peer_ + " on " + device_->name() +
                         ": completion error: " + device_->verbs().wcStatusStr(wc[i].status) + " (status " +
                         std::to_string(int(wc[i].status)) + ", opcode " + std::to_string(int(wc[i].opcode)) +
                         ", vendor error " + std::to_string(wc[i].vendor_err) + ")");
      if (i > 0) return i;  // the successes before it first
      Error e = *error_;
      error_.reset();
      throw e;
    }
  return n;
}

void IbQueuePair::postSend(ibv_send_wr* wr, const char* operation) {
  ibv_send_wr* bad = nullptr;
  if (int rc = IbVerbs::postSend(qp_, wr, &bad))
    throw Error(ErrorCode::System, std::string("NET/IB: ") + operation + " to " + peer_ + " on " + device_->name() +
                                       ": ibv_post_send: " + strerror(rc));
}

void IbQueuePair::postRecv(ibv_recv_wr* wr, const char* operation) {
  ibv_recv_wr* bad = nullptr;
  if (int rc = IbVerbs::postRecv(qp_, wr, &bad))
    throw Error(ErrorCode::System, std::string("NET/IB: ") + operation + " from " + peer_ + " on " + device_->name() +
                                       ": ibv_post_recv: " + strerror(rc));
}

}  // namespace tutti::transport::net::ib
