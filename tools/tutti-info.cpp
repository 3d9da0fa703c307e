// tutti-info: the library's version, which device backends this machine can use, and (--env)
// every parameter tutti reads, with its value and where that value came from.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/params.h"
#include "base/tunables.h"
#include "nccl.h"
#include "runtime/device_backend.h"
#include "tutti/tutti.h"

extern char** environ;

namespace {

namespace params = tutti::params;

void printUsage(FILE* out) {
  std::fprintf(out,
               "Usage: tutti-info [--env] [--help]\n"
               "  (no option)  the library's version and the device backends this machine can use\n"
               "  --env        every parameter tutti reads (NCCL_* and TUTTI_* variables): its value,\n"
               "               whether that came from the environment or the default, and what it does\n"
               "  --help       this text\n");
}

int printVersion() {
  int versionCode = 0;
  ncclGetVersion(&versionCode);
  std::printf("%s\n", tuttiVersionString());
  std::printf("NCCL API version code %d (ncclGetVersion)\n\n", versionCode);

  std::printf("Device backends:\n");
  std::printf("  host  available (host buffers, host streams run by worker threads)\n");
  int devices = tutti::cudaDeviceCount();
#ifdef TUTTI_HAVE_CUDA
  const char* built = "CUDA parts built";
#else
  const char* built = "built without CUDA";
#endif
  if (devices > 0)
    std::printf("  cuda  %d CUDA device(s) found; %s; the CUDA device backend is not implemented yet\n", devices, built);
  else
    std::printf("  cuda  not available: no CUDA driver or device found (%s)\n", built);

  std::string wanted = tutti::tunables::kDevice.text();
  try {
    std::printf("\nTUTTI_DEVICE=%s selects: %s\n", wanted.c_str(), tutti::chooseDeviceBackend("tutti-info").c_str());
  } catch (const tutti::Error& error) {
    std::printf("\nTUTTI_DEVICE=%s selects nothing: %s\n", wanted.c_str(), error.what());
  }
  std::printf("Run 'tutti-info --env' to list every parameter.\n");
  return 0;
}

struct Row {
  std::string name, value, source, help;
};

// The parameter table; returns 1 when a value set in the environment does not parse, so scripts
// can check a job's environment before launching it.
int printEnvironment() {
  std::vector<Row> rows;
  int status = 0;
  for (const params::Param* param : params::registry().all()) {
    Row row{param->name(), param->text(), param->source(),
            std::string("(") + params::typeName(param->type()) + ") " + param->help()};
    try {
      // Show what a suffix or a word meant: "4M = 4194304", "yes = 1".
      std::string parsed = param->parsedText();
      if (row.value != parsed) row.value += " = " + parsed;
    } catch (const tutti::Error& error) {
      row.value += "  INVALID";
      row.help = error.what();
      status = 1;
    }
    if (row.value.empty()) row.value = "\"\"";
    rows.push_back(row);
  }
  // Variables that look like ours but are not in the registry: usually typos.
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view text = *entry;
    if (!text.starts_with("NCCL_") && !text.starts_with("TUTTI_")) continue;
    std::string name(text.substr(0, text.find('=')));
    if (params::registry().find(name) == nullptr)
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
  auto print = [&](const Row& row) {
    std::printf("%-*s  %-*s  %-*s  %s\n", int(nameWidth), row.name.c_str(), int(valueWidth), row.value.c_str(),
                int(sourceWidth), row.source.c_str(), row.help.c_str());
  };
  print(header);
  for (const Row& row : rows) print(row);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  bool env = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--env") == 0) {
      env = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      printUsage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "tutti-info: unknown option %s\n", argv[i]);
      printUsage(stderr);
      return 2;
    }
  }
  try {
    return env ? printEnvironment() : printVersion();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tutti-info: %s\n", error.what());
    return 1;
  }
}
