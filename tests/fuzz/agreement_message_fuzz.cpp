// libFuzzer target: an agreement's message (collectives/agreement_message.h) as a partner's
// receive delivers it. The first two bytes say how many members the reader's communicator has;
// whatever parses re-encodes to the very bytes read, and its sets name members only.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "collectives/agreement_message.h"

using ibcoll::collectives::decode_agreement;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int members = 1 + (data[0] | data[1] << 8) % 1024;
  const auto bytes = std::as_bytes(std::span<const uint8_t>(data + 2, size - 2));
  const auto message = decode_agreement(bytes, members);
  if (!message) return 0;
  const auto again = ibcoll::collectives::encode(*message);
  if (again.size() != bytes.size() || !std::equal(again.begin(), again.end(), bytes.begin()))
    std::abort();
  const auto in_members = [&](const ibcoll::collectives::MemberSet& set) {
    for (int m : set.list())
      if (m < 0 || m >= members) return false;
    return set.members() == members;
  };
  if (!in_members(message->view) || (message->decision && !in_members(message->decision->failed)))
    std::abort();
  return 0;
}
