#include "launcher/preempt_signals.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace slurm_train {

namespace {

struct Named {
  const char* name;
  int number;
};
constexpr Named kSignals[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"USR1", SIGUSR1},
                              {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"ALRM", SIGALRM}, {"CONT", SIGCONT},
                              {"URG", SIGURG},   {"XCPU", SIGXCPU}, {"PWR", SIGPWR},   {"KILL", SIGKILL},
                              {"STOP", SIGSTOP}};

std::atomic<int> received{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler may only touch a lock-free atomic");

extern "C" void on_preemption_signal(int signal) {
  int expected = 0;
  received.compare_exchange_strong(expected, signal);
}

}  // namespace

std::vector<int> parse_signal_list(const std::string& list) {
  std::vector<int> out;
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t comma = std::min(list.find(',', begin), list.size());
    std::string entry = list.substr(begin, comma - begin);
    begin = comma + 1;
    std::string upper = entry;
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    if (upper.rfind("SIG", 0) == 0) upper.erase(0, 3);
    int number = 0;
    if (!upper.empty() && std::all_of(upper.begin(), upper.end(), [](unsigned char c) { return std::isdigit(c); })) {
      number = upper.size() <= 2 ? std::stoi(upper) : 0;
    } else {
      for (const auto& s : kSignals)
        if (upper == s.name) number = s.number;
    }
    if (number == SIGKILL || number == SIGSTOP)
      throw std::invalid_argument(fmt::format("--preempt-signal '{}': {} cannot be caught", list, entry));
    if (number <= 0 || number >= NSIG)
      throw std::invalid_argument(fmt::format(
          "--preempt-signal '{}': unknown signal '{}': expected names such as USR1, USR2, TERM, INT, HUP, XCPU "
          "or numbers, comma-separated",
          list, entry));
    if (std::find(out.begin(), out.end(), number) == out.end()) out.push_back(number);
  }
  return out;
}

std::string signal_name(int signal) {
  for (const auto& s : kSignals)
    if (s.number == signal) return std::string("SIG") + s.name;
  return fmt::format("signal {}", signal);
}

void install_preemption_handlers(const std::vector<int>& signals) {
  for (const int s : signals) {
    struct sigaction action {};
    action.sa_handler = on_preemption_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(s, &action, nullptr) != 0)
      throw std::system_error(errno, std::generic_category(), fmt::format("sigaction({})", signal_name(s)));
  }
}

int preemption_signal_received() { return received.load(); }

}  // namespace slurm_train
