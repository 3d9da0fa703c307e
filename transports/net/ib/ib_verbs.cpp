// Loading libibverbs (or the stand-in) with dlopen and filling the verbs function table.
#include "transports/net/ib/ib_verbs.h"

#include <dlfcn.h>

#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"

namespace tutti::transport::net::ib {

IbVerbs::~IbVerbs() {
  if (library) dlclose(library);
}

int IbVerbs::queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
  // The exported ibv_query_port fills the older layout, a prefix of ibv_port_attr: zero the rest.
  std::memset(attr, 0, sizeof *attr);
  return queryPortRaw(context, port, attr);
}

namespace {

template <typename F>
void bind(IbVerbs& v, F& slot, const char* name) {
  void* symbol = dlsym(v.library, name);
  if (!symbol)
    throw Error(ErrorCode::System,
                "NET/IB: " + v.path + " lacks " + name + " (" + (dlerror() ? dlerror() : "no such symbol") + ")");
  slot = reinterpret_cast<F>(symbol);
}

}  // namespace

std::shared_ptr<IbVerbs> loadIbVerbs() {
  auto v = std::make_shared<IbVerbs>();
  std::string wanted = tunables::kIbverbsLib.get();
  v->path = wanted.empty() ? "libibverbs.so.1" : wanted;
  v->library = dlopen(v->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!v->library) {
    const char* why = dlerror();
    throw Error(ErrorCode::System, "NET/IB: cannot load " + v->path + " (" + (why ? why : "unknown") + ")");
  }
  v->forkInit = reinterpret_cast<int (*)()>(dlsym(v->library, "ibv_fork_init"));
  if (!v->forkInit) {
    TUTTI_INFO(log::Net, "NET/IB: %s has no ibv_fork_init: a fork() while memory is registered may corrupt transfers",
               v->path.c_str());
  } else if (int rc = v->forkInit(); rc != 0) {
    TUTTI_INFO(log::Net,
               "NET/IB: ibv_fork_init in %s failed (%s): a fork() while memory is registered may corrupt transfers",
               v->path.c_str(), std::strerror(rc < 0 ? -rc : rc));
  }
  bind(*v, v->getDeviceList, "ibv_get_device_list");
  bind(*v, v->freeDeviceList, "ibv_free_device_list");
  bind(*v, v->getDeviceName, "ibv_get_device_name");
  bind(*v, v->openDevice, "ibv_open_device");
  bind(*v, v->closeDevice, "ibv_close_device");
  bind(*v, v->queryDevice, "ibv_query_device");
  bind(*v, v->queryPortRaw, "ibv_query_port");
  bind(*v, v->queryGid, "ibv_query_gid");
  bind(*v, v->allocPd, "ibv_alloc_pd");
  bind(*v, v->deallocPd, "ibv_dealloc_pd");
  bind(*v, v->regMr, "ibv_reg_mr");
  bind(*v, v->deregMr, "ibv_dereg_mr");
  bind(*v, v->createCq, "ibv_create_cq");
  bind(*v, v->destroyCq, "ibv_destroy_cq");
  bind(*v, v->createQp, "ibv_create_qp");
  bind(*v, v->modifyQp, "ibv_modify_qp");
  bind(*v, v->destroyQp, "ibv_destroy_qp");
  bind(*v, v->wcStatusStr, "ibv_wc_status_str");
  v->regMrIova2 = reinterpret_cast<decltype(v->regMrIova2)>(dlsym(v->library, "ibv_reg_mr_iova2"));
  v->regDmabufMr = reinterpret_cast<decltype(v->regDmabufMr)>(dlsym(v->library, "ibv_reg_dmabuf_mr"));
  bind(*v, v->createCompChannel, "ibv_create_comp_channel");
  bind(*v, v->destroyCompChannel, "ibv_destroy_comp_channel");
  bind(*v, v->getCqEvent, "ibv_get_cq_event");
  bind(*v, v->ackCqEvents, "ibv_ack_cq_events");
  bind(*v, v->getAsyncEvent, "ibv_get_async_event");
  bind(*v, v->ackAsyncEvent, "ibv_ack_async_event");
  bind(*v, v->eventTypeStr, "ibv_event_type_str");
  return v;
}

}  // namespace tutti::transport::net::ib
