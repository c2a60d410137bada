// The watchdog's wire: fixed-size frames over TCP between every rank and rank 0, and the
// sockets that carry them (a listener on any port, a connect with a timeout, non-blocking
// reads). What the frames mean and when to end a job is launcher/watchdog.h's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace slurm_train {

// One fixed-size message; every rank runs the same binary on the same architecture.
struct WatchdogFrame {
  std::uint32_t magic = kMagic;
  std::uint32_t kind = 0;
  std::int32_t rank = 0;
  std::int32_t pid = 0;
  std::uint32_t phase = 0;
  std::int32_t code = 0;
  std::uint64_t step = 0;
  std::uint64_t counter = 0;  // progress counter; in a hello, the job's token
  std::uint32_t idle_ms = 0;  // in a member's beat: milliseconds since its progress last changed
  char text[212] = {};

  static constexpr std::uint32_t kMagic = 0x53545744;  // "STWD"
  // kTail: a piece of the text a kFail brings (the last lines of a program's output).
  enum Kind : std::uint32_t { kHello = 1, kWelcome, kBeat, kBye, kFail, kAbort, kTail };

  void set_text(std::string_view s) {
    const std::size_t n = std::min(s.size(), sizeof text - 1);
    std::memcpy(text, s.data(), n);
    text[n] = '\0';
  }
  std::string get_text() const { return std::string(text, strnlen(text, sizeof text)); }
};
static_assert(sizeof(WatchdogFrame) == 256);

// How often a rank reports to rank 0: every second in jobs of up to 2,000 ranks, less often in
// larger ones (5 s from 10,000 ranks), so that rank 0 reads at most about 2,000 beats a second
// whatever the job's size. A beat says how long its rank has made no progress, so rank 0 times
// a hang from the rank's own clock, not from when it last heard of it: hang detection is as
// exact at 16,384 ranks as at 2. A dead rank is known from its closed connection, not its beats.
inline double member_beat_seconds(int ranks) { return std::clamp(ranks / 2000.0, 1.0, 5.0); }

// Blocking send of one frame; false when the peer is gone or does not read for 2 s.
bool send_frame(int fd, const WatchdogFrame& f);
// Appends what the socket holds to `in`, without blocking; false on EOF or error (the peer is gone).
bool drain(int fd, std::string& in);
// Takes the first whole frame out of `in`; false when there is none yet.
bool next_frame(std::string& in, WatchdogFrame& f);

// A listening socket on every IPv4 address and a port the kernel chose. Throws
// std::runtime_error naming the failing call.
struct Listener {
  int fd = -1;
  int port = 0;
};
Listener listen_on_any_port();
// The same on a given port (SO_REUSEADDR: a requeued job's rank 0 listens on the port its last
// run left in TIME_WAIT). Throws std::runtime_error naming the port when it is taken.
Listener listen_on_port(int port);
// Accepts a waiting connection, with the watchdog's socket options; -1 when none could be.
int accept_peer(int listen_fd);

// This host's IPv4 addresses, the one its host name resolves to first and loopback last: a
// peer tries them in turn (an address such as docker0's exists on every node and leads
// elsewhere; the token in the hello tells a wrong listener from rank 0).
std::vector<std::string> local_addresses(const std::string& host);
// The IPv4 addresses `host` resolves to (how the others find rank 0 without MPI); empty when
// it does not resolve.
std::vector<std::string> host_addresses(const std::string& host);
// Connects within `timeout_ms` (then blocking, with the watchdog's socket options); -1 on failure.
int connect_to(const std::string& address, int port, int timeout_ms);

}  // namespace slurm_train
