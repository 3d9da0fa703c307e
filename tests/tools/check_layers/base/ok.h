// Fixture: base/ using the public headers and itself (allowed).
#pragma once
#include <vector>
#include "base/up.h"
#include "public.h"
