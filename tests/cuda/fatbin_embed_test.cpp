// The executor's fat binary as the cuda backend hands it to cuModuleLoadData: the bytes the
// library embeds (cmake/embed_binary.cmake) are exactly those nvcc wrote, in a fat binary's
// header. The emulated driver does not read the image, so only this test sees a wrong embedding
// before a GPU does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" const unsigned char tuttiExecutorFatbin[];
extern "C" const size_t tuttiExecutorFatbinBytes;

TEST_CASE("the embedded executor kernels are nvcc's fat binary, byte for byte", "[cuda][fatbin]") {
  std::ifstream file(TUTTI_TEST_FATBIN_FILE, std::ios::binary);
  REQUIRE(file.good());
  const std::vector<unsigned char> written((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  REQUIRE(written.size() > 16);
  CHECK(tuttiExecutorFatbinBytes == written.size());
  CHECK(reinterpret_cast<uintptr_t>(tuttiExecutorFatbin) % 16 == 0);  // the driver reads its header in place
  uint32_t magic = 0;
  std::memcpy(&magic, tuttiExecutorFatbin, sizeof magic);
  CHECK(magic == 0xBA55ED50u);  // a fat binary's first word
  CHECK(std::memcmp(tuttiExecutorFatbin, written.data(), std::min<size_t>(written.size(), tuttiExecutorFatbinBytes)) ==
        0);
}
