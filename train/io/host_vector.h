// The host buffers of a model's state (its parameters and the optimizer's moments): a std::vector
// whose growth leaves new elements of trivial types uninitialised, as `new float[n]` does. Every
// such buffer is written whole before it is read (initialised, read from a checkpoint, copied from
// a GPU), and zeroing it first is a pass over memory that the kernel has just zeroed: for a fresh
// 256 MB read of a checkpoint, 12 ms on top of the 13 ms the kernel takes (docs/performance.md).
// Where zeros are meant, say so: v.assign(n, 0.0f).
// A buffer of a megabyte or more starts on a 2 MiB boundary: a checkpoint's tensors are read by
// direct I/O straight into it (tensor_io.h), where malloc's address (16 bytes past a page) would
// need a staging copy, and resize_in_huge_pages (huge_pages.h) advises all of it, not all but its
// ends.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace slurm_train {

inline constexpr std::size_t kHostAlignFrom = std::size_t{1} << 20;
inline constexpr std::size_t kHostAlignment = std::size_t{2} << 20;

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
  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    if (n * sizeof(T) < kHostAlignFrom) return std::allocator<T>::allocate(n);
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{kHostAlignment}));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHostAlignFrom) return std::allocator<T>::deallocate(p, n);
    ::operator delete (p, std::align_val_t{kHostAlignment});
  }
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
