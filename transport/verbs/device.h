// Device: an opened HCA port. Chooses the device and port (IBCOLL_DEVICE or the first active
// port), reads the link layer, and picks the address: LID on InfiniBand, a GID on RoCE
// (IPv4-mapped RoCE v2 preferred, IBCOLL_GID_INDEX overrides).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ibcoll::transport::verbs {

// What a peer needs to reach this port.
struct PortAddress {
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  uint8_t port = 0;
  uint8_t global = 0;  // 1: route by GID (RoCE), 0: by LID (InfiniBand)
};

// The devices with at least one active port, by name, in the verbs library's order.
std::vector<std::string> active_device_names();

class Device {
 public:
  // `spec` is "name", "name:port" or empty; gid_index -1 chooses automatically.
  // `rdmacm_context`: use librdmacm's context of the device (rdma_create_qp needs it).
  Device(const std::string& spec, int gid_index, bool rdmacm_context = false);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  ibv_context* context() const { return context_; }
  const std::string& name() const { return name_; }
  uint8_t port() const { return port_; }
  int gid_index() const { return gid_index_; }
  bool is_ethernet() const { return port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  ibv_mtu active_mtu() const { return port_attr_.active_mtu; }
  uint32_t max_message_size() const { return port_attr_.max_msg_sz; }
  const ibv_device_attr& attr() const { return attr_; }
  PortAddress address() const { return address_; }

 private:
  void open(const std::string& name, int port, bool rdmacm_context);
  bool select_port(ibv_context* context, const std::string& name, int port);
  void close();
  void choose_gid(int requested);

  ibv_context* context_ = nullptr;
  bool owns_context_ = true;
  ibv_context** cm_devices_ = nullptr;  // librdmacm's list, when its context is used
  std::string name_;
  uint8_t port_ = 0;
  int gid_index_ = -1;
  ibv_device_attr attr_{};
  ibv_port_attr port_attr_{};
  PortAddress address_{};
};

}  // namespace ibcoll::transport::verbs
