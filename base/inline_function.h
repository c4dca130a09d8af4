// InlineFunction: a move-only callable wrapper that keeps callables of up to `Capacity` bytes
// inside itself, so wrapping one allocates nothing. std::function keeps only trivially copyable
// callables of at most 16 bytes inline: a transport completion that holds a shared_ptr and an
// index costs it a heap allocation per message. Larger callables go to the heap here too.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace ibcoll {

template <typename Signature, size_t Capacity = 48>
class InlineFunction;

template <typename R, typename... Args, size_t Capacity>
class InlineFunction<R(Args...), Capacity> {
 public:
  InlineFunction() = default;
  InlineFunction(std::nullptr_t) {}  // NOLINT: as std::function
  template <typename F,
            typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, InlineFunction>>>
  InlineFunction(F&& f) {  // NOLINT: implicit, as std::function
    using Callable = std::decay_t<F>;
    if constexpr (kFitsInline<Callable>) {
      ::new (storage_) Callable(std::forward<F>(f));
      ops_ = &kInlineOps<Callable>;
    } else {
      ::new (storage_) Callable*(new Callable(std::forward<F>(f)));
      ops_ = &kHeapOps<Callable>;
    }
  }
  InlineFunction(InlineFunction&& other) noexcept { take(other); }
  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  explicit operator bool() const { return ops_ != nullptr; }
  R operator()(Args... args) const { return ops_->call(storage_, std::forward<Args>(args)...); }

 private:
  struct Ops {
    R (*call)(void* storage, Args&&... args);
    void (*move)(void* to, void* from);  // leaves `from` destroyed
    void (*destroy)(void* storage);
  };
  template <typename Callable>
  static constexpr bool kFitsInline = sizeof(Callable) <= Capacity &&
                                      alignof(Callable) <= alignof(std::max_align_t) &&
                                      std::is_nothrow_move_constructible_v<Callable>;
  template <typename Callable>
  static constexpr Ops kInlineOps = {
      [](void* s, Args&&... args) -> R {
        return (*static_cast<Callable*>(s))(std::forward<Args>(args)...);
      },
      [](void* to, void* from) {
        ::new (to) Callable(std::move(*static_cast<Callable*>(from)));
        static_cast<Callable*>(from)->~Callable();
      },
      [](void* s) { static_cast<Callable*>(s)->~Callable(); }};
  template <typename Callable>
  static constexpr Ops kHeapOps = {
      [](void* s, Args&&... args) -> R {
        return (**static_cast<Callable**>(s))(std::forward<Args>(args)...);
      },
      [](void* to, void* from) { ::new (to) Callable*(*static_cast<Callable**>(from)); },
      [](void* s) { delete *static_cast<Callable**>(s); }};

  void take(InlineFunction& other) noexcept {
    if (!other.ops_) return;
    other.ops_->move(storage_, other.storage_);
    ops_ = std::exchange(other.ops_, nullptr);
  }
  void reset() {
    if (ops_) std::exchange(ops_, nullptr)->destroy(storage_);
  }

  alignas(std::max_align_t) mutable std::byte storage_[Capacity];
  const Ops* ops_ = nullptr;
};

}  // namespace ibcoll
