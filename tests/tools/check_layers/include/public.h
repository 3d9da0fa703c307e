// A public header of the fixture tree.
#pragma once
