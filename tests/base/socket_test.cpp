// Tests of the socket layer: address text, NCCL_SOCKET_IFNAME matching and interface selection
// over made-up interface lists, and bounded connect/accept/send/recv on loopback.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/network_interface.h"
#include "base/socket.h"

namespace tutti {
namespace {

NetworkInterface fakeInterface(const std::string& name, const std::string& host, int prefixLength,
                               bool loopback = false) {
  NetworkInterface interface;
  interface.name = name;
  interface.address = SocketAddress::fromNumericHost(host, 0);
  interface.prefixLength = prefixLength;
  interface.loopback = loopback;
  return interface;
}

std::vector<std::string> namesOf(const std::vector<NetworkInterface>& interfaces) {
  std::vector<std::string> names;
  for (const NetworkInterface& interface : interfaces) names.push_back(interface.name);
  return names;
}

ErrorCode codeOf(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.code();
  }
  FAIL("no error was thrown");
  return ErrorCode::Internal;
}

TEST_CASE("socket: socket addresses parse and print IPv4, IPv6 and names") {
  SocketAddress v4 = SocketAddress::parse("10.1.2.3:29500");
  CHECK(v4.family() == AF_INET);
  CHECK(v4.port() == 29500);
  CHECK(v4.host() == "10.1.2.3");
  CHECK(v4.toString() == "10.1.2.3:29500");

  SocketAddress v6 = SocketAddress::parse("[fd00::1:2]:80");
  CHECK(v6.family() == AF_INET6);
  CHECK(v6.port() == 80);
  CHECK(v6.host() == "fd00::1:2");
  CHECK(v6.toString() == "[fd00::1:2]:80");

  SocketAddress loopback6 = SocketAddress::parse("[::1]:0");
  CHECK(loopback6.isLoopback());
  CHECK(loopback6.toString() == "[::1]:0");

  SocketAddress named = SocketAddress::parse("localhost:7");
  CHECK(named.isLoopback());
  CHECK(named.port() == 7);

  CHECK(SocketAddress::parse("127.0.0.1:1") == SocketAddress::fromNumericHost("127.0.0.1", 1));
  CHECK_FALSE(SocketAddress::parse("127.0.0.1:1") == SocketAddress::parse("127.0.0.1:2"));
  CHECK(SocketAddress().toString() == "(none)");
}

TEST_CASE("socket: socket address text errors are InvalidArgument") {
  for (const char* bad : {"", "127.0.0.1", "127.0.0.1:", ":80", "1.2.3.4:65536", "1.2.3.4:http", "fd00::1:80",
                          "[fd00::1]80", "[fd00::1", "no-such-host.invalid:80"}) {
    INFO(bad);
    CHECK(codeOf([&] { SocketAddress::parse(bad); }) == ErrorCode::InvalidArgument);
  }
}

TEST_CASE("socket: socket addresses classify loopback, link-local and subnets") {
  CHECK(SocketAddress::fromNumericHost("127.5.6.7", 0).isLoopback());
  CHECK_FALSE(SocketAddress::fromNumericHost("128.0.0.1", 0).isLoopback());
  CHECK(SocketAddress::fromNumericHost("::ffff:127.0.0.1", 0).isLoopback());
  CHECK(SocketAddress::fromNumericHost("169.254.10.1", 0).isLinkLocal());
  CHECK(SocketAddress::fromNumericHost("fe80::1", 0).isLinkLocal());
  CHECK_FALSE(SocketAddress::fromNumericHost("fd00::1", 0).isLinkLocal());

  SocketAddress a = SocketAddress::fromNumericHost("192.168.10.5", 0);
  CHECK(a.sameSubnet(SocketAddress::fromNumericHost("192.168.10.200", 0), 24));
  CHECK_FALSE(a.sameSubnet(SocketAddress::fromNumericHost("192.168.11.5", 0), 24));
  CHECK(a.sameSubnet(SocketAddress::fromNumericHost("192.168.11.5", 0), 16));
  CHECK_FALSE(a.sameSubnet(SocketAddress::fromNumericHost("fd00::1", 0), 0));
  CHECK(SocketAddress::fromNumericHost("fd00::1", 0).sameSubnet(SocketAddress::fromNumericHost("fd00::ffff", 0), 64));
}

TEST_CASE("socket: socket addresses survive the wire form") {
  for (const char* text : {"10.1.2.3:29500", "[fd00::1:2]:80", "[::1]:65535", "0.0.0.0:0"}) {
    SocketAddress address = SocketAddress::parse(text);
    uint8_t wire[SocketAddress::kWireBytes];
    address.toWire(wire);
    CHECK(SocketAddress::fromWire(wire) == address);
    CHECK(SocketAddress::fromWire(wire).toString() == text);
  }
  uint8_t empty[SocketAddress::kWireBytes] = {};
  CHECK(SocketAddress::fromWire(empty).empty());
  uint8_t bad[SocketAddress::kWireBytes] = {9};
  CHECK(codeOf([&] { SocketAddress::fromWire(bad); }) == ErrorCode::InvalidArgument);
}

TEST_CASE("socket: NCCL_SOCKET_IFNAME matches prefixes, excludes with ^ and exact names with =") {
  InterfaceNameFilter prefixes = InterfaceNameFilter::parse("eth,ib");
  CHECK(prefixes.matches("eth0"));
  CHECK(prefixes.matches("eth12"));
  CHECK(prefixes.matches("ib1"));
  CHECK_FALSE(prefixes.matches("enp3s0"));
  CHECK_FALSE(prefixes.matches("et"));

  InterfaceNameFilter excluded = InterfaceNameFilter::parse("^docker,lo");
  CHECK(excluded.matches("eth0"));
  CHECK_FALSE(excluded.matches("docker0"));
  CHECK_FALSE(excluded.matches("lo"));

  InterfaceNameFilter exact = InterfaceNameFilter::parse("=eth0,ib1");
  CHECK(exact.matches("eth0"));
  CHECK(exact.matches("ib1"));
  CHECK_FALSE(exact.matches("eth01"));
  CHECK_FALSE(exact.matches("ib10"));

  InterfaceNameFilter exactExcluded = InterfaceNameFilter::parse("^=eth0");
  CHECK_FALSE(exactExcluded.matches("eth0"));
  CHECK(exactExcluded.matches("eth01"));

  InterfaceNameFilter spaced = InterfaceNameFilter::parse(" eth0 ,, ib ");
  CHECK(spaced.matches("eth0"));
  CHECK(spaced.matches("ib0"));
  CHECK_FALSE(spaced.matches("lo"));
}

TEST_CASE("socket: interface selection: default policy skips loopback, docker, virbr and link-local") {
  std::vector<NetworkInterface> all = {
      fakeInterface("lo", "127.0.0.1", 8, true),    fakeInterface("docker0", "172.17.0.1", 16),
      fakeInterface("virbr0", "192.168.122.1", 24), fakeInterface("eth0", "fe80::1", 64),
      fakeInterface("eth0", "10.0.0.2", 24),        fakeInterface("eth1", "169.254.3.4", 16),
      fakeInterface("ib0", "fd00::5", 64),
  };
  std::vector<NetworkInterface> chosen = selectNetworkInterfaces(all, "", AF_UNSPEC);
  CHECK(namesOf(chosen) == std::vector<std::string>{"eth0", "ib0"});
  CHECK(chosen[0].address.host() == "10.0.0.2");

  std::vector<NetworkInterface> v6 = selectNetworkInterfaces(all, "", AF_INET6);
  CHECK(namesOf(v6) == std::vector<std::string>{"ib0"});

  // Nothing but loopback and skipped interfaces: loopback.
  std::vector<NetworkInterface> small = {fakeInterface("docker0", "172.17.0.1", 16),
                                         fakeInterface("lo", "::1", 128, true),
                                         fakeInterface("lo", "127.0.0.1", 8, true)};
  std::vector<NetworkInterface> fallback = selectNetworkInterfaces(small, "", AF_UNSPEC);
  REQUIRE(fallback.size() == 1);
  CHECK(fallback[0].name == "lo");
  CHECK(fallback[0].address.host() == "127.0.0.1");  // IPv4 preferred

  CHECK(codeOf([&] { selectNetworkInterfaces({}, "", AF_UNSPEC); }) == ErrorCode::System);
}

TEST_CASE("socket: interface selection honours an ifname spec and lists interfaces when none match") {
  std::vector<NetworkInterface> all = {fakeInterface("lo", "127.0.0.1", 8, true), fakeInterface("eth0", "10.0.0.2", 24),
                                       fakeInterface("eth1", "10.0.1.2", 24),
                                       fakeInterface("docker0", "172.17.0.1", 16)};
  CHECK(namesOf(selectNetworkInterfaces(all, "lo", AF_UNSPEC)) == std::vector<std::string>{"lo"});
  CHECK(namesOf(selectNetworkInterfaces(all, "eth", AF_UNSPEC)) == std::vector<std::string>{"eth0", "eth1"});
  CHECK(namesOf(selectNetworkInterfaces(all, "=eth1", AF_UNSPEC)) == std::vector<std::string>{"eth1"});
  CHECK(namesOf(selectNetworkInterfaces(all, "^eth,lo", AF_UNSPEC)) == std::vector<std::string>{"docker0"});

  try {
    selectNetworkInterfaces(all, "ib", AF_UNSPEC);
    FAIL("no error for an ifname spec that matches nothing");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::InvalidUsage);
    std::string message = error.message();
    CHECK(message.find("NCCL_SOCKET_IFNAME=ib") != std::string::npos);
    CHECK(message.find("lo (127.0.0.1)") != std::string::npos);
    CHECK(message.find("eth0 (10.0.0.2)") != std::string::npos);
    CHECK(message.find("eth1 (10.0.1.2)") != std::string::npos);
    CHECK(message.find("docker0 (172.17.0.1)") != std::string::npos);
  }
  // The family filter applies before the names.
  CHECK(codeOf([&] { selectNetworkInterfaces(all, "eth", AF_INET6); }) == ErrorCode::InvalidUsage);
}

TEST_CASE("socket: NCCL_SOCKET_FAMILY values") {
  CHECK(parseSocketFamily("") == AF_UNSPEC);
  CHECK(parseSocketFamily("AF_INET") == AF_INET);
  CHECK(parseSocketFamily("AF_INET6") == AF_INET6);
  CHECK(codeOf([] { parseSocketFamily("inet"); }) == ErrorCode::InvalidUsage);
}

TEST_CASE("socket: this host's interfaces include loopback") {
  std::vector<NetworkInterface> interfaces = listNetworkInterfaces();
  bool haveLoopback = false;
  for (const NetworkInterface& interface : interfaces) haveLoopback = haveLoopback || interface.loopback;
  CHECK(haveLoopback);
}

TEST_CASE("socket: loopback sockets connect, accept and move exact byte counts") {
  Socket listener = Socket::listen(SocketAddress::fromNumericHost("127.0.0.1", 0));
  SocketAddress address = listener.localAddress();
  REQUIRE(address.port() != 0);

  std::vector<uint8_t> sent(3 << 20);
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<uint8_t>(i * 131 + 7);
  std::atomic<bool> senderFailed{false};
  std::thread sender([&] {
    try {
      Socket socket = Socket::connect(address, deadlineAfter(10), nullptr);
      socket.sendAll(sent.data(), sent.size(), deadlineAfter(10), nullptr);
    } catch (const Error&) {
      senderFailed = true;
    }
  });
  Socket accepted = listener.accept(deadlineAfter(10), nullptr);
  std::vector<uint8_t> received(sent.size());
  accepted.recvAll(received.data(), received.size(), deadlineAfter(10), nullptr);
  sender.join();
  CHECK_FALSE(senderFailed);
  CHECK(received == sent);
  CHECK(accepted.peerAddress().isLoopback());

  // The sender has closed: a further read reports a Remote error naming the peer.
  uint8_t byte = 0;
  try {
    accepted.recvAll(&byte, 1, deadlineAfter(10), nullptr);
    FAIL("recv after the peer closed succeeded");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::Remote);
    CHECK(error.message().find(accepted.peerAddress().toString()) != std::string::npos);
  }
}

TEST_CASE("socket: socket waits end at the deadline or on abort") {
  Socket listener = Socket::listen(SocketAddress::fromNumericHost("127.0.0.1", 0));
  CHECK(codeOf([&] { listener.accept(deadlineAfter(0.2), nullptr); }) == ErrorCode::Timeout);

  Socket client = Socket::connect(listener.localAddress(), deadlineAfter(10), nullptr);
  Socket server = listener.accept(deadlineAfter(10), nullptr);
  uint8_t byte = 0;
  CHECK(codeOf([&] { server.recvAll(&byte, 1, deadlineAfter(0.2), nullptr); }) == ErrorCode::Timeout);

  std::atomic<bool> abortFlag{false};
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    abortFlag = true;
  });
  CHECK(codeOf([&] { server.recvAll(&byte, 1, deadlineAfter(60), &abortFlag); }) == ErrorCode::Aborted);
  aborter.join();
}

TEST_CASE("socket: connect retries until a listener appears, and times out naming the address when none does") {
  // Find a free port, then close it so that the first attempts are refused.
  SocketAddress address;
  {
    Socket probe = Socket::listen(SocketAddress::fromNumericHost("127.0.0.1", 0));
    address = probe.localAddress();
  }
  try {
    Socket::connect(address, deadlineAfter(0.3), nullptr);
    FAIL("connect to a closed port succeeded");
  } catch (const Error& error) {
    CHECK(error.code() == ErrorCode::Timeout);
    CHECK(error.message().find(address.toString()) != std::string::npos);
    CHECK(error.message().find("errno") != std::string::npos);
  }

  Socket late;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    late = Socket::listen(address);
  });
  Socket connected = Socket::connect(address, deadlineAfter(10), nullptr);
  starter.join();
  CHECK(connected.valid());
  CHECK(connected.peerAddress() == address);
}

}  // namespace
}  // namespace tutti
