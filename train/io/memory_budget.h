// How much memory this process may still allocate, and the check that an allocation named by an
// input (a dataset's shape, a model's width) fits before it is attempted: a header that promises
// terabytes must end in a clear error, not in bad_alloc or the kernel's OOM killer.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace slurm_train {

struct MemoryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The product of `dims` and `element_size`; nullopt when it overflows 64 bits.
std::optional<std::uint64_t> checked_bytes(const std::vector<std::uint64_t>& dims, std::uint64_t element_size);

// What limits this process: the kernel's MemAvailable and the address-space and data-segment
// limits (ulimit -v, ulimit -d) less what the process already maps. 0 in a limit field: none.
struct MemoryFacts {
  std::uint64_t mem_available = 0;
  std::uint64_t limit_as = 0, limit_data = 0;
  std::uint64_t mapped = 0, data = 0;  // VmSize and VmData of this process
};

// "MemAvailable:   123 kB" out of /proc/meminfo's text (or VmSize / VmData out of
// /proc/self/status's), in bytes; nullopt when absent.
std::optional<std::uint64_t> kib_field(const std::string& text, const std::string& name);

// The bytes one more allocation may take; UINT64_MAX when nothing limits it.
std::uint64_t allocatable_bytes(const MemoryFacts& facts);

// This process's facts, from /proc and getrlimit.
MemoryFacts current_memory_facts();

// "1.5 GiB": bytes for messages.
std::string format_bytes(std::uint64_t bytes);

// Throws MemoryError "<what> needs <bytes> (<why>), but only <available> can be allocated here
// (<limits>)" when `bytes` (nullopt: overflowed) exceeds what `facts` allow.
void require_memory(const std::string& what, std::optional<std::uint64_t> bytes, const std::string& why,
                    const MemoryFacts& facts);

}  // namespace slurm_train
