// Who may join the watchdog's control plane: a rank proves to rank 0 that it is one of the job's
// own tasks, and both ends get the key that seals every later frame of their connection.
//
//   rank 0                               a rank
//   challenge (a fresh nonce)  ───────►
//                              ◄───────  hello (rank, host, pid), sealed with the session key,
//                                        then its proof: prove(rank, nonce)
//   check(rank, nonce, proof) gives the session key; the hello's seal must match it
//   welcome, sealed            ───────►  the rank checks the seal: this is the job's rank 0
//
// Two ways to prove it (launcher/watchdog.h uses the first for `run`, the second for `exec`):
//   - SharedSecretAuth: a secret of 32 random bytes that rank 0 broadcasts over MPI, which only
//     the job's processes read. The session key is HMAC(secret, rank, nonce, the rank's nonce).
//   - MungeAuth (launcher/munge_auth.h): a munge credential from the node's munged, which says
//     which user made it; it carries the rank's random session key, and only the job's user can
//     decode it.
// A proof is bound to its challenge, so one seen on the wire is worth nothing later.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "launcher/watchdog_wire.h"
#include "train/io/random_bytes.h"  // the nonces, secrets and keys of every proof

namespace slurm_train {

// Why rank 0 refused a connection: each kind is logged once (launcher/control_admission.h).
enum class ControlRefusal {
  kNotAHello,      // its first bytes are not a hello of this protocol, or name no rank of the job
  kUnproven,       // its proof does not hold: not the job's secret, or a credential that does not decode
  kOtherUser,      // a credential of another user than the job's
  kOtherJob,       // a proof made for another job, step, rank or challenge
  kDuplicateRank,  // a hello for a rank that is already connected
  kSilent,         // no whole hello within the time allowed
  kTooMany,        // its source has too many connections waiting to prove themselves
};
constexpr int kControlRefusalKinds = 7;
// What the log says of it, after "refused a connection from ADDRESS: ".
const char* describe(ControlRefusal kind);

struct ControlProof {
  std::string bytes;  // what follows the hello on the wire
  SessionKey key{};
};

struct ProofCheck {
  std::optional<SessionKey> key;  // set when the proof holds
  ControlRefusal refusal = ControlRefusal::kUnproven;
  std::string why;  // when it does not: the detail, for the log
};

class ControlAuth {
 public:
  virtual ~ControlAuth() = default;
  // For the log: "a secret shared over MPI", "munge credentials (socket ...)".
  virtual std::string name() const = 0;
  // A rank's proof for its hello. Throws std::runtime_error when it cannot make one (munged down).
  virtual ControlProof prove(int rank, const Nonce& challenge) = 0;
  // Rank 0: whether `proof` shows that the hello for `rank`, answering `challenge`, comes from the
  // job. The caller then checks the hello's seal with the key.
  virtual ProofCheck check(int rank, const Nonce& challenge, std::string_view proof) = 0;
};

class SharedSecretAuth : public ControlAuth {
 public:
  static constexpr std::size_t kSecretBytes = 32;
  // A fresh secret (rank 0 draws it).
  static std::string new_secret();
  // `secret`: kSecretBytes bytes. Throws std::invalid_argument otherwise.
  explicit SharedSecretAuth(std::string secret);
  std::string name() const override { return "a secret shared over MPI"; }
  ControlProof prove(int rank, const Nonce& challenge) override;
  ProofCheck check(int rank, const Nonce& challenge, std::string_view proof) override;

 private:
  SessionKey session_key(int rank, const Nonce& challenge, std::string_view rank_nonce) const;
  std::string secret_;
};

}  // namespace slurm_train
