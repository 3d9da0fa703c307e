// The verbs function table: every libibverbs call the IB backend makes goes through it, so that the
// library is loaded at run time (dlopen; absent = no IB) and a software stand-in can replace it
// (TUTTI_IBVERBS_LIB). Types are libibverbs' own (rdma-core's verbs.h).
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

namespace tutti::transport::net::ib {

struct IbVerbs {
  void* library = nullptr;  // dlopen handle, closed by the destructor
  std::string path;

  int (*forkInit)() = nullptr;  // optional; loadIbVerbs() has called it
  ibv_device** (*getDeviceList)(int*) = nullptr;
  void (*freeDeviceList)(ibv_device**) = nullptr;
  const char* (*getDeviceName)(ibv_device*) = nullptr;
  ibv_context* (*openDevice)(ibv_device*) = nullptr;
  int (*closeDevice)(ibv_context*) = nullptr;
  int (*queryDevice)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*queryPortRaw)(ibv_context*, uint8_t, void*) = nullptr;  // the exported (compat-layout) symbol
  int (*queryGid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  ibv_pd* (*allocPd)(ibv_context*) = nullptr;
  int (*deallocPd)(ibv_pd*) = nullptr;
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int) = nullptr;
  int (*deregMr)(ibv_mr*) = nullptr;
  ibv_cq* (*createCq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroyCq)(ibv_cq*) = nullptr;
  ibv_qp* (*createQp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modifyQp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroyQp)(ibv_qp*) = nullptr;
  const char* (*wcStatusStr)(ibv_wc_status) = nullptr;
  // Optional (nullptr when the library lacks it): the registration call that understands the
  // optional access flags (IBV_ACCESS_OPTIONAL_RANGE, e.g. relaxed ordering), rdma-core 28 and later.
  ibv_mr* (*regMrIova2)(ibv_pd*, void*, size_t, uint64_t, unsigned) = nullptr;
  // Optional: registration of device memory by its dmabuf descriptor (GPUDirect RDMA without a
  // peer-memory kernel module), rdma-core 34 and later: (pd, offset, length, iova, fd, access).
  ibv_mr* (*regDmabufMr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int) = nullptr;
  // Completion channels and async events (ib_completion_queue.h, ib_device.h's event thread).
  ibv_comp_channel* (*createCompChannel)(ibv_context*) = nullptr;
  int (*destroyCompChannel)(ibv_comp_channel*) = nullptr;
  int (*getCqEvent)(ibv_comp_channel*, ibv_cq**, void**) = nullptr;
  void (*ackCqEvents)(ibv_cq*, unsigned int) = nullptr;
  int (*getAsyncEvent)(ibv_context*, ibv_async_event*) = nullptr;
  void (*ackAsyncEvent)(ibv_async_event*) = nullptr;
  const char* (*eventTypeStr)(ibv_event_type) = nullptr;

  // verbs.h makes these static inline calls through the context's ops; the table routes them the
  // same way so that a stand-in provides them by filling its contexts' ops.
  static int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    return qp->context->ops.post_send(qp, wr, bad);
  }
  static int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    return qp->context->ops.post_recv(qp, wr, bad);
  }
  static int pollCq(ibv_cq* cq, int n, ibv_wc* wc) { return cq->context->ops.poll_cq(cq, n, wc); }
  static int reqNotifyCq(ibv_cq* cq, int solicitedOnly) { return cq->context->ops.req_notify_cq(cq, solicitedOnly); }

  int queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;

  IbVerbs() = default;
  IbVerbs(const IbVerbs&) = delete;
  IbVerbs& operator=(const IbVerbs&) = delete;
  ~IbVerbs();
};

// Loads TUTTI_IBVERBS_LIB, else libibverbs.so.1, and asks it for fork support (ibv_fork_init,
// as NCCL does): without it a child of fork() (system(), a data loader's workers) shares the
// pages of registered memory copy-on-write, and the parent's next write lands in a page the HCA no
// longer reads. Throws System naming the library and dlerror() when it is absent or lacks a symbol.
std::shared_ptr<IbVerbs> loadIbVerbs();

}  // namespace tutti::transport::net::ib
