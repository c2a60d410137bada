#include "launcher/node_health.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "launcher/subprocess.h"

namespace slurm_train {

namespace {

// The value of `key=` in a line of `key=value` words ("" when absent).
std::string field(const std::string& line, const std::string& key) {
  std::istringstream words(line);
  std::string word;
  while (words >> word)
    if (word.rfind(key + "=", 0) == 0) return word.substr(key.size() + 1);
  return "";
}

// A non-blocking connect to addr:port: its socket (connecting), or -1 with `why` set.
int start_connect(const std::string& addr, int port, std::string& why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    why = fmt::format("its address {} does not resolve: {}", addr, ::gai_strerror(rc));
    return -1;
  }
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    why = fmt::format("socket: {}", std::strerror(errno));
    ::freeaddrinfo(found);
    return -1;
  }
  if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
    why = fmt::format("its slurmd ({}:{}) refused a connection: {}", addr, port, std::strerror(errno));
    ::close(fd);
    ::freeaddrinfo(found);
    return -1;
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

std::map<std::string, NodeFacts> parse_scontrol_nodes(const std::string& text) {
  std::map<std::string, NodeFacts> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    NodeFacts n{field(line, "NodeName"), field(line, "NodeAddr"), field(line, "State")};
    if (n.name.empty()) continue;
    if (n.addr.empty()) n.addr = n.name;
    out[n.name] = n;
  }
  return out;
}

int parse_slurmd_port(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key, eq;
    int port = 0;
    if (words >> key >> eq >> port && key == "SlurmdPort" && eq == "=") return port;
  }
  return 0;
}

std::string unusable_state(const std::string& state) {
  for (const char* bad : {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN"})
    if (state.find(bad) != std::string::npos) return fmt::format("Slurm marks it {}", state);
  if (!state.empty() && state.back() == '*') return fmt::format("Slurm marks it {} (not responding)", state);
  return "";
}

std::map<std::string, std::string> node_problems(const std::vector<std::string>& nodes, double timeout_seconds) {
  std::map<std::string, std::string> out;
  if (nodes.empty()) return out;
  const ProcessResult shown = run_process({"scontrol", "show", "node", "--oneliner"}, "slurm-client");
  if (shown.exit_code != 0)
    throw std::runtime_error(fmt::format("scontrol show node failed (exit {})", shown.exit_code));
  const ProcessResult config = run_process({"scontrol", "show", "config"}, "slurm-client");
  const int port = config.exit_code == 0 ? parse_slurmd_port(config.out) : 0;
  const auto facts = parse_scontrol_nodes(shown.out);
  std::vector<std::pair<std::string, int>> probes;  // node, connecting socket
  for (const auto& name : nodes) {
    const auto it = facts.find(name);
    if (it == facts.end()) {
      out[name] = "Slurm does not know it";
      continue;
    }
    out[name] = unusable_state(it->second.state);
    if (!out[name].empty() || port <= 0) continue;
    std::string why;
    const int fd = start_connect(it->second.addr, port, why);
    if (fd < 0)
      out[name] = why;
    else
      probes.emplace_back(name, fd);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  std::vector<pollfd> fds;
  for (const auto& [name, fd] : probes) fds.push_back({fd, POLLOUT, 0});
  std::size_t open = fds.size();
  while (open > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      int error = 0;
      socklen_t len = sizeof error;
      ::getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &error, &len);
      if (error != 0)
        out[probes[i].first] = fmt::format("its slurmd ({}:{}) refused a connection: {}",
                                           facts.at(probes[i].first).addr, port, std::strerror(error));
      ::close(fds[i].fd);
      fds[i].fd = -1;
      --open;
    }
  }
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].fd < 0) continue;
    out[probes[i].first] = fmt::format("its slurmd ({}:{}) did not answer within {:.0f} s",
                                       facts.at(probes[i].first).addr, port, timeout_seconds);
    ::close(fds[i].fd);
  }
  return out;
}

std::map<std::string, std::string> node_check_failures(const std::string& output, const std::vector<std::string>& nodes,
                                                       double limit_seconds) {
  std::map<std::string, std::string> said;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    // srun --label would put "N: " first; the host is named in the line itself.
    const auto at = line.find("node-check ");
    if (at == std::string::npos) continue;
    std::istringstream words(line.substr(at + 11));
    std::string host, rest;
    words >> host;
    std::getline(words >> std::ws, rest);
    if (!host.empty() && !rest.empty()) said[host] = rest;
  }
  std::map<std::string, std::string> failures;
  for (const auto& node : nodes) {
    const auto it = said.find(node);
    if (it == said.end())
      failures[node] =
          fmt::format("its node check (slurm-train doctor --node) did not report within {:.0f} s", limit_seconds);
    else if (it->second != "ok")
      failures[node] = fmt::format("its node check (slurm-train doctor --node): {}", it->second);
  }
  return failures;
}

}  // namespace slurm_train
