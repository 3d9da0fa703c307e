// Fixture: runtime/ code naming what is behind the seams. Comments may: "cuda", "p2p".
#include "kernels/backend.h"
#include "kernels/cuda/seam.cu"
/* "net/Socket" in a block comment is fine */
#if defined(TUTTI_HAVE_CUDA)
const char* backend = "emulated";
#endif
const char* quote = "a \" // not a comment: \"shm\" here is inside a string";
bool viaNet(const char* name) { return name == "net/IB"; }  // "host" in a comment is fine
const char* config = "netName";
