// Fixture: base/ reaching up into runtime/ (refused).
#pragma once
#include "runtime/comm.h"
