// Fixture: perf/ with the public API and its own files (allowed) and base/ (refused).
#include "bench.h"
#include <base/up.h>
#include "public.h"
