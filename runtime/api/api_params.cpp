// Entry points of NCCL 2.30's parameter API over tutti's parameter catalogue (base/tunables.h):
// every NCCL_* and TUTTI_* parameter tutti reads can be bound, read and listed by its name.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/params.h"
#include "runtime/api/api.h"

using namespace tutti;

// An ncclParamHandle_t is the catalogue's own handle: parameters live as long as the library.
struct ncclParamHandle {};

namespace {

ncclParamHandle_t toHandle(const params::Param* param) {
  return reinterpret_cast<ncclParamHandle_t>(const_cast<params::Param*>(param));
}

// The parameter a handle names; refuses anything ncclParamBind did not hand out.
const params::Param& boundParam(const char* operation, ncclParamHandle_t handle) {
  if (handle == nullptr) throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": the handle is NULL");
  for (const params::Param* param : params::registry().all())
    if (toHandle(param) == handle) return *param;
  throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": the handle is not one from ncclParamBind");
}

const params::Param& namedParam(const char* operation, const char* key) {
  if (key == nullptr) throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": key is NULL");
  const params::Param* param = params::registry().find(key);
  if (param == nullptr)
    throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": \"" + key +
                                                "\" is not a parameter tutti reads (tutti-info --env lists them)");
  return *param;
}

// A number or flag as a 64-bit integer; text is refused.
int64_t integerValue(const char* operation, const params::Param& param) {
  switch (param.type()) {
    case params::Type::Int: return static_cast<const params::Int&>(param).get();
    case params::Type::Size: return static_cast<const params::Size&>(param).get();
    case params::Type::Bool: return static_cast<const params::Bool&>(param).get() ? 1 : 0;
    case params::Type::String: break;
  }
  throw Error(ErrorCode::InvalidArgument,
              std::string(operation) + ": " + param.name() + " is text, not a number (read it with ncclParamGetStr)");
}

template <typename T>
ncclResult_t getInteger(const char* operation, const char* typeName, ncclParamHandle_t handle, T* out) {
  return guard(operation, [&] {
    const params::Param& param = boundParam(operation, handle);
    if (out == nullptr) throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": out is NULL");
    int64_t value = integerValue(operation, param);
    // The 64-bit unsigned read takes every non-negative value; the others must fit their type.
    bool fits = value >= 0 ? uint64_t(value) <= uint64_t(std::numeric_limits<T>::max())
                           : std::numeric_limits<T>::is_signed && value >= int64_t(std::numeric_limits<T>::min());
    if (!fits)
      throw Error(ErrorCode::InvalidArgument, std::string(operation) + ": " + param.name() + " is " +
                                                  std::to_string(value) + ", which does not fit " + typeName);
    *out = static_cast<T>(value);
  });
}

}  // namespace

TUTTI_API ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key) {
  return guard("ncclParamBind", [&] {
    if (out == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclParamBind: out is NULL");
    *out = toHandle(&namedParam("ncclParamBind", key));
  });
}
TUTTI_NCCL_ALIAS(ncclParamBind)

#define TUTTI_PARAM_GETTER(Suffix, Type)                                         \
  TUTTI_API ncclResult_t pncclParamGet##Suffix(ncclParamHandle_t h, Type* out) { \
    return getInteger<Type>("ncclParamGet" #Suffix, #Type, h, out);              \
  }                                                                              \
  TUTTI_NCCL_ALIAS(ncclParamGet##Suffix)
TUTTI_PARAM_GETTER(I8, int8_t)
TUTTI_PARAM_GETTER(I16, int16_t)
TUTTI_PARAM_GETTER(I32, int32_t)
TUTTI_PARAM_GETTER(I64, int64_t)
TUTTI_PARAM_GETTER(U8, uint8_t)
TUTTI_PARAM_GETTER(U16, uint16_t)
TUTTI_PARAM_GETTER(U32, uint32_t)
TUTTI_PARAM_GETTER(U64, uint64_t)
#undef TUTTI_PARAM_GETTER

// The value as the library reads it ("4M" gives "4194304"), valid until the next call on the thread.
TUTTI_API ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out) {
  static thread_local std::string text;
  return guard("ncclParamGetStr", [&] {
    const params::Param& param = boundParam("ncclParamGetStr", h);
    if (out == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclParamGetStr: out is NULL");
    text = param.parsedText();
    *out = text.c_str();
  });
}
TUTTI_NCCL_ALIAS(ncclParamGetStr)

TUTTI_API ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  return guard("ncclParamGet", [&] {
    const params::Param& param = boundParam("ncclParamGet", h);
    if (out == nullptr || len == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclParamGet: out or len is NULL");
    std::vector<unsigned char> bytes;
    if (param.type() == params::Type::String) {
      std::string text = param.parsedText();
      bytes.assign(text.begin(), text.end());
      bytes.push_back(0);
    } else if (param.type() == params::Type::Bool) {
      bytes.push_back(integerValue("ncclParamGet", param) != 0 ? 1 : 0);
    } else {
      int64_t value = integerValue("ncclParamGet", param);
      bytes.resize(sizeof value);
      std::memcpy(bytes.data(), &value, sizeof value);
    }
    *len = int(bytes.size());
    if (maxLen < 0 || size_t(maxLen) < bytes.size())
      throw Error(ErrorCode::InvalidArgument, "ncclParamGet: " + std::string(param.name()) + " takes " +
                                                  std::to_string(bytes.size()) + " bytes; maxLen is " +
                                                  std::to_string(maxLen));
    std::memcpy(out, bytes.data(), bytes.size());
  });
}
TUTTI_NCCL_ALIAS(ncclParamGet)

TUTTI_API ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  static thread_local std::string text;
  return guard("ncclParamGetParameter", [&] {
    if (value == nullptr || valueLen == nullptr)
      throw Error(ErrorCode::InvalidArgument, "ncclParamGetParameter: value or valueLen is NULL");
    *value = nullptr;
    *valueLen = 0;
    text = namedParam("ncclParamGetParameter", key).parsedText();
    *value = text.c_str();
    *valueLen = int(text.size());
  });
}
TUTTI_NCCL_ALIAS(ncclParamGetParameter)

// Every parameter: tutti documents all of its own (docs/environment.md), so none is held back.
TUTTI_API ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  static thread_local std::vector<const char*> names;
  return guard("ncclParamGetAllParameterKeys", [&] {
    if (table == nullptr || tableLen == nullptr)
      throw Error(ErrorCode::InvalidArgument, "ncclParamGetAllParameterKeys: table or tableLen is NULL");
    names.clear();
    for (const params::Param* param : params::registry().all()) names.push_back(param->name());
    *table = names.data();
    *tableLen = int(names.size());
  });
}
TUTTI_NCCL_ALIAS(ncclParamGetAllParameterKeys)

// What tutti-info --env prints, to stdout as NCCL's does.
TUTTI_API void pncclParamDumpAll(void) {
  guard("ncclParamDumpAll", [] {
    std::fputs(params::environmentTable().c_str(), stdout);
    std::fflush(stdout);
  });
}
TUTTI_NCCL_ALIAS(ncclParamDumpAll)
