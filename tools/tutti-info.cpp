// tutti-info: the library's version, which device backends this machine can use, (--env) every
// parameter tutti reads, with its value and where that value came from, and (--env --markdown)
// the page docs/environment.md, made from the registry's defaults alone.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/params.h"
#include "base/tunables.h"
#include "kernels/backend.h"
#include "nccl.h"
#include "tutti/tutti.h"

namespace {

namespace params = tutti::params;

void printUsage(FILE* out) {
  std::fprintf(out,
               "Usage: tutti-info [--env [--markdown]] [--help]\n"
               "  (no option)         the library's version and the device backends this machine can use\n"
               "  --env               every parameter tutti reads (NCCL_* and TUTTI_* variables): its value,\n"
               "                      whether that came from the environment or the default, and what it does\n"
               "  --env --markdown    a Markdown page of every parameter with its type, default, allowed\n"
               "                      values and help; defaults only, never this environment's values, so\n"
               "                      it is the same on every machine (it is docs/environment.md)\n"
               "  --help              this text\n");
}

int printVersion() {
  int versionCode = 0;
  ncclGetVersion(&versionCode);
  std::printf("%s\n", tuttiVersionString());
  std::printf("NCCL API version code %d (ncclGetVersion)\n\n", versionCode);

  std::printf("Device backends:\n");
  std::printf("  host  available (host buffers, host streams run by worker threads)\n");
  int devices = tutti::kern::backendDevices("cuda");
#ifdef TUTTI_HAVE_CUDA
  const char* built = "CUDA parts built";
#else
  const char* built = "built without CUDA";
#endif
  if (devices > 0)
    std::printf(
        "  cuda  %d CUDA device(s) found; %s; the cuda backend is built, but has not yet run on a GPU (README.md, Not "
        "yet)\n",
        devices, built);
  else
    std::printf("  cuda  not available: no CUDA driver or device found (%s)\n", built);

  std::string wanted = tutti::tunables::kDevice.text();
  try {
    std::printf("\nTUTTI_DEVICE=%s selects: %s\n", wanted.c_str(), tutti::kern::chooseBackend("tutti-info").c_str());
  } catch (const tutti::Error& error) {
    std::printf("\nTUTTI_DEVICE=%s selects nothing: %s\n", wanted.c_str(), error.what());
  }
  std::printf("Run 'tutti-info --env' to list every parameter.\n");
  return 0;
}

// The parameter table (also what ncclParamDumpAll prints); returns 1 when a value set in the
// environment does not parse, so scripts can check a job's environment before launching it.
int printEnvironment() {
  bool invalid = false;
  std::fputs(params::environmentTable(&invalid).c_str(), stdout);
  return invalid ? 1 : 0;
}

// --- --env --markdown ---------------------------------------------------------------------------

// Help text as Markdown: a word with '_' in it (NCCL_NSOCKS_PERTHREAD, ncclConfig_t.blocking) goes
// in a code span, where its underscores mean nothing; elsewhere the characters that Markdown or a
// table cell would read are escaped.
std::string markdownText(std::string_view text) {
  auto isWordChar = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  };
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (isWordChar(text[i])) {
      size_t end = i;
      while (end < text.size() && isWordChar(text[end])) ++end;
      std::string_view word = text.substr(i, end - i);
      size_t bodyLength = word.size();
      while (bodyLength > 0 && word[bodyLength - 1] == '.') --bodyLength;  // a sentence's full stop
      std::string_view body = word.substr(0, bodyLength);
      if (body.find('_') != std::string_view::npos)
        out += "`" + std::string(body) + "`";
      else
        out += body;
      out += word.substr(body.size());
      i = end;
      continue;
    }
    char c = text[i++];
    if (c == '|' || c == '*' || c == '\\' || c == '`' || c == '[' || c == ']') out += '\\';
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

// A default as the page shows it: "unset" for an empty one; a byte count also in K/M/G.
std::string markdownDefault(const params::Param& param) {
  const std::string& text = param.defaultText();
  if (text.empty()) return "unset";
  std::string shown = "`" + text + "`";
  if (param.type() == params::Type::Size) {
    int64_t bytes = std::stoll(text);
    const char* units[] = {"GiB", "MiB", "KiB"};
    for (int i = 0; i < 3; ++i) {
      int shift = 30 - 10 * i;
      if (bytes > 0 && bytes % (int64_t(1) << shift) == 0) {
        shown += " (" + std::to_string(bytes >> shift) + " " + units[i] + ")";
        break;
      }
    }
  }
  return shown;
}

void printMarkdownTable(std::string_view prefix) {
  std::printf("| Variable | Type | Default | Description |\n");
  std::printf("|---|---|---|---|\n");
  for (const params::Param* param : params::registry().all()) {
    if (!std::string_view(param->name()).starts_with(prefix)) continue;
    std::string description = markdownText(param->help());
    const std::vector<std::string>& allowed = param->allowed();
    for (size_t i = 0; i < allowed.size(); ++i) description += (i == 0 ? "<br>One of: `" : ", `") + allowed[i] + "`";
    std::printf("| `%s` | %s | %s | %s |\n", param->name(), params::typeName(param->type()),
                markdownDefault(*param).c_str(), description.c_str());
  }
}

// The page docs/environment.md: made from the registry alone (names, types, defaults, allowed
// values, help), in the registry's order, so it is the same on every machine and in every
// environment. A test compares the checked-in page with this output.
int printMarkdown() {
  std::printf(
      "# Environment variables\n"
      "\n"
      "This page is generated by `tutti-info --env --markdown`; do not edit it. It lists every\n"
      "parameter tutti reads, from the catalogue in `base/tunables.cpp`: change the catalogue, then\n"
      "regenerate the page with `build/tools/tutti-info --env --markdown > docs/environment.md` (a test\n"
      "fails while the two differ). Defaults are shown, never a machine's values: `tutti-info --env`\n"
      "prints the values in effect where it runs, where each came from, and flags `NCCL_*` and\n"
      "`TUTTI_*` variables that tutti does not read (usually typos).\n"
      "\n"
      "The `NCCL_*` variables are NCCL's own, with NCCL's syntax (in lists, `^` excludes and `=`\n"
      "matches exactly); tutti's own start with `TUTTI_`. A value that does not parse is an error\n"
      "naming the variable, never silently replaced by the default.\n"
      "\n"
      "## Types\n"
      "\n"
      "| Type | Written as |\n"
      "|---|---|\n");
  for (params::Type type : {params::Type::Int, params::Type::Size, params::Type::Bool, params::Type::String})
    std::printf("| %s | %s |\n", params::typeName(type), markdownText(params::typeSyntax(type)).c_str());
  std::printf(
      "\n"
      "A number, or a string with a list of allowed values, set to the empty string counts as unset;\n"
      "for other strings the empty value is a value (`NCCL_DEBUG=` turns logging off).\n"
      "\n"
      "## NCCL's variables\n"
      "\n");
  printMarkdownTable("NCCL_");
  std::printf(
      "\n"
      "## tutti's variables\n"
      "\n");
  printMarkdownTable("TUTTI_");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool env = false, markdown = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--env") == 0) {
      env = true;
    } else if (std::strcmp(argv[i], "--markdown") == 0) {
      markdown = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      printUsage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "tutti-info: unknown option %s\n", argv[i]);
      printUsage(stderr);
      return 2;
    }
  }
  if (markdown && !env) {
    std::fprintf(stderr, "tutti-info: --markdown goes with --env\n");
    printUsage(stderr);
    return 2;
  }
  try {
    if (markdown) return printMarkdown();
    return env ? printEnvironment() : printVersion();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tutti-info: %s\n", error.what());
    return 1;
  }
}
