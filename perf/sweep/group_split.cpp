// Reads nccl-tests' split variables and gives each rank its colour.
#include "perf/sweep/group_split.h"

#include <strings.h>
#include <algorithm>
#include <cctype>
#include <climits>

#include "perf/sweep/error.h"

namespace tutti::perf {
namespace {

bool isSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && isSpace(text.front())) text.remove_prefix(1);
  while (!text.empty() && isSpace(text.back())) text.remove_suffix(1);
  return text;
}

// All of text as one unsigned number in base; nullopt when it is empty, holds another character or overflows.
// (nccl-tests' strtoul stops at the first bad character and keeps what came before, so "1z" is 1 and "z" is 0 there:
// a typo would silently run one group, which is why a value here must be a number to its end.)
std::optional<uint64_t> digits(std::string_view text, int base) {
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    int digit = std::isdigit(static_cast<unsigned char>(c))    ? c - '0'
                : std::isxdigit(static_cast<unsigned char>(c)) ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                                                               : base;
    if (digit >= base || value > (UINT64_MAX - uint64_t(digit)) / uint64_t(base)) return std::nullopt;
    value = value * uint64_t(base) + uint64_t(digit);
  }
  return value;
}

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && strncasecmp(text.data(), prefix.data(), prefix.size()) == 0;
}

[[noreturn]] void badVariable(const std::string& name, const std::string& value, const std::string& why) {
  throw Error(ErrorCode::InvalidArgument, name + "='" + value + "': " + why);
}

}  // namespace

int GroupSplit::colour(int processRank) const {
  uint64_t p = uint64_t(processRank), c = 0;
  switch (op) {
    case Op::And: c = p & operand; break;
    case Op::Or: c = p | operand; break;
    case Op::Mod: c = p % operand; break;
    case Op::Div: c = p / operand; break;
  }
  if (c > uint64_t(INT_MAX))
    badVariable(variable, value,
                "gives process " + std::to_string(processRank) + " the colour " + std::to_string(c) +
                    ", more than ncclCommSplit's colours hold (" + std::to_string(INT_MAX) + ")");
  return int(c);
}

std::string GroupSplit::describe() const {
  bool quote = value.empty() || std::find_if(value.begin(), value.end(), isSpace) != value.end();
  return variable + "=" + (quote ? "'" + value + "'" : value);
}

std::optional<GroupSplit> groupSplitFromEnvironment(const std::map<std::string, std::string>& env) {
  auto lookup = [&](const char* name) -> const std::string* {
    auto found = env.find(name);
    return found == env.end() || trimmed(found->second).empty() ? nullptr : &found->second;
  };
  const std::string* mask = lookup("NCCL_TESTS_SPLIT_MASK");
  const std::string* split = lookup("NCCL_TESTS_SPLIT");
  if (!mask && !split) return std::nullopt;
  GroupSplit out;
  if (mask) {
    // nccl-tests reads the mask in base 16 whatever its prefix: "10" is 16 there, and so here.
    out.variable = "NCCL_TESTS_SPLIT_MASK", out.value = *mask, out.op = GroupSplit::Op::And;
    std::string_view text = trimmed(*mask);
    if (startsWith(text, "0x")) text.remove_prefix(2);
    std::optional<uint64_t> value = digits(text, 16);
    if (!value)
      badVariable(out.variable, out.value,
                  "not a hexadecimal number (nccl-tests reads the mask in base 16, as 0x1 or 1)");
    out.operand = *value;
    if (split) out.ignored = "NCCL_TESTS_SPLIT=" + *split;
    return out;
  }
  out.variable = "NCCL_TESTS_SPLIT", out.value = *split;
  std::string_view text = trimmed(*split);
  struct Operation {
    const char* name;
    GroupSplit::Op op;
  };
  const Operation operations[] = {{"AND", GroupSplit::Op::And}, {"&", GroupSplit::Op::And},
                                  {"OR", GroupSplit::Op::Or},   {"|", GroupSplit::Op::Or},
                                  {"MOD", GroupSplit::Op::Mod}, {"%", GroupSplit::Op::Mod},
                                  {"DIV", GroupSplit::Op::Div}, {"/", GroupSplit::Op::Div}};
  const Operation* found = nullptr;
  for (const Operation& o : operations)
    if (startsWith(text, o.name)) {
      found = &o;
      break;
    }
  if (!found)
    badVariable(
        out.variable, out.value,
        "not an operation and a number: AND, OR, MOD or DIV (or &, |, %, /), then a value, as 'AND 0x7' or '%8'");
  out.op = found->op;
  text = trimmed(text.substr(std::string(found->name).size()));
  std::optional<uint64_t> value;
  if (startsWith(text, "0b"))
    value = digits(text.substr(2), 2);
  else if (startsWith(text, "0x"))
    value = digits(text.substr(2), 16);
  else if (text.size() > 1 && text.front() == '0')
    value = digits(text.substr(1), 8);
  else
    value = digits(text, 10);
  if (!value)
    badVariable(
        out.variable, out.value,
        "the value after " + std::string(found->name) +
            " is not a number (decimal, 0x hexadecimal, 0b binary; a leading 0 is octal, as nccl-tests reads it)");
  if (*value == 0 && (out.op == GroupSplit::Op::Mod || out.op == GroupSplit::Op::Div))
    badVariable(out.variable, out.value, std::string(found->name) + " 0 divides by zero");
  out.operand = *value;
  return out;
}

std::vector<int> groupColours(const GroupSplit& split, const World& world) {
  std::vector<int> colours(size_t(world.nranks()));
  for (int rank = 0; rank < world.nranks(); rank++)
    colours[size_t(rank)] = split.colour(world.launcher == "local" ? rank : rank / world.ranksPerProcess);
  return colours;
}

}  // namespace tutti::perf
