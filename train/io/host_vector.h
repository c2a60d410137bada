// The host buffers of a model's state (its parameters and the optimizer's moments): a std::vector
// whose growth leaves new elements of trivial types uninitialised, as `new float[n]` does. Every
// such buffer is written whole before it is read (initialised, read from a checkpoint, copied from
// a GPU), and zeroing it first is a pass over memory that the kernel has just zeroed: for a fresh
// 256 MB read of a checkpoint, 12 ms on top of the 13 ms the kernel takes (docs/performance.md).
// Where zeros are meant, say so: v.assign(n, 0.0f).
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace slurm_train {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  using std::allocator<T>::allocator;
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  // Default-initialisation: nothing for a float.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    std::construct_at(p, std::forward<Args>(args)...);
  }
};

template <class T>
using HostVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace slurm_train
