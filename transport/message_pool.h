// MessagePool: where a channel keeps the memory of early arrivals (messages that came before
// their receive). Blocks freed go back to the pool for the next messages of their size, so a
// steady stream of early arrivals allocates nothing; but once nothing is held from it and it
// has grown past kKeptBytes (a burst: many peers' messages waiting at once), it gives
// everything back to the heap, so a peak is not kept for the channel's life.
#pragma once

#include <cstddef>
#include <memory_resource>

namespace ibcoll::transport {

// A channel's pools of message memory keep blocks of up to 64 KiB (as a call's memory does);
// larger ones come from the heap and go back to it.
inline constexpr std::pmr::pool_options kMessagePool{0, size_t{64} << 10};

class MessagePool final : public std::pmr::memory_resource {
 public:
  static constexpr size_t kKeptBytes = size_t{4} << 20;

  // Bytes the pool has from the heap now, in use or kept.
  size_t held_bytes() const { return heap_.held; }

 private:
  // The heap, counting what the pool holds of it.
  struct CountedHeap final : std::pmr::memory_resource {
    size_t held = 0;
    void* do_allocate(size_t bytes, size_t alignment) override {
      void* block = std::pmr::new_delete_resource()->allocate(bytes, alignment);
      held += bytes;
      return block;
    }
    void do_deallocate(void* block, size_t bytes, size_t alignment) override {
      std::pmr::new_delete_resource()->deallocate(block, bytes, alignment);
      held -= bytes;
    }
    bool do_is_equal(const memory_resource& other) const noexcept override {
      return this == &other;
    }
  };

  void* do_allocate(size_t bytes, size_t alignment) override {
    void* block = pool_.allocate(bytes, alignment);
    ++in_use_;
    return block;
  }
  void do_deallocate(void* block, size_t bytes, size_t alignment) override {
    pool_.deallocate(block, bytes, alignment);
    if (--in_use_ == 0 && heap_.held > kKeptBytes) pool_.release();
  }
  bool do_is_equal(const memory_resource& other) const noexcept override { return this == &other; }

  CountedHeap heap_;  // before the pool, which gives its blocks back to it
  std::pmr::unsynchronized_pool_resource pool_{kMessagePool, &heap_};
  size_t in_use_ = 0;  // blocks handed out and not yet given back
};

}  // namespace ibcoll::transport
