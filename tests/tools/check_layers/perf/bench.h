// Fixture: a perf header.
#pragma once
