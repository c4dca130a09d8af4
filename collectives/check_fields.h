// CheckFields: the call check's running agreement as a checked exchange carries it (the
// doubling exchange's messages start with it): per call field, the minimum of the values seen
// and the minimum of their complements (so the maximum), folded in from every message.
//
// On the wire it takes one of two forms, told apart by the low byte of the first word: while
// every call seen agrees, the values once, packed (kCompactBytes); once any differ, both minima
// of every field (kFullBytes). Calls agree in the common case, so a message carries 72 bytes
// less: a small checked message then fits a queue pair's inline data, and a mismatch is still
// named by its fields' ranges. While they agree, folding a compact form in is one comparison
// with this call's own (calls that agree leave the minima as they are).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "collectives/call_check.h"

namespace ibcoll::collectives {

class CheckFields {
 public:
  static constexpr size_t kCompactBytes = 24;
  static constexpr size_t kFullBytes = 2 * CallSignature::kFields * sizeof(uint64_t);

  CheckFields() = default;
  explicit CheckFields(const CallSignature& mine);

  // Writes the wire form to `out` (room for kFullBytes); returns its length.
  size_t write(std::byte* out) const;
  // Folds in the form at the start of `message` (`bytes` long); returns its length, or 0 when
  // the message holds no whole form (nothing folded in).
  size_t fold(const std::byte* message, size_t bytes);
  // ok when every call folded in agreed, else compare_calls' mismatch; a mismatch too when the
  // fields agreed but a peer's message had another length than this rank's (`length_differed`).
  Status verdict(bool length_differed = false) const;

 private:
  using Minima = std::array<uint64_t, 2 * CallSignature::kFields>;  // value, ~value per field
  using Packed = std::array<uint64_t, kCompactBytes / sizeof(uint64_t)>;
  static Minima minima_of(const std::array<uint64_t, CallSignature::kFields>& values);
  void fold_in(const Minima& theirs);

  Minima minima_{};
  Packed mine_{};        // this call's compact form, if its fields fit one
  bool agreed_ = false;  // they fit, and every call folded in so far was this one
};

}  // namespace ibcoll::collectives
