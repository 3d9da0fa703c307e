// tutti-sim: the selector's choice and the cost model's estimate per message size, on a synthetic
// GPU cluster (up to 100,000 ranks and more) or a host-mode system. See algorithms/sim_cli.cpp.
//
// With --init it models a communicator's init instead (runtime/comm/init_model.h): for each rank count
// the bootstrap exchanges in order, with the rounds and bytes of one rank and of the root.
//   tutti-sim --init --ranks 1024,100000 [--ranks-per-node 8] [--roots 1] [--channels 2]
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "algorithms/sim_cli.h"
#include "kernels/mailbox.h"
#include "runtime/comm/init_model.h"

namespace {

std::string bytesText(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, u++;
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return text;
}

int64_t positive(const std::string& flag, const std::string& text) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || v < 1) throw std::invalid_argument(flag + ": \"" + text + "\" is not a positive integer");
  return v;
}

int runInitModel(const std::vector<std::string>& args) {
  std::vector<int64_t> rankCounts = {8, 64, 1024, 100000};
  int64_t perNode = 8;
  tutti::InitShape shape;
  for (size_t i = 0; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--init") continue;
    if (i + 1 >= args.size()) throw std::invalid_argument(a + ": needs a value (or is unknown with --init)");
    const std::string& v = args[++i];
    if (a == "--ranks") {
      rankCounts.clear();
      std::stringstream list(v);
      for (std::string item; std::getline(list, item, ',');) rankCounts.push_back(positive(a, item));
    } else if (a == "--ranks-per-node") {
      perNode = positive(a, v);
    } else if (a == "--roots") {
      shape.rootsCount = int(positive(a, v));
    } else if (a == "--channels") {
      shape.channels = int(positive(a, v));
    } else if (a == "--topology-bytes") {
      shape.topologyBytes = size_t(positive(a, v));
    } else {
      throw std::invalid_argument("unknown option " + a +
                                  " with --init (--ranks, --ranks-per-node, --roots, --channels, --topology-bytes)");
    }
  }
  for (int64_t n : rankCounts) {
    shape.nranks = n;
    shape.nodes = (n + perNode - 1) / perNode;
    std::printf("# init of %lld ranks on %lld node(s), %d root(s), %d channel(s)\n", (long long)n,
                (long long)shape.nodes, shape.rootsCount, shape.channels);
    std::printf("%-28s %-24s %8s %12s %12s %12s\n", "exchange", "kind", "rounds", "in/rank", "out/rank", "root");
    int64_t rounds = 0;
    double in = 0, out = 0;
    for (const tutti::InitExchange& e : tutti::modelInit(shape)) {
      std::printf("%-28s %-24s %8lld %12s %12s %12s\n", e.name.c_str(), e.kind.c_str(), (long long)e.rounds,
                  bytesText(e.bytesIn).c_str(), bytesText(e.bytesOut).c_str(),
                  e.rootBytes > 0 ? bytesText(e.rootBytes).c_str() : "-");
      rounds += e.rounds;
      in += e.bytesIn;
      out += e.bytesOut;
    }
    std::printf("%-28s %-24s %8lld %12s %12s\n\n", "total", "", (long long)rounds, bytesText(in).c_str(),
                bytesText(out).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args)
    if (a == "--init") {
      try {
        return runInitModel(args);
      } catch (const std::exception& e) {
        std::cerr << "tutti-sim: " << e.what() << "\n";
        return 2;
      }
    }
  return tutti::sim::runSimTool(args, std::cout, std::cerr, tutti::kern::kMailboxBytes);
}
