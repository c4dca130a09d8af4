// VerbsEndpoint: one rank's verbs transport, ready to use: the job (configuration, bootstrap,
// progress engine) plus the verbs channel with every rank's endpoint address exchanged, so
// that connections can then be made on demand.
#pragma once

#include <memory>

#include "runtime/job.h"
#include "transport/verbs/verbs_channel.h"

namespace ibcoll::runtime {

class VerbsEndpoint : public Job {
 public:
  VerbsEndpoint();
  transport::verbs::VerbsChannel& channel() { return *channel_; }

 private:
  std::unique_ptr<transport::verbs::VerbsChannel> channel_;
};

}  // namespace ibcoll::runtime
