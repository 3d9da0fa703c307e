// header_cuda_first.c compiled as C++.
#include "header_cuda_first.c"
