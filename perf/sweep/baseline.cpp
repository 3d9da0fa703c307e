// Reading a JSON report back as --compare's baseline, and the lines that mark the sizes slower than it (baseline.h).
#include "perf/sweep/baseline.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <variant>

#include "perf/sweep/error.h"
#include "perf/sweep/text_format.h"

namespace tutti::perf {
namespace {

// A minimal JSON reader, enough for reports this tool wrote (objects, arrays, strings, numbers, literals).
struct JsonValue {
  std::variant<std::nullptr_t, bool, double, std::string, std::vector<JsonValue>,
               std::vector<std::pair<std::string, JsonValue>>>
      value;
  const JsonValue* member(const std::string& key) const {
    if (auto* object = std::get_if<std::vector<std::pair<std::string, JsonValue>>>(&value))
      for (const auto& [k, v] : *object)
        if (k == key) return &v;
    return nullptr;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : text_(text) {}
  JsonValue document() {
    JsonValue v = parse(0);
    skipSpace();
    if (pos_ != text_.size()) fail("text after the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw Error(ErrorCode::InvalidArgument, "reading the baseline JSON at byte " + std::to_string(pos_) + ": " + why);
  }
  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) pos_++;
  }
  bool consume(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) return ++pos_, true;
    return false;
  }
  std::string parseString() {
    if (!consume('"')) fail("expected a string");
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\' && pos_ < text_.size()) {
        char e = text_[pos_++];
        if (e == 'u') {
          std::string hex = text_.substr(pos_, 4);
          if (hex.size() != 4 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail("bad \\u escape");
          out += char(std::strtol(hex.c_str(), nullptr, 16));
          pos_ += 4;
        } else {
          out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
      } else {
        out += c;
      }
    }
    if (!consume('"')) fail("unterminated string");
    return out;
  }
  JsonValue parse(int depth) {
    if (depth > 64) fail("nested too deeply");
    skipSpace();
    if (pos_ >= text_.size()) fail("unexpected end");
    char c = text_[pos_];
    if (c == '{') {
      pos_++;
      std::vector<std::pair<std::string, JsonValue>> members;
      if (consume('}')) return {members};
      do {
        std::string key = parseString();
        if (!consume(':')) fail("expected ':'");
        members.emplace_back(key, parse(depth + 1));
      } while (consume(','));
      if (!consume('}')) fail("expected '}'");
      return {members};
    }
    if (c == '[') {
      pos_++;
      std::vector<JsonValue> items;
      if (consume(']')) return {items};
      do items.push_back(parse(depth + 1));
      while (consume(','));
      if (!consume(']')) fail("expected ']'");
      return {items};
    }
    if (c == '"') return {parseString()};
    for (const char* literal : {"true", "false", "null"})
      if (text_.compare(pos_, std::strlen(literal), literal) == 0) {
        pos_ += std::strlen(literal);
        if (literal[0] == 'n') return {nullptr};
        return {literal[0] == 't'};
      }
    char* end = nullptr;
    double number = std::strtod(text_.c_str() + pos_, &end);
    if (end == text_.c_str() + pos_) fail("unexpected character");
    pos_ = size_t(end - text_.c_str());
    return {number};
  }

  const std::string& text_;
  size_t pos_ = 0;
};

[[noreturn]] void badField(const std::string& source, const std::string& field, const std::string& why) {
  throw Error(ErrorCode::InvalidArgument, source + ": field " + field + " " + why);
}

}  // namespace

Baseline readBaseline(const std::string& jsonText, const std::string& source) {
  JsonValue document;
  try {
    document = JsonReader(jsonText).document();
  } catch (const Error& error) {
    throw Error(ErrorCode::InvalidArgument, source + ": " + error.message());
  }
  // A whole number in range, written as a number or (nccl-tests) as a string.
  auto integer = [&](const JsonValue* v, const std::string& field, double low, double high) -> double {
    double value = NAN;
    if (auto* d = std::get_if<double>(&v->value)) value = *d;
    if (auto* s = std::get_if<std::string>(&v->value)) {
      char* end = nullptr;
      value = std::strtod(s->c_str(), &end);
      if (s->empty() || *end != '\0') badField(source, field, "is \"" + *s + "\", not a number");
    }
    if (!(value >= low && value <= high && value == std::floor(value)))
      badField(source, field, "must be a whole number from " + printf1("%.0f", low) + " to " + printf1("%.0f", high));
    return value;
  };
  auto text = [&](const JsonValue* v, const std::string& field) -> std::string {
    if (!v) return "";
    if (auto* s = std::get_if<std::string>(&v->value)) return *s;
    badField(source, field, "must be a string");
  };
  auto time = [&](const JsonValue* placement, const std::string& field) -> double {
    const JsonValue* t = placement ? placement->member("time") : nullptr;
    if (!t || std::holds_alternative<std::nullptr_t>(t->value)) return NAN;
    if (auto* d = std::get_if<double>(&t->value)) return *d;
    badField(source, field + ".time", "must be a number");
  };
  Baseline baseline;
  baseline.collective = text(document.member("collective"), "\"collective\"");
  const JsonValue* config = document.member("config");
  if (const JsonValue* nranks = config ? config->member("nranks") : nullptr)
    baseline.nranks = int(integer(nranks, "config.nranks", 1, 1 << 24));
  else if (const JsonValue* devices = document.member("devices"))
    if (auto* list = std::get_if<std::vector<JsonValue>>(&devices->value)) baseline.nranks = int(list->size());
  if (const JsonValue* fingerprint = document.member("fingerprint"))
    if (const JsonValue* split = fingerprint->member("split");
        split && !std::holds_alternative<std::nullptr_t>(split->value))
      baseline.split = text(split->member("setting"), "fingerprint.split.setting");
  const JsonValue* results = document.member("results");
  auto* list = results ? std::get_if<std::vector<JsonValue>>(&results->value) : nullptr;
  if (!list) throw Error(ErrorCode::InvalidArgument, source + ": no \"results\" list");
  for (size_t i = 0; i < list->size(); i++) {
    const JsonValue& row = (*list)[i];
    std::string where = "results[" + std::to_string(i) + "].";
    const JsonValue* root = row.member("root");
    const JsonValue* size = row.member("size");
    if (!size) badField(source, where + "size", "is missing");
    BaselineKey key{text(row.member("type"), where + "type"), text(row.member("redop"), where + "redop"),
                    root ? int(integer(root, where + "root", -1, 1 << 24)) : -1,
                    size_t(integer(size, where + "size", 0, 1e18))};
    baseline.times[key] = {time(row.member("out_of_place"), where + "out_of_place"),
                           time(row.member("in_place"), where + "in_place")};
  }
  return baseline;
}

std::string compareLines(const std::vector<ResultRow>& rows,
                         const std::map<BaselineKey, std::pair<double, double>>& baseline, double threshold,
                         int* slower) {
  std::string out;
  *slower = 0;
  int compared = 0;
  for (const ResultRow& row : rows) {
    auto found = baseline.find({row.type, row.redop, row.root, row.bytes});
    if (found == baseline.end()) continue;
    compared++;
    const char* placements[] = {"out-of-place", "in-place"};
    double base[] = {found->second.first, found->second.second};
    double now[] = {row.outOfPlace.timeUs, row.inPlace.timeUs};
    for (int p = 0; p < 2; p++) {
      if (!(base[p] > 0)) continue;
      double change = now[p] / base[p] - 1.0;
      if (change > threshold) {
        (*slower)++;
        out += printf1("# compare: SLOWER %12zu B %8s %6s root %2d %-12s %10.2f us vs baseline %10.2f us (%+.1f%%)\n",
                       row.bytes, row.type.c_str(), row.redop.c_str(), row.root, placements[p], now[p], base[p],
                       change * 100);
      }
    }
  }
  out += printf1("# compare: %d sizes compared with the baseline, %d measurements slower by more than %.0f%%\n",
                 compared, *slower, threshold * 100);
  return out;
}

}  // namespace tutti::perf
