// Where a GPU step's time goes, without a profiler installed: while a KernelTimes lives, CUPTI's
// activity API (part of the CUDA toolkit) records every kernel, memcpy and memset the process
// runs on the GPU, with its start and end on the GPU's clock; collect() sums them by name. The
// records cost a little on each launch, so gpu_check times its steps without them and records
// a few more steps after. Header-only: gpu_check is its one user.
#pragma once

#include <cupti.h>
#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace slurm_train::bench {

#define SLURM_TRAIN_CUPTI_CHECK(call)                                                                       \
  do {                                                                                                      \
    const CUptiResult cupti_status = (call);                                                                \
    if (cupti_status != CUPTI_SUCCESS) {                                                                    \
      const char* cupti_text = nullptr;                                                                     \
      cuptiGetResultString(cupti_status, &cupti_text);                                                      \
      throw std::runtime_error(fmt::format("CUPTI call {} failed: {} ({}:{})", #call,                       \
                                           cupti_text ? cupti_text : "unknown error", __FILE__, __LINE__)); \
    }                                                                                                       \
  } while (0)

struct KernelTime {
  std::string name;  // demangled, without its parameter list
  double ns = 0;     // the sum of its runs' durations
  std::uint64_t runs = 0;
};

// "slurm_train::cuda::flash_detail::flash_dkdv_kernel" of "_ZN11slurm_train4cuda12flash_detail...": the
// demangled name without its return type and parameter list (template arguments kept: they tell
// instances apart); a name that does not demangle (cuBLASLt's kernels are C names) as it is.
inline std::string kernel_display_name(const char* name) {
  if (!name) return "(unnamed)";
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(abi::__cxa_demangle(name, nullptr, nullptr, &status),
                                                        &std::free);
  if (status != 0 || !demangled) return name;
  std::string text = demangled.get();
  if (text.rfind("void ", 0) == 0) text.erase(0, 5);  // a function template's return type
  if (!text.empty() && text.back() == ')') {          // the parameter list: the last group at the top
    int depth = 0;
    for (std::size_t i = text.size(); i-- > 0;) {
      if (text[i] == ')')
        ++depth;
      else if (text[i] == '(' && --depth == 0)
        return text.substr(0, i);
    }
  }
  return text;
}

class KernelTimes {
 public:
  KernelTimes() {
    {
      const std::lock_guard lock(mutex_);
      totals_.clear();
      dropped_ = 0;
    }
    SLURM_TRAIN_CUPTI_CHECK(cuptiActivityRegisterCallbacks(&requested, &completed));
    try {
      for (const CUpti_ActivityKind kind : kKinds) SLURM_TRAIN_CUPTI_CHECK(cuptiActivityEnable(kind));
    } catch (...) {
      for (const CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);  // no recording left on
      throw;
    }
  }
  KernelTimes(const KernelTimes&) = delete;
  KernelTimes& operator=(const KernelTimes&) = delete;
  ~KernelTimes() {
    for (const CUpti_ActivityKind kind : kKinds) cuptiActivityDisable(kind);
    // No buffer left for CUPTI to hand back at exit, when the totals may be gone.
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }

  // What was recorded up to now (the caller synchronizes the device first), largest first.
  std::vector<KernelTime> collect() {
    SLURM_TRAIN_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    const std::lock_guard lock(mutex_);
    if (dropped_ > 0)
      throw std::runtime_error(fmt::format("CUPTI dropped {} activity records: record fewer steps", dropped_));
    std::vector<KernelTime> out;
    for (const auto& [name, t] : totals_) out.push_back(t);
    std::sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.ns > b.ns; });
    return out;
  }

 private:
  static constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                                  CUPTI_ACTIVITY_KIND_MEMSET};
  static constexpr std::size_t kBufferBytes = 8u << 20;

  // CUPTI's callbacks (C calls from its own thread): nothing may throw out of them.
  static void CUPTIAPI requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;  // as many as fit
  }
  static void CUPTIAPI completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer, std::size_t,
                                 std::size_t valid) noexcept {
    try {
      const std::lock_guard lock(mutex_);
      CUpti_Activity* record = nullptr;
      while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        switch (record->kind) {
          case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
          case CUPTI_ACTIVITY_KIND_KERNEL: {
            const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
            add(kernel_display_name(k->name), k->start, k->end);
            break;
          }
          case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
            add(fmt::format("[memcpy {}]", copy_kind(m->copyKind)), m->start, m->end);
            break;
          }
          case CUPTI_ACTIVITY_KIND_MEMSET: {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
            add("[memset]", m->start, m->end);
            break;
          }
          default:
            break;
        }
      }
      std::size_t dropped = 0;
      if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) dropped_ += dropped;
    } catch (...) {
      ++dropped_;  // a record not counted is reported as dropped
    }
    std::free(buffer);
  }
  static void add(const std::string& name, std::uint64_t start, std::uint64_t end) {
    KernelTime& t = totals_[name];
    t.name = name;
    t.ns += static_cast<double>(end - start);
    ++t.runs;
  }
  static const char* copy_kind(std::uint8_t kind) {
    switch (kind) {
      case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        return "HtoD";
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        return "DtoH";
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        return "DtoD";
      default:
        return "other";
    }
  }

  static inline std::mutex mutex_;
  static inline std::map<std::string, KernelTime> totals_;
  static inline std::size_t dropped_ = 0;
};

}  // namespace slurm_train::bench
