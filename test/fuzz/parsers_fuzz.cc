// libFuzzer target for every parser of outside input: hostlists, CPU lists, GPU lists,
// CUDA_VISIBLE_DEVICES, NCCL profile files, NCCL_SOCKET_IFNAME, option values and their
// SLURM_TRAIN_* defaults, plugstack.conf arguments, port ranges. The first byte picks the
// parser, the rest is its input. Each parser may refuse input only with its documented error
// type (InputError, HostlistError); any other exception, crash or sanitizer report is a finding.
//
//   make fuzz [FUZZ_SECONDS=300]   (clang -fsanitize=fuzzer,address,undefined)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "spank/jobenv/binding.h"
#include "spank/jobenv/cpuset.h"
#include "spank/jobenv/hostlist.h"
#include "spank/jobenv/nccl_profile.h"
#include "spank/jobenv/rendezvous.h"
#include "spank/jobenv/text.h"
#include "spank/options.h"
#include "spank/site_config.h"

using namespace slurm_train;

namespace {

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t space = text.find(' ', start);
    if (space == text.npos) space = text.size();
    if (space > start) words.emplace_back(text.substr(start, space - start));
    start = space + 1;
  }
  return words;
}

void fuzz_one(std::uint8_t which, std::string_view input) {
  switch (which % 9) {
    case 0: {
      auto hosts = expand_hostlist(input);
      if (hosts.empty() || hosts.size() > kMaxHosts) std::abort();
      break;
    }
    case 1: {
      CpuSet cpus = parse_cpulist("fuzz", input);
      // Printing and parsing again gives the same set.
      if (parse_cpulist("fuzz", format_cpulist(cpus)) != cpus) std::abort();
      break;
    }
    case 2:
      parse_gpu_index_list("fuzz", input);
      parse_visible_devices(input);
      break;
    case 3:
      parse_profile("fuzz", "fuzz.conf", input);
      break;
    case 4:
      check_socket_ifname(input, "node1", {"lo", "eth0", "ib0"});
      break;
    case 5: {
      RecordedOptions recorded;
      std::vector<std::string> words = split_words(input);
      for (std::size_t i = 0; i < words.size() && i < 8; ++i)
        record_option(recorded, static_cast<OptionId>(1 + i % 4), words[i].c_str(), i == 0);
      std::map<std::string, std::string> env;
      if (!words.empty()) env["SLURM_TRAIN_BIND"] = words.back();
      if (words.size() > 1) env["SLURM_TRAIN_NCCL"] = words[words.size() - 2];
      resolve_settings(recorded, SiteConfig{}, [&](const std::string& key) -> std::optional<std::string> {
        auto it = env.find(key);
        if (it == env.end()) return std::nullopt;
        return it->second;
      });
      break;
    }
    case 6:
      // Folders that exist everywhere keep the file system out of the way.
      parse_site_args(split_words(input));
      break;
    case 7:
      parse_port_range("fuzz", input);
      break;
    case 8:
      master_addr(input);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    fuzz_one(data[0], input);
  } catch (const InputError&) {
  } catch (const HostlistError&) {
  }
  return 0;
}
