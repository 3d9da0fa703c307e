// Tests of the parameter handles and their registry: the catalogue, parsing of every type, errors
// that name the variable, and a catalogue that must not load.
//
// A misspelt parameter is a compile error: code reads tunables::kNsteps, never a string, so there
// is no "unknown name" case left to test at run time.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/params.h"
#include "base/tunables.h"
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

// Runs body in a forked child and reports how it ended and what it wrote to stderr: for what must
// abort the process.
struct ChildEnd {
  bool aborted = false;
  std::string stderrText;
};
ChildEnd inChild(void (*body)()) {
  int pipeFds[2];
  REQUIRE(pipe(pipeFds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(pipeFds[1], 2);
    close(pipeFds[0]);
    body();
    _exit(0);
  }
  close(pipeFds[1]);
  ChildEnd end;
  char buffer[512];
  for (ssize_t n; (n = read(pipeFds[0], buffer, sizeof buffer)) > 0;) end.stderrText.append(buffer, size_t(n));
  close(pipeFds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  end.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  return end;
}

}  // namespace

using tutti::ErrorCode;
namespace params = tutti::params;
namespace tunables = tutti::tunables;

TEST_CASE("params: the catalogue has unique names, help and parseable defaults", "[params]") {
  std::set<std::string> names;
  for (const params::Param* param : params::registry().all()) {
    INFO(param->name());
    CHECK(names.insert(param->name()).second);
    std::string name = param->name();
    CHECK((name.starts_with("NCCL_") || name.starts_with("TUTTI_")));
    CHECK(std::string(param->help()).size() > 10);
    CHECK(params::registry().find(name) == param);
    ScopedEnv unset(param->name(), nullptr);
    CHECK_FALSE(param->isSet());
    CHECK(std::string(param->source()) == "default");
    CHECK(param->text() == param->defaultText());
    CHECK_NOTHROW(param->parsedText());
  }
  for (const char* required : {"NCCL_DEBUG",       "NCCL_DEBUG_SUBSYS",  "NCCL_DEBUG_FILE",
                               "NCCL_COMM_ID",     "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY",
                               "NCCL_BUFFSIZE",    "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
                               "NCCL_SHM_DISABLE", "NCCL_P2P_DISABLE",   "NCCL_COMM_BLOCKING",
                               "NCCL_HOSTID",      "TUTTI_DEVICE",       "TUTTI_BOOTSTRAP_TIMEOUT",
                               "TUTTI_TIMEOUT",    "TUTTI_NSTEPS",       "TUTTI_NTHREADS",
                               "TUTTI_SPIN",       "TUTTI_YIELD"})
    CHECK(names.count(required) == 1);
  CHECK(params::registry().find("NCCL_NO_SUCH_THING") == nullptr);
}

TEST_CASE("params: the catalogue lists NCCL's names first, then ours", "[params]") {
  const auto& all = params::registry().all();
  REQUIRE(!all.empty());
  CHECK(std::string(all.front()->name()) == "NCCL_DEBUG");
  bool ours = false;
  for (const params::Param* param : all) {
    INFO(param->name());
    if (std::string(param->name()).starts_with("TUTTI_")) ours = true;
    CHECK(std::string(param->name()).starts_with(ours ? "TUTTI_" : "NCCL_"));
  }
}

TEST_CASE("params: defaults as documented", "[params]") {
  ScopedEnv a("NCCL_BUFFSIZE", nullptr), b("TUTTI_TIMEOUT", nullptr), c("NCCL_COMM_BLOCKING", nullptr),
      d("TUTTI_DEVICE", nullptr), e("NCCL_DEBUG_SUBSYS", nullptr);
  CHECK(tunables::kBuffsize.get() == 4 * 1024 * 1024);
  CHECK(tunables::kTimeout.get() == 300);
  CHECK(tunables::kCommBlocking.get());
  CHECK(tunables::kDevice.get() == "auto");
  CHECK(tunables::kDebugSubsys.get() == "INIT,BOOTSTRAP,ENV");
  CHECK(tunables::kDebugSubsys.defaultText() == "INIT,BOOTSTRAP,ENV");
  CHECK(tunables::kBuffsize.type() == params::Type::Size);
  CHECK(std::string(params::typeName(tunables::kShmDisable.type())) == "bool");
}

TEST_CASE("params: values are read from the environment on every call", "[params]") {
  {
    ScopedEnv set("TUTTI_SPIN", "17");
    CHECK(tunables::kSpin.isSet());
    CHECK(std::string(tunables::kSpin.source()) == "environment");
    CHECK(tunables::kSpin.get() == 17);
    setenv("TUTTI_SPIN", "-5", 1);
    CHECK(tunables::kSpin.get() == -5);
  }
  ScopedEnv unset("TUTTI_SPIN", nullptr);
  CHECK(tunables::kSpin.get() == 200);
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
    CHECK(tunables::kNsteps.get() == c.value);
  }
  for (const char* bad : {"abc", "12x", "1.5", "-", "99999999999999999999", "4K"}) {
    ScopedEnv set("TUTTI_NSTEPS", bad);
    INFO(bad);
    CHECK(messageOf([] { tunables::kNsteps.get(); }) == std::string("TUTTI_NSTEPS=") + bad + ": not an integer");
  }
}

TEST_CASE("params: sizes accept binary K, M and G suffixes", "[params]") {
  struct Case {
    const char* text;
    int64_t value;
  };
  for (Case c :
       {Case{"4194304", 4194304}, Case{"4K", 4096}, Case{"4k", 4096}, Case{"2M", 2 << 20}, Case{"1G", int64_t(1) << 30},
        Case{"3MB", 3 << 20}, Case{"3MiB", 3 << 20}, Case{"0", 0}, Case{"16G", int64_t(16) << 30}}) {
    ScopedEnv set("NCCL_BUFFSIZE", c.text);
    INFO(c.text);
    CHECK(tunables::kBuffsize.get() == c.value);
  }
  {
    ScopedEnv set("NCCL_BUFFSIZE", "4M");
    CHECK(tunables::kBuffsize.text() == "4M");
    CHECK(tunables::kBuffsize.parsedText() == "4194304");
  }
  {
    ScopedEnv set("NCCL_BUFFSIZE", "abc");
    CHECK(codeOf([] { tunables::kBuffsize.get(); }) == ErrorCode::InvalidUsage);
    CHECK(messageOf([] { tunables::kBuffsize.get(); }) ==
          "NCCL_BUFFSIZE=abc: not a size (expected bytes, optionally with K, M or G)");
  }
  for (const char* bad : {"-1", "4T", "4KK", "K", "4 K B", "1.5M"}) {
    ScopedEnv set("NCCL_BUFFSIZE", bad);
    INFO(bad);
    CHECK(codeOf([] { tunables::kBuffsize.get(); }) == ErrorCode::InvalidUsage);
  }
  ScopedEnv huge("NCCL_BUFFSIZE", "9223372036854775807G");
  CHECK(messageOf([] { tunables::kBuffsize.get(); }).starts_with("NCCL_BUFFSIZE=9223372036854775807G: "));
}

TEST_CASE("params: booleans", "[params]") {
  for (const char* yes : {"1", "true", "TRUE", "Yes", "on"}) {
    ScopedEnv set("NCCL_SHM_DISABLE", yes);
    INFO(yes);
    CHECK(tunables::kShmDisable.get());
    CHECK(tunables::kShmDisable.parsedText() == "1");
  }
  for (const char* no : {"0", "false", "No", "OFF", " 0 "}) {
    ScopedEnv set("NCCL_SHM_DISABLE", no);
    INFO(no);
    CHECK_FALSE(tunables::kShmDisable.get());
  }
  ScopedEnv set("NCCL_SHM_DISABLE", "maybe");
  CHECK(messageOf([] { tunables::kShmDisable.get(); }) ==
        "NCCL_SHM_DISABLE=maybe: not a boolean (expected 0, 1, true, false, yes or no)");
}

TEST_CASE("params: a string with allowed values refuses any other", "[params]") {
  for (const char* value : {"descriptor", "handle"}) {
    ScopedEnv set("TUTTI_EMULATED_IPC", value);
    CHECK(tunables::kEmulatedIpc.get() == value);
  }
  ScopedEnv set("TUTTI_EMULATED_IPC", "fd");
  CHECK(codeOf([] { tunables::kEmulatedIpc.get(); }) == ErrorCode::InvalidUsage);
  CHECK(messageOf([] { tunables::kEmulatedIpc.get(); }) == "TUTTI_EMULATED_IPC=fd: expected descriptor or handle");
  CHECK(tunables::kEmulatedIpc.text() == "fd");  // what the user wrote, for tutti-info to show
  // The list is there through the base class too, for the generated environment page; a handle
  // without one has an empty list (TUTTI_DEVICE's names are the backend registry's to check).
  const params::Param& ipc = tunables::kEmulatedIpc;
  CHECK(ipc.allowed() == std::vector<std::string>{"descriptor", "handle"});
  const params::Param& nsteps = tunables::kNsteps;
  CHECK(nsteps.allowed().empty());
}

TEST_CASE("params: an empty numeric value counts as unset, an empty string is a value", "[params]") {
  ScopedEnv size("NCCL_BUFFSIZE", "");
  CHECK_FALSE(tunables::kBuffsize.isSet());
  CHECK(tunables::kBuffsize.get() == 4194304);
  ScopedEnv debug("NCCL_DEBUG_FILE", "");
  CHECK(tunables::kDebugFile.isSet());
  CHECK(tunables::kDebugFile.get().empty());
  // With allowed values the empty string is none of them: it counts as unset, as a number's does.
  ScopedEnv ipc("TUTTI_EMULATED_IPC", "");
  CHECK_FALSE(tunables::kEmulatedIpc.isSet());
  CHECK(tunables::kEmulatedIpc.get() == "descriptor");
}

TEST_CASE("params: a registry refuses a second parameter of one name and malformed names", "[params]") {
  params::Registry mine;
  params::Int first{"TUTTI_TEST_ONLY", 1, "a parameter of this test's own registry", mine};
  CHECK(mine.find("TUTTI_TEST_ONLY") == &first);
  CHECK(params::registry().find("TUTTI_TEST_ONLY") == nullptr);
  CHECK(codeOf([&] { mine.add(first); }) == ErrorCode::Internal);
  CHECK(messageOf([&] { mine.add(first); }) == "parameter TUTTI_TEST_ONLY is declared twice");
  // A catalogue handle is welcome in another registry, once.
  mine.add(tunables::kNsteps);
  CHECK(codeOf([&] { mine.add(tunables::kNsteps); }) == ErrorCode::Internal);
  CHECK(mine.all().size() == 2);
}

TEST_CASE("params: a handle the catalogue must not have stops the process as it loads", "[params]") {
  ChildEnd duplicate = inChild([] { params::Int again{"TUTTI_NSTEPS", 8, "a second TUTTI_NSTEPS"}; });
  CHECK(duplicate.aborted);
  CHECK_THAT(duplicate.stderrText, Catch::Contains("parameter TUTTI_NSTEPS is declared twice"));
  for (auto body : {+[] {
                      params::Int bad{"TUTTI_lower", 1, "lower-case letters"};
                    },
                    +[] {
                      params::Bool bad{"OTHER_NAME", false, "neither NCCL_ nor TUTTI_"};
                    },
                    +[] {
                      params::Size bad{"NCCL_", 0, "nothing after the prefix"};
                    },
                    +[] {
                      params::String bad{"TUTTI_WITH-DASH", "", "a dash"};
                    }}) {
    ChildEnd malformed = inChild(body);
    INFO(malformed.stderrText);
    CHECK(malformed.aborted);
    CHECK_THAT(malformed.stderrText, Catch::Contains("a name must be NCCL_ or TUTTI_ followed by capitals"));
  }
  ChildEnd badDefault = inChild([] {
    params::String bad{"TUTTI_TEST_CHOICE", "c", "a default not allowed", {"a", "b"}};
  });
  CHECK(badDefault.aborted);
  CHECK_THAT(badDefault.stderrText, Catch::Contains("its default 'c' is not among its allowed values"));
}
