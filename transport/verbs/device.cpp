#include "transport/verbs/device.h"

#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "transport/verbs/handles.h"

namespace ibcoll::transport::verbs {
namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
using DeviceList = std::unique_ptr<ibv_device*[], DeviceListDeleter>;

bool is_ipv4_mapped(const ibv_gid& gid) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, prefix, sizeof(prefix)) == 0;
}

bool is_zero(const ibv_gid& gid) {
  static const uint8_t zero[16] = {};
  return std::memcmp(gid.raw, zero, sizeof(zero)) == 0;
}

int parse_port(const std::string& text) {
  char* end = nullptr;
  long port = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || port < 1 || port > 255) {
    throw Error(Code::invalid_argument,
                "IBCOLL_DEVICE: port '" + text + "' is not a port number (expected name[:port])");
  }
  return static_cast<int>(port);
}

}  // namespace

std::vector<std::string> active_device_names() {
  std::vector<std::string> names;
  int count = 0;
  DeviceList list(ibv_get_device_list(&count));
  for (int i = 0; list && i < count; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) continue;
    ibv_device_attr attr{};
    bool active = false;
    if (ibv_query_device(ctx, &attr) == 0) {
      for (int p = 1; p <= attr.phys_port_cnt && !active; ++p) {
        ibv_port_attr pattr{};
        active = ibv_query_port(ctx, static_cast<uint8_t>(p), &pattr) == 0 &&
                 pattr.state == IBV_PORT_ACTIVE;
      }
    }
    ibv_close_device(ctx);
    if (active) names.emplace_back(ibv_get_device_name(list[i]));
  }
  return names;
}

Device::Device(const std::string& spec, int gid_index, bool rdmacm_context) {
  std::string name = spec;
  int port = 0;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    name = spec.substr(0, colon);
    port = parse_port(spec.substr(colon + 1));
  }
  try {
    open(name, port, rdmacm_context);
    choose_gid(gid_index);
  } catch (...) {
    close();
    throw;
  }
  IBCOLL_LOG(info, "verbs device " << name_ << " port " << int(port_) << " ("
                                   << (is_ethernet() ? "Ethernet" : "InfiniBand") << "), "
                                   << (is_ethernet() ? "GID index " : "LID ")
                                   << (is_ethernet() ? gid_index_ : address_.lid));
}

Device::~Device() {
  close();
}

void Device::close() {
  if (context_ && owns_context_ && ibv_close_device(context_) == 0) --live_objects().contexts;
  context_ = nullptr;
  if (cm_devices_) rdma_free_devices(cm_devices_);
  cm_devices_ = nullptr;
}

bool Device::select_port(ibv_context* ctx, const std::string& name, int port) {
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(ctx, &attr)) throw_errno("ibv_query_device(" + name + ")", rc);
  if (port > attr.phys_port_cnt) {
    throw Error(Code::invalid_argument, "IBCOLL_DEVICE: " + name + " has no port " +
                                            std::to_string(port) + " (it has " +
                                            std::to_string(attr.phys_port_cnt) + ")");
  }
  for (int p = port ? port : 1; p <= (port ? port : attr.phys_port_cnt); ++p) {
    ibv_port_attr pattr{};
    if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pattr) != 0) continue;
    if (pattr.state != IBV_PORT_ACTIVE) {
      if (port) {
        throw Error(Code::not_supported,
                    "IBCOLL_DEVICE: " + name + " port " + std::to_string(p) + " is not active");
      }
      continue;
    }
    context_ = ctx;
    name_ = name;
    port_ = static_cast<uint8_t>(p);
    attr_ = attr;
    port_attr_ = pattr;
    return true;
  }
  return false;
}

void Device::open(const std::string& name, int port, bool rdmacm_context) {
  std::string seen;
  auto wanted = [&](const std::string& this_name) {
    seen += (seen.empty() ? "" : ", ") + this_name;
    return name.empty() || this_name == name;
  };
  if (rdmacm_context) {
    // rdma_cm creates QPs only on its own device contexts: use those, do not open our own.
    int count = 0;
    cm_devices_ = rdma_get_devices(&count);
    for (int i = 0; cm_devices_ && i < count && !context_; ++i) {
      const std::string this_name = ibv_get_device_name(cm_devices_[i]->device);
      if (wanted(this_name)) select_port(cm_devices_[i], this_name, port);
    }
    owns_context_ = false;
  } else {
    int count = 0;
    DeviceList list(ibv_get_device_list(&count));
    for (int i = 0; list && i < count && !context_; ++i) {
      const std::string this_name = ibv_get_device_name(list[i]);
      if (!wanted(this_name)) continue;
      ibv_context* ctx = ibv_open_device(list[i]);
      if (!ctx) throw_errno("ibv_open_device(" + this_name + ")", errno);
      try {
        if (!select_port(ctx, this_name, port)) ibv_close_device(ctx);
      } catch (...) {
        ibv_close_device(ctx);
        throw;
      }
    }
    owns_context_ = true;
    if (context_) ++live_objects().contexts;
  }
  if (context_) return;
  if (seen.empty()) {
    throw Error(Code::not_supported, "no RDMA devices found (is a verbs provider installed?)");
  }
  if (!name.empty() && seen.find(name) == std::string::npos) {
    throw Error(Code::invalid_argument,
                "IBCOLL_DEVICE: no device named '" + name + "' (found: " + seen + ")");
  }
  throw Error(Code::not_supported, "no active port on " + (name.empty() ? seen : name));
}

void Device::choose_gid(int requested) {
  address_.port = port_;
  address_.lid = port_attr_.lid;
  if (!is_ethernet() && requested < 0) return;  // InfiniBand: route by LID

  const int table = port_attr_.gid_tbl_len;
  if (requested >= table) {
    throw Error(Code::invalid_argument, "IBCOLL_GID_INDEX: " + std::to_string(requested) +
                                            " is past the GID table of " + name_ + " (" +
                                            std::to_string(table) + " entries)");
  }
  int best = -1, best_score = 0;
  for (int i = requested >= 0 ? requested : 0; i < (requested >= 0 ? requested + 1 : table); ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(context_, port_, i, &entry, 0) != 0 || is_zero(entry.gid)) continue;
    int score = 1 + (entry.gid_type == IBV_GID_TYPE_ROCE_V2) * 2 + is_ipv4_mapped(entry.gid);
    if (score > best_score) best = i, best_score = score;
  }
  if (best < 0) {
    if (requested >= 0) {
      throw Error(Code::invalid_argument, "IBCOLL_GID_INDEX: entry " + std::to_string(requested) +
                                              " of " + name_ + " is empty");
    }
    throw Error(Code::not_supported, "no usable GID on " + name_);
  }
  ibv_gid gid{};
  if (int rc = ibv_query_gid(context_, port_, best, &gid)) throw_errno("ibv_query_gid", rc);
  std::memcpy(address_.gid, gid.raw, sizeof(address_.gid));
  address_.global = 1;
  gid_index_ = best;
}

}  // namespace ibcoll::transport::verbs
