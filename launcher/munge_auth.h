// `exec`'s proof of membership (launcher/control_auth.h): a munge credential from the node's
// munged, the daemon Slurm itself authenticates every message with. The credential says which
// user made it (munged vouches for it), may be decoded only by that user (a uid restriction:
// the session key in it stays the job's), and carries the job, the step, the rank, rank 0's
// challenge and the rank's random session key. Rank 0 accepts it when munged decodes it, its
// user is rank 0's own (the job's owner) and its payload names this job, step, rank and
// challenge. munged refuses a credential decoded twice, and one older than its time to live.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/control_auth.h"
#include "spank/jobenv/environment.h"

namespace slurm_train {

// What a credential carries, in a fixed binary layout.
struct MungePayload {
  std::uint32_t job = 0, step = 0;
  std::int32_t rank = 0;
  Nonce challenge{};
  SessionKey key{};
};
std::string format_munge_payload(const MungePayload& p);
// nullopt when `bytes` is not a payload of this layout.
std::optional<MungePayload> parse_munge_payload(std::string_view bytes);

// The socket of the munged that Slurm uses, from slurm.conf's text: the `socket=` of its AuthInfo
// (keys in any case); nullopt when it names none.
std::optional<std::string> munge_socket_in_slurm_conf(std::string_view text);
// Where to reach munged: $SLURM_TRAIN_MUNGE_SOCKET, else AuthInfo's socket in $SLURM_CONF (or
// /etc/slurm/slurm.conf), else "" (munge's own default, /run/munge/munge.socket.2).
std::string munge_socket_for(const Environment& env);

class MungeAuth : public ControlAuth {
 public:
  // `socket`: "" for munge's default. Throws std::runtime_error when `check_daemon` and munged
  // cannot encode and decode a credential there (rank 0 finds out before any rank knocks).
  MungeAuth(std::uint32_t job, std::uint32_t step, std::string socket, bool check_daemon);
  std::string name() const override;
  ControlProof prove(int rank, const Nonce& challenge) override;
  ProofCheck check(int rank, const Nonce& challenge, std::string_view proof) override;

 private:
  std::uint32_t job_, step_;
  std::string socket_;
};

}  // namespace slurm_train
