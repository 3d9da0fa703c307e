// Fixture: tools/ may include any layer.
#include "runtime/comm.h"
