// nccl-tests' NCCL_TESTS_SPLIT_MASK and NCCL_TESTS_SPLIT: the colour that splits the world into groups, each running
// the sweep on its own communicator, side by side.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "perf/sweep/launcher.h"

namespace tutti::perf {

struct GroupSplit {
  enum class Op { And, Or, Mod, Div };
  std::string variable;  // NCCL_TESTS_SPLIT_MASK or NCCL_TESTS_SPLIT
  std::string value;     // its text, as given
  Op op = Op::And;
  uint64_t operand = 0;
  std::string ignored;  // NCCL_TESTS_SPLIT when NCCL_TESTS_SPLIT_MASK is set too (the mask wins, as in nccl-tests)

  // The colour of a process: its rank combined with the operand. Throws perf::Error when it does not fit
  // ncclCommSplit's int colour.
  int colour(int processRank) const;
  // The variable as the reports name it: NCCL_TESTS_SPLIT_MASK=0x1, NCCL_TESTS_SPLIT='AND 0x1'.
  std::string describe() const;
};

// The split the environment asks for (env: name -> value), nullopt when neither variable is set (or both are
// empty). Throws perf::Error (InvalidArgument), naming the variable and its value, when the value is not one that
// nccl-tests documents: NCCL_TESTS_SPLIT_MASK a hexadecimal number; NCCL_TESTS_SPLIT an operation (AND, OR, MOD,
// DIV or &, |, %, /) and a number (decimal, 0x hexadecimal, 0b binary; a leading 0 is octal, as nccl-tests' strtoul
// reads it), not MOD or DIV by 0.
std::optional<GroupSplit> groupSplitFromEnvironment(const std::map<std::string, std::string>& env);

// Every world rank's colour. The colour's input is nccl-tests' MPI process rank: a launched process's rank, shared
// by its -t/-g ranks; under --local each rank counts as a process of its own, since --local stands in for one
// process per rank on this host (as its device column does).
std::vector<int> groupColours(const GroupSplit& split, const World& world);

}  // namespace tutti::perf
