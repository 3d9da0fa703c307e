// The analytic cost model's entry points: an estimate by algorithm name, from the cost attached
// to the built-in algorithm's registry entry (each written beside its plan generator, on the
// primitives of cost_model.h), and nccl-tests' bus bandwidth factors.
#include "algorithms/cost_model.h"
#include "algorithms/registry.h"
#include "algorithms/sim.h"

namespace tutti::sim {
namespace {

using plan::Coll;
using plan::Layout;

// The built-in algorithms, built once: the model asks them for their costs by name.
const plan::AlgorithmRegistry& builtins() {
  static const plan::AlgorithmRegistry registry = plan::builtinAlgorithms();
  return registry;
}

}  // namespace

const std::vector<std::string>& modelledAlgorithms() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> modelled;
    for (const plan::Algorithm& a : builtins().all())
      if (a.analyticCost) modelled.push_back(a.name);
    return modelled;
  }();
  return names;
}

std::optional<double> analyticUs(const std::string& algorithm, Coll coll, size_t bytes, const Fabric& fabric,
                                 const Pipeline& pipeline) {
  const plan::Algorithm* a = builtins().find(algorithm);
  if (!a || !a->analyticCost) return std::nullopt;
  std::optional<Fabric> crowded;  // copied only when threads outnumber cores (fabrics can be large)
  if (fabric.threadShare(pipeline.nchannels) < fabric.threadShare(1)) crowded = fabric.atChannels(pipeline.nchannels);
  CostModel model(crowded ? *crowded : fabric, pipeline, coll, bytes);
  if (fabric.nranks <= 1) return model.single(countsBlocks(coll) ? Layout::Blocks : Layout::Whole);
  return a->analyticCost(model);
}

double busBandwidthFactor(Coll coll, int nranks) {
  double n = double(nranks);
  switch (coll) {
    case Coll::AllReduce: return 2 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AlltoAll:
    case Coll::Gather:
    case Coll::Scatter: return (n - 1) / n;
    default: return 1;
  }
}

}  // namespace tutti::sim
