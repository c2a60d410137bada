// libFuzzer target: what rank 0's watchdog reads from a connection (launcher/watchdog.cc's
// read_rank), as a stranger or a rank may send it: the hello and its proof (take_hello,
// check_hello with `run`'s shared secret), then frames that must carry the connection's seal in
// order, a munge credential's payload, and munged's socket in a slurm.conf. A hello whose proof
// is let in must be sealed with the key it gives; the frames after it count only while sealed.
// Seeds: a real hello for rank 1 of 4 with the secret and challenge below, followed by sealed
// beats, a tail and a failure; the old protocol's hello; a payload.
#include <cstring>

#include "launcher/control_handshake.h"
#include "launcher/munge_auth.h"
#include "test/fuzz/fuzz_support.h"

using namespace slurm_train;

namespace {

// Fixed, so that the seeds' seals hold (test/fuzz/seeds/control_wire_fuzz).
std::string secret() {
  std::string s(SharedSecretAuth::kSecretBytes, '\0');
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 7 + 1);
  return s;
}

Nonce challenge() {
  Nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<unsigned char>(0xa0 + i);
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  if (const auto payload = parse_munge_payload(bytes); payload && format_munge_payload(*payload) != bytes) std::abort();
  (void)munge_socket_in_slurm_conf(bytes);

  static SharedSecretAuth auth(secret());
  std::string in = bytes;
  const Hello hello = take_hello(in, 4);
  if (hello.state != HelloState::kWhole) return 0;
  if (hello.frame.rank < 1 || hello.frame.rank >= 4 || hello.proof.size() != hello.frame.length) std::abort();
  const ProofCheck proof = check_hello(hello, challenge(), auth);
  if (!proof.key) return 0;
  if (!frame_is_sealed(hello.frame, *proof.key, FrameDirection::kToRoot, 0)) std::abort();
  std::string tail;
  WatchdogFrame f;
  for (std::uint64_t seq = 1; next_frame(in, f); ++seq) {
    if (f.magic != WatchdogFrame::kMagic || !frame_is_sealed(f, *proof.key, FrameDirection::kToRoot, seq)) break;
    const std::string text = f.get_text();
    if (text.size() >= sizeof f.text) std::abort();
    if (f.kind == WatchdogFrame::kTail) tail += text;
  }
  return 0;
}
