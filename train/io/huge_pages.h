// Large buffers in transparent huge pages where the kernel offers them (THP "madvise" mode, the
// default of most distributions): one page fault per 2 MiB instead of one per 4 KiB. Faults are
// what a fresh buffer costs: on the 2-core VM of docs/performance.md one costs about 15 us, so a
// new 256 MB buffer took 1.0 s to fill in 4 KiB pages and 0.03 s in huge pages.
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

#include "train/io/host_vector.h"

namespace slurm_train {

// Advises the kernel to back the whole 2 MiB pages inside [data, data + bytes) with huge pages.
// Advice only: nothing happens where THP is off, or for less than 2 MiB.
void advise_huge_pages(void* data, std::size_t bytes);

// Faults [data, data + bytes) in with one call (MADV_POPULATE_WRITE) rather than one fault a
// page as it is first written. Advice only: nothing on kernels before 5.14.
void populate_pages(void* data, std::size_t bytes);

// A buffer of whole 2 MiB pages, aligned to them, advised huge pages: I/O from it goes as few
// physically contiguous segments (a 4 MiB direct write is one request, not four of 254 pages) and
// the kernel pins 2 pages, not 1,024. Empty (data() null) when the memory cannot be mapped.
class HugePageBuffer {
 public:
  explicit HugePageBuffer(std::size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  unsigned char* data() const { return data_; }

 private:
  void* mapping_ = nullptr;
  std::size_t mapped_ = 0;
  unsigned char* data_ = nullptr;
};

// v.resize(n), where memory it must allocate is advised huge pages before anything touches it. A
// std::vector then zeroes the new elements: its new pages are faulted in with one call first. A
// HostVector (host_vector.h) leaves them to whoever writes them first: a checkpoint's reader
// threads fault them in as they copy, in parallel, where one call would zero them all in series.
template <class T, class Allocator>
void reserve_in_huge_pages(std::vector<T, Allocator>& v, std::size_t n, bool populate) {
  if (n <= v.capacity()) return;
  v.reserve(n);  // allocates without touching: large blocks come straight from mmap
  advise_huge_pages(v.data(), n * sizeof(T));
  if (populate) populate_pages(v.data(), n * sizeof(T));
}

template <class T, class Allocator>
void resize_in_huge_pages(std::vector<T, Allocator>& v, std::size_t n) {
  reserve_in_huge_pages(v, n, !std::is_same_v<Allocator, DefaultInitAllocator<T>>);
  v.resize(n);
}

// The same where the new elements are to be `value`: their pages are faulted in with one call, as
// for a std::vector, since they are filled at once.
template <class T, class Allocator>
void resize_in_huge_pages(std::vector<T, Allocator>& v, std::size_t n, const T& value) {
  reserve_in_huge_pages(v, n, true);
  v.resize(n, value);
}

}  // namespace slurm_train
