// Fixture: a layer header.
#pragma once
