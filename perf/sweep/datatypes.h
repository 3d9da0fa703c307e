// The data types and reductions a sweep can run, by nccl-tests' names, with value conversions for checking.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nccl.h"

namespace tutti::perf {

struct DataTypeInfo {
  ncclDataType_t type;
  const char* name;  // nccl-tests' name: int8 ... double, bfloat16, f8e4m3, f8e5m2
  size_t size;       // bytes per element
  bool isInteger;
  double epsilon;  // relative rounding of one operation (0 for integers)
};

struct RedOpInfo {
  ncclRedOp_t op;    // ncclNumOps stands for mulsum (a PreMulSum made per communicator)
  const char* name;  // sum prod max min avg mulsum
};

// The types and ops of "-d all" / "-o all", in nccl-tests' order.
const std::vector<DataTypeInfo>& allDataTypes();
const std::vector<RedOpInfo>& allRedOps();

// The selection a -d / -o value means; throws perf::Error on an unknown name.
std::vector<DataTypeInfo> selectDataTypes(const std::string& name);
std::vector<RedOpInfo> selectRedOps(const std::string& name);

// Element index of buffer as a double, and value written into it (rounded to nearest even,
// wrapped for integers, saturated for fp8 e4m3 as CUDA's conversion does).
double readElement(ncclDataType_t type, const void* buffer, size_t index);
void writeElement(ncclDataType_t type, void* buffer, size_t index, double value);

}  // namespace tutti::perf
