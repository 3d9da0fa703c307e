// Fixture: runtime/ may include every layer.
#pragma once
#include "base/ok.h"
#include "transports/connection.h"
