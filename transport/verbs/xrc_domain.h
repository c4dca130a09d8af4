// XrcDomain: the XRC domain that the job's processes on one node share, opened on a per-node
// file. Devices without XRC (Soft-RoCE) refuse it with EOPNOTSUPP; open_xrc_domain() then
// returns null for IBCOLL_XRC=auto (the caller falls back to per-peer RC QPs on one SRQ) and
// throws a clear not_supported error for IBCOLL_XRC=on.
#pragma once

#include <memory>
#include <string>

#include "transport/verbs/device.h"
#include "transport/verbs/handles.h"
#include "transport/verbs/options.h"

namespace ibcoll::transport::verbs {

class XrcDomain {
 public:
  XrcDomain(XrcDomainHandle xrcd, int fd) : xrcd_(std::move(xrcd)), fd_(fd) {}
  ~XrcDomain();
  XrcDomain(const XrcDomain&) = delete;
  XrcDomain& operator=(const XrcDomain&) = delete;
  ibv_xrcd* get() const { return xrcd_.get(); }

 private:
  XrcDomainHandle xrcd_;
  int fd_;
};

std::unique_ptr<XrcDomain> open_xrc_domain(const Device& device, XrcMode mode,
                                           const std::string& file);

}  // namespace ibcoll::transport::verbs
