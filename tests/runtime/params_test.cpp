// Tests of the parameter registry: defaults, parsing of every type, errors that name the variable.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>

#include "base/error.h"
#include "base/params.h"
#include "tests/common/env_support.h"

namespace {

// Sets (or unsets) one variable for the scope of a test and puts the old value back.
using tutti_test::ScopedEnv;

// The error a call throws; fails the test when it throws nothing.
std::optional<tutti::Error> errorOf(auto&& call) {
  try {
    call();
  } catch (const tutti::Error& error) {
    return error;
  }
  FAIL_CHECK("no tutti::Error was thrown");
  return std::nullopt;
}

tutti::ErrorCode codeOf(auto&& call) {
  auto error = errorOf(call);
  return error ? error->code() : tutti::ErrorCode::Internal;
}

std::string messageOf(auto&& call) {
  auto error = errorOf(call);
  return error ? error->message() : std::string();
}

}  // namespace

using tutti::ErrorCode;
namespace params = tutti::params;

TEST_CASE("params: the registry has unique names, help and parseable defaults", "[params]") {
  std::set<std::string> names;
  for (const params::Param& param : params::all()) {
    INFO(param.name);
    CHECK(names.insert(param.name).second);
    std::string name = param.name;
    CHECK((name.starts_with("NCCL_") || name.starts_with("TUTTI_")));
    CHECK(std::string(param.help).size() > 10);
    ScopedEnv unset(param.name, nullptr);
    CHECK_FALSE(params::isSet(param.name));
    CHECK(std::string(params::source(param.name)) == "default");
    CHECK(params::getString(param.name) == param.defaultValue);
    if (param.type != params::Type::String) CHECK_NOTHROW(params::getInt(param.name));
  }
  for (const char* required : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_COMM_ID",
                               "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_BUFFSIZE",
                               "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_SHM_DISABLE",
                               "NCCL_P2P_DISABLE", "NCCL_COMM_BLOCKING", "NCCL_HOSTID", "TUTTI_DEVICE",
                               "TUTTI_BOOTSTRAP_TIMEOUT", "TUTTI_TIMEOUT", "TUTTI_NSTEPS",
                               "TUTTI_NTHREADS", "TUTTI_SPIN", "TUTTI_YIELD"})
    CHECK(names.count(required) == 1);
}

TEST_CASE("params: defaults as documented", "[params]") {
  ScopedEnv a("NCCL_BUFFSIZE", nullptr), b("TUTTI_TIMEOUT", nullptr), c("NCCL_COMM_BLOCKING", nullptr),
      d("TUTTI_DEVICE", nullptr), e("NCCL_DEBUG_SUBSYS", nullptr);
  CHECK(params::getInt("NCCL_BUFFSIZE") == 4 * 1024 * 1024);
  CHECK(params::getInt("TUTTI_TIMEOUT") == 300);
  CHECK(params::getInt("NCCL_COMM_BLOCKING") == 1);
  CHECK(params::getString("TUTTI_DEVICE") == "auto");
  CHECK(params::getString("NCCL_DEBUG_SUBSYS") == "INIT,BOOTSTRAP,ENV");
}

TEST_CASE("params: values are read from the environment on every call", "[params]") {
  {
    ScopedEnv set("TUTTI_SPIN", "17");
    CHECK(params::isSet("TUTTI_SPIN"));
    CHECK(std::string(params::source("TUTTI_SPIN")) == "environment");
    CHECK(params::getInt("TUTTI_SPIN") == 17);
    setenv("TUTTI_SPIN", "-5", 1);
    CHECK(params::getInt("TUTTI_SPIN") == -5);
  }
  ScopedEnv unset("TUTTI_SPIN", nullptr);
  CHECK(params::getInt("TUTTI_SPIN") == 200);
}

TEST_CASE("params: integers", "[params]") {
  struct Case {
    const char* text;
    int64_t value;
  };
  for (Case c : {Case{"0", 0}, Case{"42", 42}, Case{" 7 ", 7}, Case{"0x10", 16}, Case{"-3", -3},
                 Case{"9223372036854775807", INT64_MAX}}) {
    ScopedEnv set("TUTTI_NSTEPS", c.text);
    INFO(c.text);
    CHECK(params::getInt("TUTTI_NSTEPS") == c.value);
  }
  for (const char* bad : {"abc", "12x", "1.5", "-", "99999999999999999999", "4K"}) {
    ScopedEnv set("TUTTI_NSTEPS", bad);
    INFO(bad);
    CHECK(messageOf([] { params::getInt("TUTTI_NSTEPS"); }) ==
          std::string("TUTTI_NSTEPS=") + bad + ": not an integer");
  }
}

TEST_CASE("params: sizes accept binary K, M and G suffixes", "[params]") {
  struct Case {
    const char* text;
    int64_t value;
  };
  for (Case c : {Case{"4194304", 4194304}, Case{"4K", 4096}, Case{"4k", 4096}, Case{"2M", 2 << 20},
                 Case{"1G", int64_t(1) << 30}, Case{"3MB", 3 << 20}, Case{"3MiB", 3 << 20},
                 Case{"0", 0}, Case{"16G", int64_t(16) << 30}}) {
    ScopedEnv set("NCCL_BUFFSIZE", c.text);
    INFO(c.text);
    CHECK(params::getInt("NCCL_BUFFSIZE") == c.value);
  }
  {
    ScopedEnv set("NCCL_BUFFSIZE", "abc");
    CHECK(codeOf([] { params::getInt("NCCL_BUFFSIZE"); }) == ErrorCode::InvalidUsage);
    CHECK(messageOf([] { params::getInt("NCCL_BUFFSIZE"); }) ==
          "NCCL_BUFFSIZE=abc: not a size (expected bytes, optionally with K, M or G)");
  }
  for (const char* bad : {"-1", "4T", "4KK", "K", "4 K B", "1.5M"}) {
    ScopedEnv set("NCCL_BUFFSIZE", bad);
    INFO(bad);
    CHECK(codeOf([] { params::getInt("NCCL_BUFFSIZE"); }) == ErrorCode::InvalidUsage);
  }
  ScopedEnv huge("NCCL_BUFFSIZE", "9223372036854775807G");
  CHECK(messageOf([] { params::getInt("NCCL_BUFFSIZE"); }).starts_with("NCCL_BUFFSIZE=9223372036854775807G: "));
}

TEST_CASE("params: booleans", "[params]") {
  for (const char* yes : {"1", "true", "TRUE", "Yes", "on"}) {
    ScopedEnv set("NCCL_SHM_DISABLE", yes);
    INFO(yes);
    CHECK(params::getInt("NCCL_SHM_DISABLE") == 1);
  }
  for (const char* no : {"0", "false", "No", "OFF", " 0 "}) {
    ScopedEnv set("NCCL_SHM_DISABLE", no);
    INFO(no);
    CHECK(params::getInt("NCCL_SHM_DISABLE") == 0);
  }
  ScopedEnv set("NCCL_SHM_DISABLE", "maybe");
  CHECK(messageOf([] { params::getInt("NCCL_SHM_DISABLE"); }) ==
        "NCCL_SHM_DISABLE=maybe: not a boolean (expected 0, 1, true, false, yes or no)");
}

TEST_CASE("params: an empty numeric value counts as unset, an empty string is a value", "[params]") {
  ScopedEnv size("NCCL_BUFFSIZE", "");
  CHECK_FALSE(params::isSet("NCCL_BUFFSIZE"));
  CHECK(params::getInt("NCCL_BUFFSIZE") == 4194304);
  ScopedEnv device("TUTTI_DEVICE", "");
  CHECK(params::isSet("TUTTI_DEVICE"));
  CHECK(params::getString("TUTTI_DEVICE").empty());
}

TEST_CASE("params: misuse of the registry is an internal error", "[params]") {
  CHECK(codeOf([] { params::getInt("NCCL_NO_SUCH_THING"); }) == ErrorCode::Internal);
  CHECK(codeOf([] { params::getString("NCCL_NO_SUCH_THING"); }) == ErrorCode::Internal);
  CHECK(codeOf([] { params::isSet("NCCL_NO_SUCH_THING"); }) == ErrorCode::Internal);
  CHECK(messageOf([] { params::getInt("NCCL_NO_SUCH_THING"); }).find("NCCL_NO_SUCH_THING") != std::string::npos);
  CHECK(codeOf([] { params::getInt("TUTTI_DEVICE"); }) == ErrorCode::Internal);
}
