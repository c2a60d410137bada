#include "launcher/control_handshake.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace slurm_train {

namespace {

using Clock = std::chrono::steady_clock;

// One whole frame off `fd` (into `f`; more bytes stay in `in`) before `deadline`. No more than
// the frame is read: whoever listens has not yet proved to be rank 0, and what rank 0 sends after
// its welcome stays queued for the watchdog.
bool read_frame(int fd, std::string& in, WatchdogFrame& f, Clock::time_point deadline) {
  while (!next_frame(in, f)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) != 1 || !drain(fd, in, sizeof(WatchdogFrame))) return false;
  }
  return true;
}

bool send_bytes(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::optional<MemberSession> join_control_plane(const std::string& address, int port, WatchdogFrame hello,
                                                ControlAuth& auth, int answer_ms) {
  MemberSession s;
  s.fd = connect_to(address, port, 2000);
  if (s.fd < 0) return std::nullopt;
  const auto turn = std::chrono::milliseconds(answer_ms);
  WatchdogFrame challenge;
  if (!read_frame(s.fd, s.in, challenge, Clock::now() + turn) || challenge.magic != WatchdogFrame::kMagic ||
      challenge.kind != WatchdogFrame::kChallenge) {
    ::close(s.fd);
    return std::nullopt;
  }
  Nonce nonce;
  std::memcpy(nonce.data(), challenge.text, nonce.size());
  ControlProof proof;
  try {
    proof = auth.prove(hello.rank, nonce);
  } catch (...) {
    ::close(s.fd);
    throw;
  }
  hello.magic = WatchdogFrame::kMagic;
  hello.kind = WatchdogFrame::kHello;
  hello.length = static_cast<std::uint32_t>(proof.bytes.size());
  seal_frame(hello, proof.key, FrameDirection::kToRoot, 0);
  WatchdogFrame welcome;
  if (!send_frame(s.fd, hello) || !send_bytes(s.fd, proof.bytes) ||
      !read_frame(s.fd, s.in, welcome, Clock::now() + turn) || welcome.magic != WatchdogFrame::kMagic ||
      welcome.kind != WatchdogFrame::kWelcome || !frame_is_sealed(welcome, proof.key, FrameDirection::kToMember, 0)) {
    ::close(s.fd);
    return std::nullopt;
  }
  s.key = proof.key;
  return s;
}

WatchdogFrame challenge_frame(const Nonce& nonce) {
  WatchdogFrame f;
  f.kind = WatchdogFrame::kChallenge;
  std::memcpy(f.text, nonce.data(), nonce.size());
  return f;
}

Hello take_hello(std::string& in, int ranks) {
  Hello h;
  if (in.size() < sizeof(WatchdogFrame)) return h;
  std::memcpy(&h.frame, in.data(), sizeof h.frame);
  const WatchdogFrame& f = h.frame;
  if (f.magic != WatchdogFrame::kMagic || f.kind != WatchdogFrame::kHello || f.rank <= 0 || f.rank >= ranks ||
      f.length > kMaxProofBytes) {
    h.state = HelloState::kMalformed;
    return h;
  }
  if (in.size() < sizeof f + f.length) return h;
  h.proof = in.substr(sizeof f, f.length);
  in.erase(0, sizeof f + f.length);
  h.state = HelloState::kWhole;
  return h;
}

ProofCheck check_hello(const Hello& hello, const Nonce& challenge, ControlAuth& auth) {
  ProofCheck c = auth.check(hello.frame.rank, challenge, hello.proof);
  if (c.key && !frame_is_sealed(hello.frame, *c.key, FrameDirection::kToRoot, 0)) {
    c.key.reset();
    c.refusal = ControlRefusal::kUnproven;
    c.why = "its hello is not sealed with the key its proof gives (it does not hold the job's secret)";
  }
  return c;
}

WatchdogFrame welcome_frame(const SessionKey& key) {
  WatchdogFrame f;
  f.kind = WatchdogFrame::kWelcome;
  seal_frame(f, key, FrameDirection::kToMember, 0);
  return f;
}

}  // namespace slurm_train
