#include "launcher/munge_auth.h"

#include <munge.h>
#include <strings.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "train/io/user_name.h"

namespace slurm_train {

namespace {

constexpr char kPayloadMagic[4] = {'S', 'T', 'M', '2'};
constexpr std::size_t kPayloadBytes = 4 + 4 + 4 + 4 + sizeof(Nonce) + sizeof(SessionKey);

template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}
template <typename T>
void get(std::string_view& in, T& value) {
  std::memcpy(&value, in.data(), sizeof value);
  in.remove_prefix(sizeof value);
}

// The cipher of every credential: it carries the rank's session key over the network, readable
// by whoever sees the connection if it went unencrypted. Chosen here, not left to munged's
// default (AES-128 in munge 0.5.15, but set when munge was built), and required of a credential
// rank 0 accepts: AES-256, the strongest munge 0.5.15 has (munge --list-ciphers).
constexpr int kCipher = MUNGE_CIPHER_AES256;

struct MungeCtx {
  munge_ctx_t ctx = munge_ctx_create();
  ~MungeCtx() {
    if (ctx) munge_ctx_destroy(ctx);
  }
};

// A context on `socket` (munge's default when empty); throws when none can be made.
std::unique_ptr<MungeCtx> context_for(const std::string& socket) {
  auto c = std::make_unique<MungeCtx>();
  if (!c->ctx) throw std::runtime_error("munge_ctx_create: out of memory");
  if (!socket.empty() && munge_ctx_set(c->ctx, MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS)
    throw std::runtime_error(
        fmt::format("munge_ctx_set(MUNGE_OPT_SOCKET, {}): {}", socket, munge_ctx_strerror(c->ctx)));
  return c;
}

}  // namespace

std::string format_munge_payload(const MungePayload& p) {
  std::string out(kPayloadMagic, sizeof kPayloadMagic);
  put(out, p.job);
  put(out, p.step);
  put(out, p.rank);
  out.append(reinterpret_cast<const char*>(p.challenge.data()), p.challenge.size());
  out.append(reinterpret_cast<const char*>(p.key.data()), p.key.size());
  return out;
}

std::optional<MungePayload> parse_munge_payload(std::string_view bytes) {
  if (bytes.size() != kPayloadBytes || std::memcmp(bytes.data(), kPayloadMagic, sizeof kPayloadMagic) != 0)
    return std::nullopt;
  bytes.remove_prefix(sizeof kPayloadMagic);
  MungePayload p;
  get(bytes, p.job);
  get(bytes, p.step);
  get(bytes, p.rank);
  get(bytes, p.challenge);
  get(bytes, p.key);
  return p;
}

std::optional<std::string> munge_socket_in_slurm_conf(std::string_view text) {
  std::optional<std::string> socket;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    for (std::string word; words >> word;) {
      const auto eq = word.find('=');
      if (eq == std::string::npos || ::strcasecmp(word.substr(0, eq).c_str(), "AuthInfo") != 0) continue;
      std::istringstream parts(word.substr(eq + 1));
      for (std::string part; std::getline(parts, part, ',');) {
        const auto inner = part.find('=');
        if (inner != std::string::npos && ::strcasecmp(part.substr(0, inner).c_str(), "socket") == 0 &&
            inner + 1 < part.size())
          socket = part.substr(inner + 1);
      }
    }
  }
  return socket;
}

std::string munge_socket_for(const Environment& env) {
  if (const std::string given = env_value(env, "SLURM_TRAIN_MUNGE_SOCKET"); !given.empty()) return given;
  std::string conf = env_value(env, "SLURM_CONF");
  if (conf.empty()) conf = "/etc/slurm/slurm.conf";
  std::ifstream in(conf);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return munge_socket_in_slurm_conf(text.str()).value_or("");
}

MungeAuth::MungeAuth(std::uint32_t job, std::uint32_t step, std::string socket, bool check_daemon)
    : job_(job), step_(step), socket_(std::move(socket)) {
  if (!check_daemon) return;
  Nonce probe{};
  random_bytes(probe.data(), probe.size());
  const ControlProof proof = prove(0, probe);
  const ProofCheck c = check(0, probe, proof.bytes);
  if (!c.key)
    throw std::runtime_error(fmt::format("munged at {} cannot decode its own credential: {}",
                                         socket_.empty() ? "munge's default socket" : socket_, c.why));
}

std::string MungeAuth::name() const {
  return fmt::format("munge credentials (munged at {})", socket_.empty() ? "munge's default socket" : socket_);
}

ControlProof MungeAuth::prove(int rank, const Nonce& challenge) {
  ControlProof proof;
  random_bytes(proof.key.data(), proof.key.size());
  const std::string payload = format_munge_payload({job_, step_, rank, challenge, proof.key});
  auto c = context_for(socket_);
  // Only this user (or root) can decode it: the session key in it is no one else's to read.
  if (munge_ctx_set(c->ctx, MUNGE_OPT_UID_RESTRICTION, ::getuid()) != EMUNGE_SUCCESS)
    throw std::runtime_error(fmt::format("munge_ctx_set(MUNGE_OPT_UID_RESTRICTION): {}", munge_ctx_strerror(c->ctx)));
  if (munge_ctx_set(c->ctx, MUNGE_OPT_CIPHER_TYPE, kCipher) != EMUNGE_SUCCESS)
    throw std::runtime_error(fmt::format("munge_ctx_set(MUNGE_OPT_CIPHER_TYPE, {}): {}",
                                         munge_enum_int_to_str(MUNGE_ENUM_CIPHER, kCipher),
                                         munge_ctx_strerror(c->ctx)));
  char* cred = nullptr;
  const munge_err_t e = munge_encode(&cred, c->ctx, payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    std::free(cred);
    throw std::runtime_error(fmt::format(
        "munge_encode via {}: {} (exec's supervisors prove to task 0 that they run as the job's user with a munge "
        "credential: is munged running on this node? SLURM_TRAIN_MUNGE_SOCKET names its socket)",
        socket_.empty() ? "munge's default socket" : socket_, munge_ctx_strerror(c->ctx)));
  }
  proof.bytes = cred;
  std::free(cred);
  return proof;
}

ProofCheck MungeAuth::check(int rank, const Nonce& challenge, std::string_view proof) {
  ProofCheck result;
  if (proof.empty() || proof.size() > kMaxProofBytes || proof.find('\0') != std::string_view::npos) {
    result.why = fmt::format("a proof of {} bytes is no munge credential", proof.size());
    return result;
  }
  std::unique_ptr<MungeCtx> c;
  try {
    c = context_for(socket_);
  } catch (const std::runtime_error& e) {
    result.why = e.what();
    return result;
  }
  const std::string cred(proof);
  void* data = nullptr;
  int length = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  const munge_err_t e = munge_decode(cred.c_str(), c->ctx, &data, &length, &uid, &gid);
  const std::string payload_bytes =
      data ? std::string(static_cast<const char*>(data), static_cast<std::size_t>(length)) : "";
  std::free(data);
  if (e == EMUNGE_CRED_UNAUTHORIZED) {
    result.refusal = ControlRefusal::kOtherUser;
    result.why = fmt::format("munge_decode: {}", munge_ctx_strerror(c->ctx));
    return result;
  }
  if (e == EMUNGE_CRED_REPLAYED) {
    result.refusal = ControlRefusal::kOtherJob;
    result.why = fmt::format("munge_decode: {}", munge_ctx_strerror(c->ctx));
    return result;
  }
  if (e != EMUNGE_SUCCESS) {
    result.why = fmt::format("munge_decode: {}", munge_ctx_strerror(c->ctx));
    return result;
  }
  if (uid != ::getuid()) {
    result.refusal = ControlRefusal::kOtherUser;
    result.why = fmt::format("a credential of {}; the job runs as {}", describe_user(uid), describe_user(::getuid()));
    return result;
  }
  int cipher = MUNGE_CIPHER_NONE;
  if (munge_ctx_get(c->ctx, MUNGE_OPT_CIPHER_TYPE, &cipher) != EMUNGE_SUCCESS || cipher != kCipher) {
    const char* name = munge_enum_int_to_str(MUNGE_ENUM_CIPHER, cipher);
    result.why =
        fmt::format("a credential encrypted with {} ({}), not {}: its session key may have been read on the way",
                    name ? name : "an unknown cipher", cipher, munge_enum_int_to_str(MUNGE_ENUM_CIPHER, kCipher));
    return result;
  }
  const auto payload = parse_munge_payload(payload_bytes);
  if (!payload) {
    result.why = fmt::format("a credential whose payload ({} bytes) is not a hello's", payload_bytes.size());
    return result;
  }
  if (payload->job != job_ || payload->step != step_ || payload->rank != rank || payload->challenge != challenge) {
    result.refusal = ControlRefusal::kOtherJob;
    result.why = fmt::format("a credential for job {} step {} rank {}{}, not for job {} step {} rank {}", payload->job,
                             payload->step, payload->rank,
                             payload->challenge != challenge ? " and another challenge" : "", job_, step_, rank);
    return result;
  }
  result.key = payload->key;
  return result;
}

}  // namespace slurm_train
