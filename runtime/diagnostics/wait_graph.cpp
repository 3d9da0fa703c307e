// The wait-for graph of a stalled job: following the waits from one rank to the ranks at the root.
#include "runtime/diagnostics/wait_graph.h"

#include <deque>

namespace tutti {

namespace {

std::string nameOf(const WaitGraph& graph, int rank) {
  if (rank >= 0 && size_t(rank) < graph.names.size() && !graph.names[size_t(rank)].empty())
    return graph.names[size_t(rank)];
  return "rank " + std::to_string(rank);
}

const RankWait& waitOf(const WaitGraph& graph, int rank) {
  static const RankWait kUnknown;
  if (rank < 0 || size_t(rank) >= graph.ranks.size()) return kUnknown;
  return graph.ranks[size_t(rank)];
}

std::string inOperation(const RankWait& w) {
  return w.opName.empty() ? std::string() : " in " + w.opName + " #" + std::to_string(w.opSeq);
}

// Why a root holds the others up, after its name.
std::string rootReason(const RankWait& w) {
  switch (w.state) {
    case RankWaitState::Idle: return "is in no operation: it has not made the call (or finished it)";
    case RankWaitState::NoAnswer: return w.detail.empty() ? "did not answer: stopped or hung" : w.detail;
    case RankWaitState::Gone: return w.detail.empty() ? "could not be reached: its process is gone" : w.detail;
    case RankWaitState::Unknown: return "was not asked what it waits for (no time left)";
    case RankWaitState::Waiting: return "waits for no one";
  }
  return "";
}

// "rank 0 waits for rank 1 in AllReduce #3, which waits for rank 2 in AllReduce #3" along path.
std::string chainText(const WaitGraph& graph, const std::vector<int>& path) {
  std::string text;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    text += (i == 0 ? "rank " + std::to_string(path[i]) : std::string(", which")) + " waits for rank " +
            std::to_string(path[i + 1]) + inOperation(waitOf(graph, path[i]));
  }
  return text;
}

}  // namespace

RootCause findRootCause(const WaitGraph& graph, int me) {
  RootCause cause;
  const size_t n = graph.ranks.size();
  if (me < 0 || size_t(me) >= n) return cause;
  // Breadth first, so that each root is reached along a shortest chain; parent gives the chain.
  std::vector<int> parent(n, -2);
  std::deque<int> queue{me};
  parent[size_t(me)] = -1;
  std::vector<std::vector<int>> paths;
  bool cycle = false;
  while (!queue.empty()) {
    int r = queue.front();
    queue.pop_front();
    const RankWait& w = waitOf(graph, r);
    bool waits = w.state == RankWaitState::Waiting && !w.waitsFor.empty();
    if (!waits && r != me) {
      std::vector<int> path;
      for (int at = r; at != -1; at = parent[size_t(at)]) path.insert(path.begin(), at);
      paths.push_back(path);
      continue;
    }
    for (int next : w.waitsFor) {
      if (next < 0 || size_t(next) >= n) continue;
      if (parent[size_t(next)] != -2) {
        cycle = true;  // a rank reached twice: a cycle, or two chains that meet
        continue;
      }
      parent[size_t(next)] = r;
      queue.push_back(next);
    }
  }
  for (const std::vector<int>& path : paths) {
    int root = path.back();
    cause.roots.push_back(root);
    if (!cause.text.empty()) cause.text += "; also ";
    std::string chain = chainText(graph, path);
    cause.text += chain + "; " + nameOf(graph, root) + " " + rootReason(waitOf(graph, root));
  }
  if (cause.roots.empty() && cycle) {
    // No rank outside the waits: they wait for each other (their calls differ, or data was lost).
    std::vector<int> path{me};
    for (int at = me;;) {
      const RankWait& w = waitOf(graph, at);
      if (w.waitsFor.empty()) break;
      at = w.waitsFor.front();
      path.push_back(at);
      bool seen = false;
      for (size_t i = 0; i + 1 < path.size(); ++i) seen = seen || path[i] == at;
      if (seen || path.size() > n + 1) break;
    }
    cause.text = chainText(graph, path) +
                 ": the ranks wait for each other in a cycle (do they make the same calls in the same order?)";
  }
  return cause;
}

}  // namespace tutti
