// tutti-sim: the selector's choice and the cost model's estimate per message size, on a synthetic
// GPU cluster (up to 100,000 ranks and more) or a host-mode system. See algorithms/sim_cli.cpp.
#include <iostream>

#include "algorithms/sim_cli.h"
#include "kernels/mailbox.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return tutti::sim::runSimTool(args, std::cout, std::cerr, tutti::kern::kMailboxBytes);
}
