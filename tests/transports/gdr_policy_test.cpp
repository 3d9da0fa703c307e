// The proxy's GPUDirect RDMA choice (transports/net/gdr_policy.h): NCCL_NET_GDR_LEVEL's names and
// numbers, the path compared with it (unknown counted as SYS), NCCL_NET_GDR_READ for the sending
// side, and what the executor's memory and the backend must be able to do.
#include <catch2/catch.hpp>

#include <string>

#include "tests/common/env_support.h"
#include "transports/net/gdr_policy.h"

namespace tutti::transport::net {
namespace {

using topo::PathType;
using tutti_test::ScopedEnv;

TEST_CASE("gdr: NCCL_NET_GDR_LEVEL takes NCCL's names in any case and its numbers, and refuses the rest",
          "[net][gdr]") {
  CHECK(parseGdrLevel("LOC") == PathType::LOC);
  CHECK(parseGdrLevel("pix") == PathType::PIX);
  CHECK(parseGdrLevel("Pxb") == PathType::PXB);
  CHECK(parseGdrLevel("PHB") == PathType::PHB);
  CHECK(parseGdrLevel("SYS") == PathType::SYS);
  CHECK(parseGdrLevel("0") == PathType::LOC);
  CHECK(parseGdrLevel("1") == PathType::PIX);
  CHECK(parseGdrLevel("2") == PathType::PXB);
  CHECK(parseGdrLevel("3") == PathType::PHB);
  CHECK(parseGdrLevel("4") == PathType::SYS);
  CHECK(parseGdrLevel("7") == PathType::SYS);
  for (const char* bad : {"", "NVL", "-1", "2x", "99999"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parseGdrLevel(bad), Catch::Contains("NCCL_NET_GDR_LEVEL"));
  }
}

TEST_CASE(
    "gdr: device memory where the path is within the level, the memory exports dmabufs and the NIC registers them",
    "[net][gdr]") {
  NetProperties nic;
  nic.name = "mlx5_0:1";
  nic.dmaBuf = true;
  SECTION("the level against known paths (default PXB)") {
    CHECK(chooseGdr(false, nic, true, true, PathType::PIX).deviceMemory);
    CHECK(chooseGdr(false, nic, true, true, PathType::PXB).deviceMemory);
    GdrChoice far = chooseGdr(false, nic, true, true, PathType::PHB);
    CHECK_FALSE(far.deviceMemory);
    CHECK_THAT(far.why, Catch::Contains("PHB") && Catch::Contains("beyond") && Catch::Contains("PXB"));
    ScopedEnv sys("NCCL_NET_GDR_LEVEL", "SYS");
    CHECK(chooseGdr(false, nic, true, true, PathType::SYS).deviceMemory);
    ScopedEnv loc("NCCL_NET_GDR_LEVEL", "LOC");
    CHECK_FALSE(chooseGdr(false, nic, true, true, PathType::PIX).deviceMemory);
  }
  SECTION("an unknown path counts as SYS, and says so") {
    GdrChoice unknown = chooseGdr(false, nic, true, true, std::nullopt);
    CHECK_FALSE(unknown.deviceMemory);
    CHECK_THAT(unknown.why, Catch::Contains("unknown") && Catch::Contains("SYS"));
    ScopedEnv sys("NCCL_NET_GDR_LEVEL", "4");
    CHECK(chooseGdr(false, nic, true, true, std::nullopt).deviceMemory);
  }
  SECTION("the sending side only with NCCL_NET_GDR_READ=1") {
    GdrChoice send = chooseGdr(true, nic, true, true, PathType::PIX);
    CHECK_FALSE(send.deviceMemory);
    CHECK_THAT(send.why, Catch::Contains("NCCL_NET_GDR_READ"));
    ScopedEnv read("NCCL_NET_GDR_READ", "1");
    CHECK(chooseGdr(true, nic, true, true, PathType::PIX).deviceMemory);
  }
  SECTION("host memory executors, memory without dmabuf export, NICs without dmabuf: host memory") {
    GdrChoice host = chooseGdr(false, nic, false, false, PathType::PIX);
    CHECK_FALSE(host.deviceMemory);
    CHECK(host.why.empty());  // nothing to say: the host's memory is what the NIC registers anyway
    CHECK_THAT(chooseGdr(false, nic, true, false, PathType::PIX).why, Catch::Contains("dmabuf"));
    nic.dmaBuf = false;
    GdrChoice noNic = chooseGdr(false, nic, true, true, PathType::PIX);
    CHECK_FALSE(noNic.deviceMemory);
    CHECK_THAT(noNic.why, Catch::Contains("mlx5_0:1"));
  }
}

}  // namespace
}  // namespace tutti::transport::net
