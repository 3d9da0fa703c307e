// header_cuda_after.c compiled as C++.
#include "header_cuda_after.c"
