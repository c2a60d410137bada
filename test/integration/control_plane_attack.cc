// control_plane_attack: what another user of a cluster can try against a job's watchdog (its
// control plane, launcher/watchdog.h), for control_plane_security.bats. It speaks the wire
// (launcher/watchdog_wire.h) as a rank would, without being one:
//   old-hello   the hello of the protocol before proofs (a token anyone could compute), then close
//   hello       rank 0's challenge answered with a hello for --rank and the best proof this user
//               can make: a munge credential of its own (--munge-socket), else random bytes;
//               then close without a word (what a dead rank does)
//   fail        the same hello, then a failure report with --text, as a rank about to abort
//   beats       the same hello, then a beat with a growing step every 0.2 s for --seconds (the
//               beats of a rank that makes progress)
//   idle        --count connections that send nothing, held for --seconds
// Prints one line per connection outcome ("closed by rank 0 after N ms", "still open"), so that
// the test sees the refusals, not just the job's result.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "launcher/control_auth.h"
#include "launcher/munge_auth.h"
#include "launcher/watchdog_wire.h"
#include "spank/jobenv/rendezvous.h"

using namespace slurm_train;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string attack, host = "127.0.0.1", munge_socket, text = "forged failure (host evil, pid 4242)";
  int port = 0, rank = 1, count = 1000;
  std::uint32_t job = 0, step = 0;
  double seconds = 5;
};

// Waits up to `ms` for rank 0 to close `fd`; the milliseconds it took, or -1 when it is still open.
long closed_within(int fd, int ms) {
  const auto started = Clock::now();
  std::string in;
  while (Clock::now() - started < std::chrono::milliseconds(ms)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) == 1 && !drain(fd, in))
      return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  }
  return -1;
}

void report(const std::string& what, long ms) {
  if (ms >= 0)
    std::printf("%s: closed by rank 0 after %ld ms\n", what.c_str(), ms);
  else
    std::printf("%s: still open\n", what.c_str());
  std::fflush(stdout);
}

int connect_or_die(const Options& o) {
  const int fd = connect_to(o.host, o.port, 2000);
  if (fd < 0) {
    std::fprintf(stderr, "control_plane_attack: cannot connect to %s:%d\n", o.host.c_str(), o.port);
    std::exit(1);
  }
  return fd;
}

// A hello for o.rank answering rank 0's challenge, with this user's best proof. Returns the key
// the attacker sealed it with (its own: rank 0 never shares it).
SessionKey forged_hello(int fd, const Options& o) {
  std::string in;
  WatchdogFrame challenge;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (!next_frame(in, challenge) && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) == 1 && !drain(fd, in)) break;
  }
  Nonce nonce{};
  std::memcpy(nonce.data(), challenge.text, nonce.size());
  ControlProof proof;
  if (!o.munge_socket.empty()) {
    proof = MungeAuth(o.job, o.step, o.munge_socket, false).prove(o.rank, nonce);
  } else {
    proof = SharedSecretAuth(SharedSecretAuth::new_secret()).prove(o.rank, nonce);
  }
  WatchdogFrame hello;
  hello.kind = WatchdogFrame::kHello;
  hello.rank = o.rank;
  hello.pid = 4242;
  hello.length = static_cast<std::uint32_t>(proof.bytes.size());
  hello.set_text("evil\t0\t-");
  seal_frame(hello, proof.key, FrameDirection::kToRoot, 0);
  send_frame(fd, hello);
  [[maybe_unused]] const auto n = ::send(fd, proof.bytes.data(), proof.bytes.size(), MSG_NOSIGNAL);
  return proof.key;
}

int attack(const Options& o) {
  if (o.attack == "idle") {
    std::vector<int> fds;
    for (int i = 0; i < o.count; ++i) fds.push_back(connect_or_die(o));
    std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
    int open = 0;
    for (const int fd : fds) {
      std::string in;
      // The first read may take the challenge; the end of the stream shows at the latest in the second.
      const bool closed = !drain(fd, in) || !drain(fd, in);
      open += closed ? 0 : 1;
      ::close(fd);
    }
    std::printf("idle: %d of %d connections still open after %.0f s\n", open, o.count, o.seconds);
    return 0;
  }
  const int fd = connect_or_die(o);
  if (o.attack == "old-hello") {
    struct OldFrame {
      std::uint32_t magic = 0x53545744, kind = 1;
      std::int32_t rank = 1, pid = 4242;
      char rest[240] = {};
    } old;
    old.rank = o.rank;
    [[maybe_unused]] const auto n = ::send(fd, &old, sizeof old, MSG_NOSIGNAL);
    report("old-hello", closed_within(fd, 3000));
    return 0;
  }
  const SessionKey key = forged_hello(fd, o);
  if (o.attack == "hello") {
    report("hello", closed_within(fd, 3000));
  } else if (o.attack == "fail") {
    WatchdogFrame f;
    f.kind = WatchdogFrame::kFail;
    f.rank = o.rank;
    f.pid = 4242;
    f.code = 1;
    f.set_text(o.text);
    seal_frame(f, key, FrameDirection::kToRoot, 1);
    send_frame(fd, f);
    report("fail", closed_within(fd, 3000));
  } else if (o.attack == "beats") {
    const auto started = Clock::now();
    std::uint64_t step = 1000;
    for (std::uint64_t seq = 1; Clock::now() - started < std::chrono::duration<double>(o.seconds); ++seq) {
      WatchdogFrame beat;
      beat.kind = WatchdogFrame::kBeat;
      beat.rank = o.rank;
      beat.pid = 4242;
      beat.step = ++step;
      beat.counter = step;
      seal_frame(beat, key, FrameDirection::kToRoot, seq);
      if (!send_frame(fd, beat)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    report("beats", closed_within(fd, 100));
  } else {
    std::fprintf(stderr, "control_plane_attack: unknown attack '%s'\n", o.attack.c_str());
    return 2;
  }
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"what another user can try against a job's watchdog", "control_plane_attack"};
  app.add_option("attack", o.attack, "old-hello, hello, fail, beats or idle")->required();
  app.add_option("--host", o.host, "rank 0's address")->capture_default_str();
  app.add_option("--port", o.port, "rank 0's port (or --job and --step: exec's port, as anyone computes it)");
  app.add_option("--job", o.job, "the job's id (with --step: its exec port, and the credential's payload)");
  app.add_option("--step", o.step, "the step's id");
  app.add_option("--rank", o.rank, "the rank to speak for")->capture_default_str();
  app.add_option("--munge-socket", o.munge_socket, "sign the hello with this user's own munge credential");
  app.add_option("--count", o.count, "idle: how many connections")->capture_default_str();
  app.add_option("--seconds", o.seconds, "idle and beats: how long")->capture_default_str();
  app.add_option("--text", o.text, "fail: the failure's text")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (o.port == 0) o.port = control_port(o.job, o.step, PortRange{});
  try {
    return attack(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "control_plane_attack: %s\n", e.what());
    return 1;
  }
}
