// The parameter registry and the typed handles: reading, parsing and checking values.
#include "base/params.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/text.h"

extern char** environ;

namespace tutti::params {

namespace {

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

[[noreturn]] void throwBadValue(const Param& param, const std::string& value, const std::string& expected) {
  throw Error(ErrorCode::InvalidUsage, std::string(param.name()) + "=" + value + ": " + expected);
}

// strtoll over the whole text (decimal, or 0x hex as NCCL accepts); false when something is
// left over or the value does not fit.
bool parseInteger(std::string_view text, int64_t* out, std::string_view* rest) {
  std::string copy(text);
  if (copy.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(copy.c_str(), &end, 0);
  if (end == copy.c_str() || errno == ERANGE) return false;
  *out = value;
  *rest = text.substr(static_cast<size_t>(end - copy.c_str()));
  return true;
}

int64_t parseInt(const Param& param, const std::string& value) {
  int64_t result = 0;
  std::string_view rest;
  if (!parseInteger(trimmed(value), &result, &rest) || !rest.empty()) throwBadValue(param, value, "not an integer");
  return result;
}

int64_t parseSize(const Param& param, const std::string& value) {
  const char* expected = "not a size (expected bytes, optionally with K, M or G)";
  int64_t number = 0;
  std::string_view rest;
  if (!parseInteger(trimmed(value), &number, &rest) || number < 0) throwBadValue(param, value, expected);
  int shift = 0;
  if (!rest.empty()) {
    switch (std::toupper(static_cast<unsigned char>(rest.front()))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: throwBadValue(param, value, expected);
    }
    rest.remove_prefix(1);
    // "4MB" and "4MiB" mean what the user thinks they mean.
    if (equalsIgnoringCase(rest, "B") || equalsIgnoringCase(rest, "iB")) rest = {};
    if (!rest.empty()) throwBadValue(param, value, expected);
  }
  if (number > (INT64_MAX >> shift)) throwBadValue(param, value, "size too large");
  return number << shift;
}

bool parseBool(const Param& param, const std::string& value) {
  std::string_view text = trimmed(value);
  for (std::string_view yes : {"1", "true", "yes", "on"})
    if (equalsIgnoringCase(text, yes)) return true;
  for (std::string_view no : {"0", "false", "no", "off"})
    if (equalsIgnoringCase(text, no)) return false;
  throwBadValue(param, value, "not a boolean (expected 0, 1, true, false, yes or no)");
}

// "a, b, c or d".
std::string listed(const std::vector<std::string>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
  return text;
}

bool isWellFormedName(std::string_view name) {
  std::string_view rest;
  if (name.starts_with("NCCL_"))
    rest = name.substr(5);
  else if (name.starts_with("TUTTI_"))
    rest = name.substr(6);
  else
    return false;
  if (rest.empty()) return false;
  for (char c : rest)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

// A handle the catalogue must not have: a bug in tutti, found when the library loads.
[[noreturn]] void refuse(const std::string& why) {
  std::fprintf(stderr, "tutti: the parameter catalogue is broken: %s\n", why.c_str());
  std::abort();
}

}  // namespace

const char* typeName(Type type) {
  switch (type) {
    case Type::Int: return "int";
    case Type::Size: return "size";
    case Type::Bool: return "bool";
    case Type::String: return "string";
  }
  return "?";
}

const char* typeSyntax(Type type) {
  switch (type) {
    case Type::Int: return "an integer: decimal, or hexadecimal with 0x";
    case Type::Size:
      return "a byte count: an integer with an optional K, M or G suffix (binary: 4M, 4MB and 4MiB all mean 4 MiB)";
    case Type::Bool: return "1, true, yes or on; 0, false, no or off (any case)";
    case Type::String: return "text; where a parameter lists its values, exactly one of them";
  }
  return "?";
}

// --- Registry ------------------------------------------------------------------------------------

void Registry::add(const Param& param) {
  std::string_view name = param.name() != nullptr ? param.name() : "";
  if (!isWellFormedName(name))
    throw Error(ErrorCode::Internal, "parameter '" + std::string(name) +
                                         "': a name must be NCCL_ or TUTTI_ followed by capitals, digits and '_'");
  if (find(name) != nullptr) throw Error(ErrorCode::Internal, "parameter " + std::string(name) + " is declared twice");
  params_.push_back(&param);
}

const Param* Registry::find(std::string_view name) const {
  for (const Param* param : params_)
    if (name == param->name()) return param;
  return nullptr;
}

Registry& registry() {
  // Never destroyed: handles in other files may still be read while static destructors run.
  static Registry* processRegistry = new Registry();
  return *processRegistry;
}

// --- Param ---------------------------------------------------------------------------------------

Param::Param(const char* name, Type type, std::string defaultText, const char* help, Registry& into)
    : name_(name), type_(type), defaultText_(std::move(defaultText)), help_(help) {
  try {
    into.add(*this);
  } catch (const Error& error) {
    refuse(error.what());
  }
}

const char* Param::environmentValue() const {
  const char* value = std::getenv(name_);
  if (value != nullptr && value[0] == '\0' && emptyMeansUnset_) return nullptr;
  return value;
}

const std::vector<std::string>& Param::allowed() const {
  static const std::vector<std::string> none;
  return none;
}

bool Param::isSet() const { return environmentValue() != nullptr; }

const char* Param::source() const { return isSet() ? "environment" : "default"; }

std::string Param::text() const {
  const char* value = environmentValue();
  return value != nullptr ? std::string(value) : defaultText_;
}

// --- The typed handles ---------------------------------------------------------------------------

Int::Int(const char* name, int64_t defaultValue, const char* help, Registry& into)
    : Param(name, Type::Int, std::to_string(defaultValue), help, into) {}
int64_t Int::get() const { return parseInt(*this, text()); }
std::string Int::parsedText() const { return std::to_string(get()); }

Size::Size(const char* name, int64_t defaultBytes, const char* help, Registry& into)
    : Param(name, Type::Size, std::to_string(defaultBytes), help, into) {}
int64_t Size::get() const { return parseSize(*this, text()); }
std::string Size::parsedText() const { return std::to_string(get()); }

Bool::Bool(const char* name, bool defaultValue, const char* help, Registry& into)
    : Param(name, Type::Bool, defaultValue ? "1" : "0", help, into) {}
bool Bool::get() const { return parseBool(*this, text()); }
std::string Bool::parsedText() const { return get() ? "1" : "0"; }

String::String(const char* name, const char* defaultValue, const char* help, std::vector<std::string> allowed,
               Registry& into)
    : Param(name, Type::String, defaultValue, help, into), allowed_(std::move(allowed)) {
  emptyMeansUnset_ = !allowed_.empty();
  if (!allowed_.empty() && std::find(allowed_.begin(), allowed_.end(), defaultText()) == allowed_.end())
    refuse(std::string("parameter ") + name + ": its default '" + defaultText() + "' is not among its allowed values");
}

std::string String::get() const {
  std::string value = text();
  if (!allowed_.empty() && std::find(allowed_.begin(), allowed_.end(), value) == allowed_.end())
    throwBadValue(*this, value, "expected " + listed(allowed_));
  return value;
}

std::string String::parsedText() const { return get(); }

// --- The table of every parameter -----------------------------------------------------------------

std::string environmentTable(bool* invalid) {
  struct Row {
    std::string name, value, source, help;
  };
  std::vector<Row> rows;
  if (invalid != nullptr) *invalid = false;
  for (const Param* param : registry().all()) {
    Row row{param->name(), param->text(), param->source(),
            std::string("(") + typeName(param->type()) + ") " + param->help()};
    try {
      // Show what a suffix or a word meant: "4M = 4194304", "yes = 1".
      std::string parsed = param->parsedText();
      if (row.value != parsed) row.value += " = " + parsed;
    } catch (const Error& error) {
      row.value += "  INVALID";
      row.help = error.what();
      if (invalid != nullptr) *invalid = true;
    }
    if (row.value.empty()) row.value = "\"\"";
    rows.push_back(row);
  }
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text = *entry;
    if (!text.starts_with("NCCL_") && !text.starts_with("TUTTI_")) continue;
    std::string name(text.substr(0, text.find('=')));
    if (registry().find(name) == nullptr)
      rows.push_back({name, std::string(text.substr(std::min(text.size(), name.size() + 1))), "environment",
                      "not a parameter tutti reads: ignored"});
  }

  Row header{"NAME", "VALUE", "SOURCE", "HELP"};
  size_t nameWidth = header.name.size(), valueWidth = header.value.size(), sourceWidth = header.source.size();
  for (const Row& row : rows) {
    nameWidth = std::max(nameWidth, row.name.size());
    valueWidth = std::max(valueWidth, row.value.size());
    sourceWidth = std::max(sourceWidth, row.source.size());
  }
  std::string table;
  auto line = [&](const Row& row) {
    auto padded = [](const std::string& text, size_t width) { return text + std::string(width - text.size(), ' '); };
    table += padded(row.name, nameWidth) + "  " + padded(row.value, valueWidth) + "  " +
             padded(row.source, sourceWidth) + "  " + row.help + "\n";
  };
  line(header);
  for (const Row& row : rows) line(row);
  return table;
}

}  // namespace tutti::params
