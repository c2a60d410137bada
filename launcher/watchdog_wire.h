// The watchdog's wire: fixed-size frames over TCP between every rank and rank 0, each after the
// hello sealed with its connection's key, and the sockets that carry them (a listener on any
// port, a connect with a timeout, non-blocking reads). Who may connect is
// launcher/control_auth.h's; what the frames mean and when to end a job, launcher/watchdog.h's.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace slurm_train {

// A connection's own key: every frame on it after the hello is sealed with it (HMAC-SHA-256,
// launcher/control_auth.h says how the two ends agree on it).
using SessionKey = std::array<unsigned char, 32>;
// Rank 0's challenge to a new connection, bound into its proof: a proof is good once.
using Nonce = std::array<unsigned char, 16>;

// One fixed-size message; every rank runs the same binary on the same architecture.
struct WatchdogFrame {
  std::uint32_t magic = kMagic;
  std::uint32_t kind = 0;
  std::int32_t rank = 0;
  std::int32_t pid = 0;
  std::uint32_t phase = 0;
  std::int32_t code = 0;
  std::uint32_t idle_ms = 0;  // in a member's beat: milliseconds since its progress last changed
  std::uint32_t length = 0;   // in a hello: the bytes of proof that follow the frame
  std::uint64_t step = 0;
  std::uint64_t counter = 0;  // progress counter
  std::uint64_t seq = 0;      // the frame's number in its direction on its connection (the hello's is 0)
  // In a member's beat: its GPUs' mean utilisation and summed power, the monitor's newest reading
  // (launcher/gpu_monitor.h); negative where the rank has no GPU.
  double gpu_utilization_percent = -1;
  double gpu_power_watts = -1;
  // In a member's bye under `exec`: the joules its GPUs used from its program's first reported
  // step to its exit, over energy_steps steps (launcher/job_energy.h); kNoGpu, or kNotCounted
  // for a GPU without an energy counter or a program that reported no step.
  double energy_joules = kNoGpu;
  std::uint64_t energy_steps = 0;
  char text[152] = {};         // in a challenge: the nonce
  unsigned char mac[16] = {};  // the seal: HMAC-SHA-256 of the direction and the bytes above, cut to 16

  // The protocol's version is in it: a peer of another version is refused as a stranger.
  static constexpr std::uint32_t kMagic = 0x34575453;  // "STW4"
  static constexpr double kNoGpu = -1, kNotCounted = -2;
  // kChallenge: rank 0's first frame on a connection, unsealed (the nonce). kTail: a piece of the
  // text a kFail brings (the last lines of a program's output).
  enum Kind : std::uint32_t { kHello = 1, kWelcome, kBeat, kBye, kFail, kAbort, kTail, kChallenge };

  void set_text(std::string_view s) {
    const std::size_t n = std::min(s.size(), sizeof text - 1);
    std::memcpy(text, s.data(), n);
    text[n] = '\0';
  }
  std::string get_text() const { return std::string(text, strnlen(text, sizeof text)); }
};
static_assert(sizeof(WatchdogFrame) == 256);
// The largest proof a hello may carry (a munge credential of launcher/munge_auth.h is about 300).
constexpr std::uint32_t kMaxProofBytes = 1024;
// The most rank 0 reads from a connection that has not proved itself: one hello with the largest
// proof, all that a rank sends before its welcome. A stranger that sends more has it left in the
// kernel's socket buffer (bounded), not in rank 0's memory, until its hello is judged and it is
// closed. Uncapped, one read took in all a sender kept queued, for as long as it kept sending.
constexpr std::size_t kMaxUnprovenBytes = sizeof(WatchdogFrame) + kMaxProofBytes;

// Which way a frame goes: part of its seal, so that a frame cannot be sent back to its sender.
enum class FrameDirection : unsigned char { kToRoot = 1, kToMember = 2 };
// Seals `f` as frame number `seq` of its direction on a connection with `key`.
void seal_frame(WatchdogFrame& f, const SessionKey& key, FrameDirection direction, std::uint64_t seq);
// True when `f` is sealed with `key` as frame number `seq` of `direction` (compared in constant time).
bool frame_is_sealed(const WatchdogFrame& f, const SessionKey& key, FrameDirection direction, std::uint64_t seq);

// How often a rank reports to rank 0: every second in jobs of up to 2,000 ranks, less often in
// larger ones (5 s from 10,000 ranks), so that rank 0 reads at most about 2,000 beats a second
// whatever the job's size. A beat says how long its rank has made no progress, so rank 0 times
// a hang from the rank's own clock, not from when it last heard of it: hang detection is as
// exact at 16,384 ranks as at 2. A dead rank is known from its closed connection, not its beats.
inline double member_beat_seconds(int ranks) { return std::clamp(ranks / 2000.0, 1.0, 5.0); }

// Blocking send of one frame; false when the peer is gone or does not read for 2 s.
bool send_frame(int fd, const WatchdogFrame& f);
// Appends what the socket holds to `in`, without blocking, until `in` holds `limit` bytes (the
// rest stays queued for a later call); false on EOF or error (the peer is gone).
bool drain(int fd, std::string& in, std::size_t limit = SIZE_MAX);
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
// Accepts a waiting connection, with the watchdog's socket options; -1 when none could be (errno
// says why). `source` gets the peer's IPv4 address.
int accept_peer(int listen_fd, std::string& source);

// This host's IPv4 addresses, the one its host name resolves to first and loopback last: a
// peer tries them in turn (an address such as docker0's exists on every node and leads
// elsewhere; rank 0's sealed welcome tells a wrong listener from rank 0).
std::vector<std::string> local_addresses(const std::string& host);
// The IPv4 addresses `host` resolves to (how the others find rank 0 without MPI); empty when
// it does not resolve.
std::vector<std::string> host_addresses(const std::string& host);
// Connects within `timeout_ms` (then blocking, with the watchdog's socket options); -1 on failure.
int connect_to(const std::string& address, int port, int timeout_ms);

}  // namespace slurm_train
