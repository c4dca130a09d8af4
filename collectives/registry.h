// The algorithm table: every collective algorithm with its name and a one-line description,
// the one place selection (select.h) and IBCOLL_ALLREDUCE_ALGO / IBCOLL_BCAST_ALGO look.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "collectives/task.h"

namespace ibcoll::collectives {

enum class Collective { allreduce, bcast };
const char* collective_name(Collective collective);

struct Algorithm {
  Collective collective;
  const char* name;
  const char* description;
  std::unique_ptr<CollectiveTask> (*make)(Group group, CollectiveArgs args, uint64_t base_tag);
  // Runs in the node's slot region: needs Group::slots, fits SlotRegion::kDataBytes, and
  // checks the call itself.
  bool uses_slots = false;
};

std::span<const Algorithm> algorithms();
// The algorithm named `name` for `collective`; Error(invalid_argument) naming the choices.
const Algorithm& find_algorithm(Collective collective, std::string_view name);

}  // namespace ibcoll::collectives
