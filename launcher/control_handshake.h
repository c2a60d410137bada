// The control plane's handshake (launcher/control_auth.h), both ends: a rank's join, and rank 0's
// reading and checking of a hello, apart from rank 0's sockets so that it is tested and fuzzed
// alone (test/fuzz/control_wire_fuzz.cc).
#pragma once

#include <optional>
#include <string>

#include "launcher/control_auth.h"
#include "launcher/watchdog_wire.h"

namespace slurm_train {

// ---- a rank ----
struct MemberSession {
  int fd = -1;
  SessionKey key{};
  std::string in;  // what rank 0 sent after its welcome, read with it
};
// Connects to rank 0 at `address`:`port`, answers its challenge with `hello` (its rank, pid and
// text set; the rest is filled here) and a proof, and checks the seal of its welcome. nullopt
// when whoever listens there is not the job's rank 0, or does not answer within `answer_ms` at
// each turn. Throws what auth.prove() throws (munged is down: no address would do better).
std::optional<MemberSession> join_control_plane(const std::string& address, int port, WatchdogFrame hello,
                                                ControlAuth& auth, int answer_ms);

// ---- rank 0 ----
WatchdogFrame challenge_frame(const Nonce& nonce);
enum class HelloState { kIncomplete, kWhole, kMalformed };
struct Hello {
  HelloState state = HelloState::kIncomplete;
  WatchdogFrame frame;
  std::string proof;
};
// Takes a hello (its frame and the proof after it) off the front of `in`. kMalformed: the frame
// is not this protocol's hello, names no rank in [1, ranks), or announces a proof longer than
// kMaxProofBytes; `in` is then left as it was.
Hello take_hello(std::string& in, int ranks);
// A whole hello's proof, then its seal under the session key the proof gives.
ProofCheck check_hello(const Hello& hello, const Nonce& challenge, ControlAuth& auth);
WatchdogFrame welcome_frame(const SessionKey& key);

}  // namespace slurm_train
