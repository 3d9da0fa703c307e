// Fixture: CUDA source of kernels/ including algorithms/ (allowed) and transports/ (refused).
#include "algorithms/plan.h"
#include "transports/connection.h"
