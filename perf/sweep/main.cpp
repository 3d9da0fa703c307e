// The entry point of one *_perf binary; CMake builds it once per collective with TUTTI_PERF_COLLECTIVE set.
#include "perf/sweep/sweep.h"

int main(int argc, char** argv) { return tutti::perf::runSweep(TUTTI_PERF_COLLECTIVE, argc, argv); }
