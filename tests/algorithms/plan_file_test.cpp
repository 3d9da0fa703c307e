// Custom plan files: loading, verification at load, syntax errors, limits, and a fuzz.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <iterator>
#include <random>

#include "algorithms/builtin.h"
#include "algorithms/plan_file.h"
#include "algorithms/verify.h"
#include "base/error.h"

using namespace tutti::plan;

namespace {

std::string dataFile(const std::string& name) {
  return std::string(TUTTI_TEST_SOURCE_DIR) + "/algorithms/data/" + name;
}

std::string readAll(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The message of the InvalidUsage error that parsing throws, or "" if it loads.
std::string parseError(const std::string& text) {
  try {
    parsePlanText(text, "t.plan");
  } catch (const tutti::Error& e) {
    CHECK(e.code() == tutti::ErrorCode::InvalidUsage);
    return e.message();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a valid plan file loads, and its plans are the ones written", "[planfile]") {
  std::vector<Algorithm> loaded = loadPlanFile(dataFile("ring4.plan"));
  REQUIRE(loaded.size() == 1);
  const Algorithm& a = loaded[0];
  CHECK(a.name == "myring");
  CHECK(a.origin == dataFile("ring4.plan"));
  CHECK_FALSE(a.deterministic);
  CHECK(a.colls == std::vector<Coll>{Coll::AllReduce, Coll::AllGather, Coll::Broadcast});
  // The file spells out the built-in ring for four ranks.
  for (int r = 0; r < 4; r++) {
    CHECK(describe(a.build({Coll::AllReduce, r, 4, 0, 0})) == describe(RankPlan{"myring", ringAllReduce(r, 4).lanes}));
    CHECK(describe(a.build({Coll::AllGather, r, 4, 0, 0})) == describe(RankPlan{"myring", ringAllGather(r, 4).lanes}));
    CHECK(describe(a.build({Coll::Broadcast, r, 4, 1, 0})) ==
          describe(RankPlan{"myring", ringBroadcast(r, 4, 1).lanes}));
  }
  CHECK(verifyAlgorithm(a, Coll::AllReduce, 4, 0) == "");
  CHECK(verifyAlgorithm(a, Coll::Broadcast, 4, 1) == "");
}

TEST_CASE("building a plan file's algorithm for another rank count or root is refused", "[planfile]") {
  std::vector<Algorithm> loaded = loadPlanFile(dataFile("ring4.plan"));
  try {
    loaded[0].build({Coll::AllReduce, 0, 8, 0, 0});
    FAIL("no error");
  } catch (const tutti::Error& e) {
    CHECK(e.code() == tutti::ErrorCode::InvalidUsage);
    CHECK(has(e.message(), "ring4.plan is written for 4 ranks, not 8 ranks"));
  }
  CHECK_THROWS_WITH(loaded[0].build({Coll::Broadcast, 0, 4, 2, 0}),
                    Catch::Contains("for 4 ranks and root 1, not 4 ranks and root 2"));
  CHECK_THROWS_WITH(loaded[0].build({Coll::Reduce, 0, 4, 0, 0}), Catch::Contains("has no plan for reduce"));
}

TEST_CASE("a plan file with a wrong plan is rejected with the verifier's reason", "[planfile]") {
  CHECK_THROWS_WITH(
      loadPlanFile(dataFile("wrong_kpre.plan")),
      Catch::Contains("wrong_kpre.plan:5: algorithm badchain allreduce is wrong out of place: rank 0 out[0] of "
                      "tile 0 misses kPre: it was applied on {0,2} of {0-2}"));
  std::vector<Algorithm> chain = loadPlanFile(dataFile("chain3.plan"));
  REQUIRE(chain.size() == 1);
  CHECK(chain[0].deterministic);
  for (int r = 0; r < 3; r++)
    CHECK(describe(chain[0].build({Coll::AllReduce, r, 3, 0, 0})) ==
          describe(RankPlan{"mychain", chainAllReduce(r, 3).lanes}));
}

TEST_CASE("TUTTI_ALGO_FILE's list loads every file", "[planfile]") {
  std::vector<Algorithm> all = loadPlanFiles(dataFile("ring4.plan") + ":" + dataFile("chain3.plan"));
  REQUIRE(all.size() == 2);
  CHECK(all[0].name == "myring");
  CHECK(all[1].name == "mychain");
  CHECK_THROWS_WITH(loadPlanFiles(dataFile("ring4.plan") + ":/nonexistent.plan"),
                    Catch::Contains("cannot open plan file /nonexistent.plan"));
}

TEST_CASE("plan file syntax errors name the line and what was expected", "[planfile]") {
  std::string head = "algorithm x\nranks 2\ncoll allgather\nrank *\n";
  CHECK(has(parseError("ranks 4\n"), "t.plan:1: expected \"algorithm <name>\" first"));
  CHECK(has(parseError("algorithm Bad!\n"), "t.plan:1: expected an algorithm name"));
  CHECK(has(parseError("algorithm x\nranks 5000\n"), "t.plan:2: expected a rank count from 1 to 4096, not 5000"));
  CHECK(has(parseError("algorithm x\nranks two\n"), "t.plan:2: expected a rank count as a number"));
  CHECK(has(parseError("algorithm x\ncoll allreduce\n"), "t.plan:2: expected \"ranks <n>\" before the first \"coll\""));
  CHECK(has(parseError("algorithm x\nranks 2\ncoll allsum\n"), "t.plan:3: expected a collective"));
  CHECK(has(parseError("algorithm x\nranks 2\ncoll allgather\nlane\n"),
            "t.plan:4: expected \"rank <r>\" before \"lane\""));
  CHECK(has(parseError(head + "send src=in\n"), "t.plan:5: expected \"lane ...\" before a step"));
  CHECK(has(parseError(head + "lane kind=bus\n"), "t.plan:5: expected kind=none|ring|direct"));
  CHECK(has(parseError(head + "lane kind=direct\nfly src=in\n"), "t.plan:6: expected a directive"));
  CHECK(has(parseError(head + "lane kind=direct\nsend src=pipe\n"), "t.plan:6: expected a buffer"));
  CHECK(has(parseError(head + "lane kind=direct send=(r+1\n"),
            "t.plan:5: for rank 0: in expression \"(r+1\" at character 5: expected ')'"));
  CHECK(has(parseError(head + "lane kind=direct send=r/0\n"), "division by zero"));
  CHECK(has(parseError(head + "lane kind=direct send=r+5\n"), "t.plan:5: for rank 0: peer \"r+5\" is 5, outside 0..1"));
  CHECK(has(parseError("algorithm x\nranks 2\ncoll allgather\nrank 0\nlane\n"),
            "t.plan:3: algorithm x allgather has no plan for rank 1"));
  CHECK(has(parseError("algorithm x\nranks 2\n"), "algorithm x has no \"coll\" section"));
  CHECK(has(parseError("algorithm x\nranks 2\ncoll allgather\ncoll allgather\n"),
            "t.plan:4: expected one section per collective"));
  CHECK(has(parseError("# nothing\n"), "no algorithm in the file"));
}

TEST_CASE("plan files are bounded: long lines, many steps, deep expressions", "[planfile]") {
  CHECK(has(parseError("algorithm x\n# " + std::string((1 << 20) + 10, 'a') + "\n"),
            "t.plan:2: expected lines of at most 1 MiB"));
  std::string many = "algorithm x\nranks 2\ncoll allgather\nrank *\nlane kind=direct\n";
  for (int i = 0; i < 65537; i++) many += "copy src=in dst=out[r]\n";
  CHECK(has(parseError(many), "expected at most 65536 steps per lane"));
  std::string deep = "algorithm x\nranks 2\ncoll allgather\nrank *\nlane kind=direct send=" + std::string(100, '(') +
                     "r" + std::string(100, ')') + "\n";
  CHECK(has(parseError(deep), "expected less nesting"));
  CHECK(has(parseError("algorithm x\nranks 2\ncoll allgather\nrank *\nlane send=" + std::string(100000, '-') + "1\n"),
            "less nesting"));
}

TEST_CASE("fuzz: mutated and random plan files load or fail cleanly", "[planfile]") {
  const std::string valid = readAll(dataFile("ring4.plan"));
  REQUIRE(!valid.empty());
  std::mt19937 rng(12345);
  const std::string alphabet = "0123456789rn+-*/%()[]=,# \nabcdefghijklmnopqrstuvwxyz*";
  auto pick = [&](size_t n) { return size_t(rng() % std::max<size_t>(n, 1)); };
  auto start = std::chrono::steady_clock::now();
  int loaded = 0, rejected = 0;
  for (int i = 0; i < 4000; i++) {
    std::string text = valid;
    int edits = 1 + int(pick(4));
    for (int e = 0; e < edits; e++) {
      size_t at = pick(text.size());
      switch (pick(5)) {
        case 0: text[at] = alphabet[pick(alphabet.size())]; break;
        case 1: text.erase(at, 1 + pick(8)); break;
        case 2: text.insert(at, 1, alphabet[pick(alphabet.size())]); break;
        case 3: text.insert(at, std::to_string(int(rng() % 70000) - 100)); break;
        default: {  // duplicate a line
          size_t b = text.rfind('\n', at), end = text.find('\n', at);
          b = b == std::string::npos ? 0 : b + 1;
          if (end != std::string::npos) text.insert(b, text.substr(b, end - b + 1));
        }
      }
    }
    if (i % 4 == 3) {  // random bytes
      text.resize(pick(300));
      for (char& c : text) c = char(rng());
    }
    try {
      parsePlanText(text, "fuzz.plan");
      loaded++;
    } catch (const tutti::Error& e) {
      REQUIRE(e.code() == tutti::ErrorCode::InvalidUsage);
      rejected++;
    }
  }
  CHECK(loaded > 0);
  CHECK(rejected > 0);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("a plan file joins steps into one message with the word join", "[planfile][join]") {
  // Bruck's all-gather at 4 ranks: the second round's two blocks travel as one message.
  std::string text =
      "algorithm joinedag\nranks 4\ncoll allgather\nrank *\n"
      "lane kind=direct send=(r-1)%n,(r-2)%n recv=(r+1)%n,(r+2)%n layout=blocks\n"
      "copy src=in dst=out[r]\n"
      "send src=out[r]\nrecv dst=out[(r+1)%n]\n"
      "send src=out[r] to=1 join\nsend src=out[(r+1)%n] to=1\n"
      "recv dst=out[(r+2)%n] from=1 join\nrecv dst=out[(r+3)%n] from=1\n";
  std::vector<Algorithm> loaded = parsePlanText(text, "t.plan");
  REQUIRE(loaded.size() == 1);
  for (int r = 0; r < 4; r++)
    CHECK(describe(loaded[0].build({Coll::AllGather, r, 4, 0, 0})) ==
          describe(RankPlan{"joinedag", bruckAllGather(r, 4).lanes}));
  // Receiving the joined pair as two messages is refused with the verifier's reason.
  std::string split = text;
  split.replace(split.find("from=1 join"), 11, "from=1");
  CHECK(has(parseError(split), "message boundaries must match between sender and receiver"));
}
