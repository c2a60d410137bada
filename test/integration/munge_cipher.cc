// munge_cipher: which cipher exec's munge credentials travel in, against a real munged, for
// control_plane_security.bats. Proves a hello as a rank does, decodes the credential to read
// the cipher of one, and checks another as rank 0 does; then makes credentials of the same payload in the other ciphers
// munged offers and asks rank 0's check of each. Prints one line each:
//   proof: cipher aes256, accepted
//   none: refused: a credential encrypted with none (0), not aes256: ...
#include <munge.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>
#include <string>

#include "launcher/munge_auth.h"

using namespace slurm_train;

namespace {

// The cipher munged encrypted `credential` with; exits when it does not decode.
int cipher_of(const std::string& credential, const std::string& socket) {
  munge_ctx_t ctx = munge_ctx_create();
  munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str());
  void* data = nullptr;
  int length = 0, cipher = -1;
  const munge_err_t e = munge_decode(credential.c_str(), ctx, &data, &length, nullptr, nullptr);
  std::free(data);
  if (e != EMUNGE_SUCCESS) {
    std::cerr << "munge_decode: " << munge_ctx_strerror(ctx) << "\n";
    std::exit(1);
  }
  munge_ctx_get(ctx, MUNGE_OPT_CIPHER_TYPE, &cipher);
  munge_ctx_destroy(ctx);
  return cipher;
}

// A credential of `payload` in `cipher`, for this user only, as prove() makes it but for the cipher.
std::string credential_in(int cipher, const std::string& payload, const std::string& socket) {
  munge_ctx_t ctx = munge_ctx_create();
  munge_ctx_set(ctx, MUNGE_OPT_SOCKET, socket.c_str());
  munge_ctx_set(ctx, MUNGE_OPT_UID_RESTRICTION, ::getuid());
  munge_ctx_set(ctx, MUNGE_OPT_CIPHER_TYPE, cipher);
  char* cred = nullptr;
  if (munge_encode(&cred, ctx, payload.data(), static_cast<int>(payload.size())) != EMUNGE_SUCCESS) {
    std::cerr << "munge_encode: " << munge_ctx_strerror(ctx) << "\n";
    std::exit(1);
  }
  std::string out = cred;
  std::free(cred);
  munge_ctx_destroy(ctx);
  return out;
}

std::string verdict(const ProofCheck& c) { return c.key ? "accepted" : "refused: " + c.why; }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"which cipher exec's munge credentials use, and what rank 0 accepts"};
  std::string socket;
  app.add_option("--munge-socket", socket, "munged's socket")->required();
  CLI11_PARSE(app, argc, argv);
  const std::uint32_t job = 7, step = 0;
  const Nonce challenge{1, 2, 3};
  MungeAuth auth(job, step, socket, true);
  // Two proofs: munged decodes a credential once only.
  const int cipher = cipher_of(auth.prove(1, challenge).bytes, socket);
  const ControlProof proof = auth.prove(1, challenge);
  std::cout << fmt::format("proof: cipher {}, {}\n", munge_enum_int_to_str(MUNGE_ENUM_CIPHER, cipher),
                           verdict(auth.check(1, challenge, proof.bytes)));
  for (int other : {MUNGE_CIPHER_NONE, MUNGE_CIPHER_AES128, MUNGE_CIPHER_BLOWFISH}) {
    const std::string payload = format_munge_payload({job, step, 1, challenge, proof.key});
    std::cout << fmt::format("{}: {}\n", munge_enum_int_to_str(MUNGE_ENUM_CIPHER, other),
                             verdict(auth.check(1, challenge, credential_in(other, payload, socket))));
  }
  return 0;
}
