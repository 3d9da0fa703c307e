// The stand-in's protection domains and memory regions, with the key / bounds / access checks that
// hardware makes on every local and remote access.
#include "standin.h"

namespace tutti_standin {

StandinMr* findMr(StandinContext* c, uint32_t key, ibv_pd* pd, uint64_t addr, uint64_t length, int needAccess) {
  auto it = c->mrs.find(key);
  if (it == c->mrs.end()) return nullptr;
  StandinMr* m = it->second;
  uint64_t base = uint64_t(uintptr_t(m->mr.addr));
  if (m->mr.pd != pd || addr < base || addr + length > base + m->mr.length || length > m->mr.length) return nullptr;
  if ((m->access & needAccess) != needAccess) return nullptr;
  return m;
}

}  // namespace tutti_standin

using namespace tutti_standin;

extern "C" {

STANDIN_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  auto* pd = new ibv_pd{};
  pd->context = context;
  return pd;
}

STANDIN_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  StandinContext* c = contextOf(pd->context);
  std::lock_guard<std::mutex> lock(c->mutex);
  for (auto& [k, m] : c->mrs)
    if (m->mr.pd == pd) return EBUSY;
  for (auto& [n, q] : c->qps)
    if (q->qp.pd == pd) return EBUSY;
  delete pd;
  return 0;
}

// The bytes at `addr`, named by work requests as `iova` (ibv_reg_mr_iova2, ibv_reg_dmabuf_mr).
ibv_mr* standin_register_region(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  // Remote write needs local write, as the verbs specification requires.
  if (!pd || (!addr && length) || ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE))) {
    errno = EINVAL;
    return nullptr;
  }
  // Optional access flags (relaxed ordering): honoured and counted, or, as a library without
  // them would, refused.
  if (access & IBV_ACCESS_OPTIONAL_RANGE) {
    const char* ro = std::getenv("TUTTI_IBVERBS_STANDIN_RELAXED_ORDERING");
    if (ro && std::strcmp(ro, "0") == 0) {
      errno = EINVAL;
      return nullptr;
    }
    if (access & IBV_ACCESS_RELAXED_ORDERING) counters().relaxedOrderingMrs++;
  }
  StandinContext* c = contextOf(pd->context);
  if (!gForkInitialized.load()) gRegisteredBeforeForkInit = true;
  auto* m = new StandinMr{};
  std::lock_guard<std::mutex> lock(c->mutex);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = reinterpret_cast<void*>(uintptr_t(iova));
  m->host = static_cast<char*>(addr);
  m->mr.length = length;
  m->mr.lkey = m->mr.rkey = c->nextKey++;
  m->access = access;
  c->mrs[m->mr.lkey] = m;
  return &m->mr;
}

STANDIN_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return standin_register_region(pd, addr, length, uint64_t(uintptr_t(addr)), access);
}

// Newer headers route ibv_reg_mr through this one.
STANDIN_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  return standin_register_region(pd, addr, length, iova, int(access));
}

STANDIN_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  StandinContext* c = contextOf(mr->context);
  std::lock_guard<std::mutex> lock(c->mutex);
  c->mrs.erase(mr->lkey);
  standin_forget_dmabuf_mapping(mr);
  delete reinterpret_cast<StandinMr*>(mr);
  return 0;
}

}  // extern "C"
