// NCCL_IB_HCA: which devices and ports the IB backend uses, in NCCL's syntax.
#pragma once

#include <string>
#include <vector>

namespace tutti::transport::net::ib {

// "mlx5_0:1,mlx5_1" (a device, optionally one port), a leading ^ excludes the listed ones instead,
// a leading = (after any ^) compares names exactly rather than by prefix. Empty: everything.
class HcaFilter {
 public:
  explicit HcaFilter(const std::string& spec);
  bool accepts(const std::string& device, int port) const;

 private:
  struct Entry {
    std::string name;
    int port = -1;  // -1: any
  };
  std::vector<Entry> entries_;
  bool exclude_ = false;
  bool exact_ = false;
};

}  // namespace tutti::transport::net::ib
