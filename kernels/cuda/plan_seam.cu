// Compiles the plan IR and the FIFO layout with nvcc, so the headers the CUDA executor will
// share with the host executor stay valid device code.
#include "algorithms/plan.h"
#include "kernels/fifo.h"

namespace tutti::kern {

// Walks a plan's steps and FIFO slots on the device, touching every field the executor reads.
__global__ void planSeamKernel(const plan::Step* steps, int nsteps, FifoHeader* fifo, unsigned long long* out) {
  unsigned long long acc = 0;
  for (int i = 0; i < nsteps; i++) {
    const plan::Step& s = steps[i];
    acc += unsigned(s.op) + s.flags + unsigned(s.src.buf) + unsigned(s.dst.buf) + unsigned(s.src.chunk) +
           unsigned(s.dst.chunk);
  }
  acc += reinterpret_cast<unsigned long long>(fifoSlot(fifo, fifo->head)) + fifoBytes(fifo->nsteps, fifo->slotBytes);
  *out = acc;
}

}  // namespace tutti::kern
