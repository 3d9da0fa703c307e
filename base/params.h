// The one registry of tunables: every NCCL_* variable tutti honours and every TUTTI_* one it
// adds, with type, default and one line of help. Nothing reads getenv() for a tunable elsewhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tutti::params {

enum class Type { Int, Size, Bool, String };

struct Param {
  const char* name;
  Type type;
  const char* defaultValue;  // as text, as a user would write it
  const char* help;          // one line
};

// Every registered parameter, in a stable order (for tutti-info --env and the README).
const std::vector<Param>& all();

// Values: the environment if set, else the default. An unregistered name is an Internal
// error; a value that does not parse is an InvalidUsage error naming the variable.
int64_t getInt(const char* name);    // Int, Size (Size accepts K/M/G suffixes) and Bool (0/1)
std::string getString(const char* name);
bool isSet(const char* name);        // set in the environment
// Where the value came from: "environment" or "default".
const char* source(const char* name);

}  // namespace tutti::params
