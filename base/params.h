// Typed handles on tunables (the NCCL_* variables tutti honours and the TUTTI_* ones it adds) and
// the registry they join. Each handle is declared once, in base/tunables.h, and read everywhere
// through it: a misspelt name is a compile error, not a lookup that fails at run time. Nothing in
// the library reads getenv() for a tunable any other way.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tutti::params {

enum class Type { Int, Size, Bool, String };

// "int", "size", "bool", "string".
const char* typeName(Type type);
// How a value of the type is written, in one line ("an integer: decimal, or hex with 0x"): the
// parsers' own rules, for the generated environment page.
const char* typeSyntax(Type type);

class Registry;

// The process's registry: every handle of base/tunables.h, in the catalogue's order (for tutti-info
// --env and the README). Made on first use, so a handle may join it from any static initialiser.
Registry& registry();

// What every handle has: a name, a type, a default (as text, as a user would write it) and one line
// of help. Values are read from the environment at every call, so a test (or ncclResetDebugInit)
// sees a change at once; a value that does not parse is an InvalidUsage error naming the variable.
class Param {
 public:
  Param(const Param&) = delete;
  Param& operator=(const Param&) = delete;

  const char* name() const { return name_; }
  Type type() const { return type_; }
  const std::string& defaultText() const { return defaultText_; }
  const char* help() const { return help_; }
  // The only values get() accepts, when the handle has such a list (a String may); empty otherwise.
  virtual const std::vector<std::string>& allowed() const;

  // Set in the environment. A number set to the empty string counts as unset, as in NCCL, and so
  // does a string with a list of allowed values; for other strings the empty value is a value
  // (NCCL_DEBUG= turns logging off).
  bool isSet() const;
  // Where the value comes from: "environment" or "default".
  const char* source() const;
  // The value as the user wrote it: the environment's when set, else the default.
  std::string text() const;
  // The value as the code reads it, written back as text ("4M" gives "4194304", "yes" gives "1");
  // throws as get() does. For tutti-info, which shows both when they differ.
  virtual std::string parsedText() const = 0;

 protected:
  // Joins `into`; aborts the process with a message when the registry refuses (a duplicate or
  // malformed name is a bug in the catalogue, found at load time).
  Param(const char* name, Type type, std::string defaultText, const char* help, Registry& into);
  ~Param() = default;

  const char* environmentValue() const;  // nullptr when unset (see isSet)
  bool emptyMeansUnset_ = true;          // see isSet()

 private:
  const char* name_;
  Type type_;
  std::string defaultText_;
  const char* help_;
};

// An integer: decimal, or 0x hex as NCCL accepts.
class Int final : public Param {
 public:
  Int(const char* name, int64_t defaultValue, const char* help, Registry& into = registry());
  int64_t get() const;
  std::string parsedText() const override;
};

// A byte count: an integer with an optional K, M or G suffix (binary; "4MB" and "4MiB" also mean 4 MiB).
class Size final : public Param {
 public:
  Size(const char* name, int64_t defaultBytes, const char* help, Registry& into = registry());
  int64_t get() const;
  std::string parsedText() const override;
};

// 1, true, yes, on / 0, false, no, off (any case).
class Bool final : public Param {
 public:
  Bool(const char* name, bool defaultValue, const char* help, Registry& into = registry());
  bool get() const;
  std::string parsedText() const override;
};

// Text; with a list of allowed values, get() refuses any other (compared exactly).
class String final : public Param {
 public:
  String(const char* name, const char* defaultValue, const char* help, std::vector<std::string> allowed = {},
         Registry& into = registry());
  std::string get() const;
  std::string parsedText() const override;
  const std::vector<std::string>& allowed() const override { return allowed_; }

 private:
  std::vector<std::string> allowed_;
};

// A set of parameters, in the order they joined. The process has one (registry()), which every
// handle joins unless told otherwise; tests make their own to try what the catalogue must not do.
class Registry {
 public:
  // Adds `param`. Throws Error(Internal) naming it when its name is not NCCL_[A-Z0-9_]+ or
  // TUTTI_[A-Z0-9_]+, or is already in this registry.
  void add(const Param& param);
  const std::vector<const Param*>& all() const { return params_; }
  // nullptr when no parameter has that name.
  const Param* find(std::string_view name) const;

 private:
  std::vector<const Param*> params_;
};

// The table tutti-info --env and ncclParamDumpAll print: a header, then one line per parameter of
// the process's registry (name, value as written and as read where they differ, where it came
// from, type and help), then the NCCL_* and TUTTI_* variables of the environment that no parameter
// reads (usually typos). *invalid, when given, says whether a value set did not parse (its line
// says INVALID and why).
std::string environmentTable(bool* invalid = nullptr);

}  // namespace tutti::params
