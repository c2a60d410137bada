#include "launcher/control_auth.h"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdexcept>

namespace slurm_train {

const char* describe(ControlRefusal kind) {
  switch (kind) {
    case ControlRefusal::kNotAHello:
      return "it did not open with a hello of this protocol for a rank of the job";
    case ControlRefusal::kUnproven:
      return "its hello carried no valid proof that it is one of the job's tasks";
    case ControlRefusal::kOtherUser:
      return "its credential is another user's than the job's";
    case ControlRefusal::kOtherJob:
      return "its proof was made for another job, step, rank or challenge (a replay?)";
    case ControlRefusal::kDuplicateRank:
      return "it said hello for a rank that is already connected";
    case ControlRefusal::kSilent:
      return "it sent no whole hello within the time allowed";
    case ControlRefusal::kTooMany:
      return "its address has too many connections waiting to prove themselves";
  }
  return "?";
}

std::string SharedSecretAuth::new_secret() {
  std::string secret(kSecretBytes, '\0');
  random_bytes(reinterpret_cast<unsigned char*>(secret.data()), secret.size());
  return secret;
}

SharedSecretAuth::SharedSecretAuth(std::string secret) : secret_(std::move(secret)) {
  if (secret_.size() != kSecretBytes)
    throw std::invalid_argument(
        fmt::format("the control plane's secret has {} bytes, expected {}", secret_.size(), kSecretBytes));
}

namespace {
constexpr char kSessionLabel[] = "slurm-train control session v2";
constexpr std::size_t kRankNonceBytes = 16;
}  // namespace

SessionKey SharedSecretAuth::session_key(int rank, const Nonce& challenge, std::string_view rank_nonce) const {
  std::string data(kSessionLabel, sizeof kSessionLabel);
  data.append(reinterpret_cast<const char*>(&rank), sizeof rank);
  data.append(reinterpret_cast<const char*>(challenge.data()), challenge.size());
  data.append(rank_nonce);
  SessionKey key{};
  unsigned int n = 0;
  if (!HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
            reinterpret_cast<const unsigned char*>(data.data()), data.size(), key.data(), &n))
    throw std::runtime_error("HMAC-SHA-256 failed (out of memory?)");
  return key;
}

ControlProof SharedSecretAuth::prove(int rank, const Nonce& challenge) {
  ControlProof proof;
  proof.bytes.resize(kRankNonceBytes);
  random_bytes(reinterpret_cast<unsigned char*>(proof.bytes.data()), proof.bytes.size());
  proof.key = session_key(rank, challenge, proof.bytes);
  return proof;
}

// Any rank nonce gives a key; only the secret's holder can seal the hello with it.
ProofCheck SharedSecretAuth::check(int rank, const Nonce& challenge, std::string_view proof) {
  ProofCheck c;
  if (proof.size() != kRankNonceBytes) {
    c.why = fmt::format("a proof of {} bytes, expected {}", proof.size(), kRankNonceBytes);
    return c;
  }
  c.key = session_key(rank, challenge, proof);
  return c;
}

}  // namespace slurm_train
