// XrcDomain: the XRC domain that a job's processes on one node share, opened on one file per job
// and node (ibv_open_xrcd ties processes to a domain through the file's inode). The file lives
// in a private directory (made 0700 if missing; refused unless it is a real directory owned by
// this user and closed to others) and is opened without following links, so another job or
// user can neither share nor replace it. The name goes once every process of the node has opened
// the domain (unlink_file, when the channel has every rank's address: all opened theirs before
// publishing it), never later: a process that closed its domain while a node-mate opened the
// job's next one would unlink that one's file, and processes opening the name after it would
// land in another domain than those that opened it before.
// Devices without XRC (Soft-RoCE) refuse the domain with EOPNOTSUPP. open_xrc_domain() returns
// null for IBCOLL_XRC=auto on any failure (the caller falls back to per-peer RC QPs on one SRQ,
// and the log says why) and throws a clear not_supported error for IBCOLL_XRC=on.
#pragma once

#include <memory>
#include <string>

#include "transport/verbs/device.h"
#include "transport/verbs/handles.h"
#include "transport/verbs/options.h"

namespace ibcoll::transport::verbs {

class XrcDomain {
 public:
  // Throws Error(system_error or not_supported) naming the file or the device.
  XrcDomain(const Device& device, const std::string& path);
  ~XrcDomain();
  XrcDomain(const XrcDomain&) = delete;
  XrcDomain& operator=(const XrcDomain&) = delete;
  ibv_xrcd* get() const { return xrcd_.get(); }
  // Removes the file's name (once; the domain stays open). The destructor does, unless done.
  void unlink_file();

 private:
  std::string path_;
  bool linked_ = true;
  int fd_ = -1;
  XrcDomainHandle xrcd_;
};

// `path`: the job's file on this node (Options::xrc_domain_file).
std::unique_ptr<XrcDomain> open_xrc_domain(const Device& device, XrcMode mode,
                                           const std::string& path);

}  // namespace ibcoll::transport::verbs
