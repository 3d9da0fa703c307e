// The two hooks between the stand-in's core (standin_memory.cpp, standin_qp.cpp) and its registrations of memory
// by dmabuf (standin_dmabuf.cpp).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

extern "C" {

// The core: registers the bytes at `host` as work requests name them, at `iova`; nullptr and
// errno when refused (as ibv_reg_mr).
ibv_mr* standin_register_region(ibv_pd* pd, void* host, size_t length, uint64_t iova, int access);

// The dmabuf part counts RDMA reads for tests (the GDR flush's), beside its registrations.
void standin_note_rdma_read();

// The dmabuf part: `mr` is being deregistered; unmaps what ibv_reg_dmabuf_mr mapped for it, if any.
void standin_forget_dmabuf_mapping(const ibv_mr* mr);
}
