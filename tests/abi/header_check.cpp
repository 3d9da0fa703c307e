// nccl.h compiled as C++: the same checks as header_check.c.
#include "header_check.c"
