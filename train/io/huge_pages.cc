#include "train/io/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace slurm_train {

namespace {
constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
}  // namespace

HugePageBuffer::HugePageBuffer(std::size_t bytes) {
  const std::size_t whole = (bytes + kHuge - 1) & ~(kHuge - 1);
  mapped_ = whole + kHuge;  // room to align the start
  void* m = ::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return;
  mapping_ = m;
  data_ = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(m) + kHuge - 1) & ~(kHuge - 1));
  ::madvise(data_, whole, MADV_HUGEPAGE);
}

HugePageBuffer::~HugePageBuffer() {
  if (mapping_) ::munmap(mapping_, mapped_);
}

void advise_huge_pages(void* data, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1), last = (begin + bytes) & ~(kHuge - 1);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void populate_pages(void* data, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data) & ~std::uintptr_t{4095};
  const auto end = reinterpret_cast<std::uintptr_t>(data) + bytes;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
}

}  // namespace slurm_train
