// The control plane's membership: frame seals, the two proofs, the hello's reading, rank 0's
// admission rules, and a real watchdog (rank 0 and a member in threads, on loopback) against
// strangers: a hello without the secret, a second hello for a connected rank, a silent
// connection, forged frames on a stranger's connection.
#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "launcher/control_admission.h"
#include "launcher/control_auth.h"
#include "launcher/control_handshake.h"
#include "launcher/munge_auth.h"
#include "launcher/rank_log.h"
#include "launcher/watchdog.h"
#include "launcher/watchdog_wire.h"
#include "test_support.h"

using namespace slurm_train;
using slurm_train::testing::TempDir;

namespace {

SessionKey key_of(unsigned char first) {
  SessionKey k{};
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<unsigned char>(first + i);
  return k;
}

Nonce nonce_of(unsigned char first) {
  Nonce n{};
  for (std::size_t i = 0; i < n.size(); ++i) n[i] = static_cast<unsigned char>(first + 3 * i);
  return n;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("control plane: a frame's seal is HMAC-SHA-256 of its direction and bytes, cut to 16 bytes") {
  WatchdogFrame f;
  f.kind = WatchdogFrame::kBeat;
  f.rank = 3;
  f.step = 77;
  f.set_text("node7\t0-3\tgpu 0");
  const SessionKey key = key_of(5);
  seal_frame(f, key, FrameDirection::kToRoot, 9);
  CHECK(f.seq == 9);
  // The same, by OpenSSL's one-shot HMAC over what the header says is sealed.
  unsigned char data[1 + offsetof(WatchdogFrame, mac)];
  data[0] = static_cast<unsigned char>(FrameDirection::kToRoot);
  std::memcpy(data + 1, &f, sizeof data - 1);
  unsigned char expected[32];
  unsigned int n = 0;
  REQUIRE(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), data, sizeof data, expected, &n));
  CHECK(std::memcmp(f.mac, expected, sizeof f.mac) == 0);
  CHECK(frame_is_sealed(f, key, FrameDirection::kToRoot, 9));
}

TEST_CASE("control plane: a sealed frame fails with another key, direction or number, and when any byte changes") {
  WatchdogFrame f;
  f.kind = WatchdogFrame::kFail;
  f.rank = 1;
  f.set_text("its program died");
  const SessionKey key = key_of(1);
  seal_frame(f, key, FrameDirection::kToRoot, 4);
  CHECK(frame_is_sealed(f, key, FrameDirection::kToRoot, 4));
  CHECK_FALSE(frame_is_sealed(f, key_of(2), FrameDirection::kToRoot, 4));
  CHECK_FALSE(frame_is_sealed(f, key, FrameDirection::kToMember, 4));  // sent back to its sender
  CHECK_FALSE(frame_is_sealed(f, key, FrameDirection::kToRoot, 5));    // replayed later
  for (std::size_t at : {std::size_t{0}, offsetof(WatchdogFrame, rank), offsetof(WatchdogFrame, step),
                         offsetof(WatchdogFrame, text) + 3, sizeof f - 1}) {
    WatchdogFrame changed = f;
    reinterpret_cast<unsigned char*>(&changed)[at] ^= 0x40;
    CAPTURE(at);
    CHECK_FALSE(frame_is_sealed(changed, key, FrameDirection::kToRoot, 4));
  }
}

TEST_CASE("control plane: the shared secret's proof gives both ends one key, bound to the rank and the challenge") {
  const std::string secret = SharedSecretAuth::new_secret();
  CHECK(secret.size() == SharedSecretAuth::kSecretBytes);
  CHECK(secret != SharedSecretAuth::new_secret());
  SharedSecretAuth member(secret), root(secret), stranger(SharedSecretAuth::new_secret());
  const Nonce challenge = nonce_of(9);
  const ControlProof proof = member.prove(3, challenge);
  const ProofCheck good = root.check(3, challenge, proof.bytes);
  REQUIRE(good.key);
  CHECK(*good.key == proof.key);
  // Another rank, another challenge, another secret: another key, so the hello's seal fails.
  CHECK(*root.check(4, challenge, proof.bytes).key != proof.key);
  CHECK(*root.check(3, nonce_of(10), proof.bytes).key != proof.key);
  CHECK(*root.check(3, challenge, stranger.prove(3, challenge).bytes).key != stranger.prove(3, challenge).key);
  const ProofCheck short_proof = root.check(3, challenge, "abc");
  CHECK_FALSE(short_proof.key);
  CHECK(short_proof.refusal == ControlRefusal::kUnproven);
  slurm_train::testing::check_refused<std::invalid_argument>([] { SharedSecretAuth bad("short"); },
                                                             "the control plane's secret has 5 bytes, expected 32");
}

TEST_CASE("control plane: a hello is taken whole, its proof after its frame; a frame that is no hello is refused") {
  SharedSecretAuth auth(SharedSecretAuth::new_secret());
  const Nonce challenge = nonce_of(1);
  const ControlProof proof = auth.prove(2, challenge);
  WatchdogFrame hello;
  hello.kind = WatchdogFrame::kHello;
  hello.rank = 2;
  hello.length = static_cast<std::uint32_t>(proof.bytes.size());
  seal_frame(hello, proof.key, FrameDirection::kToRoot, 0);
  const std::string wire = std::string(reinterpret_cast<const char*>(&hello), sizeof hello) + proof.bytes + "after";
  // Byte by byte: incomplete until the proof's last byte.
  std::string in;
  for (std::size_t i = 0; i + 5 < wire.size(); ++i) {
    in += wire[i];
    std::string copy = in;
    CHECK(take_hello(copy, 4).state == (i + 1 + 5 == wire.size() ? HelloState::kWhole : HelloState::kIncomplete));
  }
  in = wire;
  const Hello h = take_hello(in, 4);
  REQUIRE(h.state == HelloState::kWhole);
  CHECK(h.proof == proof.bytes);
  CHECK(in == "after");
  CHECK(check_hello(h, challenge, auth).key == proof.key);
  // The same hello answering another challenge: its seal does not hold.
  const ProofCheck replayed = check_hello(h, nonce_of(2), auth);
  CHECK_FALSE(replayed.key);
  CHECK(replayed.refusal == ControlRefusal::kUnproven);

  auto malformed = [&](WatchdogFrame f, int ranks) {
    std::string bytes(reinterpret_cast<const char*>(&f), sizeof f);
    const std::string before = bytes;
    const bool refused = take_hello(bytes, ranks).state == HelloState::kMalformed;
    CHECK(bytes == before);
    return refused;
  };
  WatchdogFrame f = hello;
  CHECK(malformed(f, 2));  // rank 2 of a job of 2
  f.rank = 0;
  CHECK(malformed(f, 4));  // rank 0 is the listener
  f = hello;
  f.kind = WatchdogFrame::kBeat;
  CHECK(malformed(f, 4));
  f = hello;
  f.magic = 0x53545744;  // the protocol before proofs
  CHECK(malformed(f, 4));
  f = hello;
  f.length = kMaxProofBytes + 1;
  CHECK(malformed(f, 4));
}

TEST_CASE("control plane: munge payloads keep their fields, and anything else is no payload") {
  MungePayload p;
  p.job = 4711;
  p.step = 3;
  p.rank = 12;
  p.challenge = nonce_of(7);
  p.key = key_of(40);
  const std::string bytes = format_munge_payload(p);
  const auto back = parse_munge_payload(bytes);
  REQUIRE(back);
  CHECK(back->job == 4711);
  CHECK(back->step == 3);
  CHECK(back->rank == 12);
  CHECK(back->challenge == p.challenge);
  CHECK(back->key == p.key);
  CHECK_FALSE(parse_munge_payload(bytes.substr(1)));
  CHECK_FALSE(parse_munge_payload(bytes + "x"));
  CHECK_FALSE(parse_munge_payload("XXXX" + bytes.substr(4)));
  CHECK_FALSE(parse_munge_payload(""));
}

TEST_CASE("control plane: munged's socket from slurm.conf's AuthInfo, in any case, comments ignored") {
  CHECK(munge_socket_in_slurm_conf(
            "ClusterName=c\nAuthType=auth/munge\nAuthInfo=socket=/srv/munge/s,cred_expire=10\n") == "/srv/munge/s");
  CHECK(munge_socket_in_slurm_conf("authinfo=cred_expire=30,SOCKET=/run/m.sock # the site's\n") == "/run/m.sock");
  CHECK(munge_socket_in_slurm_conf("NodeName=n1 CPUs=4\nAuthInfo=cred_expire=30\n") == std::nullopt);
  CHECK(munge_socket_in_slurm_conf("#AuthInfo=socket=/old\n") == std::nullopt);
  CHECK(munge_socket_in_slurm_conf("AuthInfo=socket=\n") == std::nullopt);
  TempDir dir;
  const std::string conf = dir.path + "/slurm.conf";
  std::ofstream(conf) << "AuthInfo=socket=/from/conf\n";
  CHECK(munge_socket_for({{"SLURM_CONF", conf}}) == "/from/conf");
  CHECK(munge_socket_for({{"SLURM_CONF", conf}, {"SLURM_TRAIN_MUNGE_SOCKET", "/given"}}) == "/given");
  CHECK(munge_socket_for({{"SLURM_CONF", dir.path + "/none.conf"}}) == "");
}

TEST_CASE(
    "control plane: admission holds a bounded number of strangers per address and in all, and logs each kind once") {
  ControlAdmission::Limits limits;
  limits.per_source = 3;
  limits.pending = 5;
  ControlAdmission a(limits);
  CHECK(a.admit("10.0.0.1"));
  CHECK(a.admit("10.0.0.1"));
  CHECK(a.admit("10.0.0.1"));
  CHECK_FALSE(a.admit("10.0.0.1"));  // a fourth from one address
  CHECK(a.admit("10.0.0.2"));
  CHECK(a.accepting());
  CHECK(a.admit("10.0.0.3"));
  CHECK(a.pending() == 5);
  CHECK_FALSE(a.accepting());  // the rest wait in the listen backlog
  a.settled("10.0.0.1");
  CHECK(a.accepting());
  CHECK(a.admit("10.0.0.1"));
  a.settled("10.0.0.9");  // never admitted: nothing changes
  CHECK(a.pending() == 5);

  CHECK(a.summary().empty());
  CHECK(a.refuse(ControlRefusal::kSilent));
  for (int i = 0; i < 999; ++i) CHECK_FALSE(a.refuse(ControlRefusal::kSilent));
  CHECK(a.refuse(ControlRefusal::kOtherUser));
  CHECK(a.refused(ControlRefusal::kSilent) == 1000);
  CHECK(a.summary() == "1001 connection(s) refused: 1 of another user, 1000 silent");
}

TEST_CASE(
    "control plane: strangers against a real watchdog are closed and logged once; the job's rank gets in and "
    "finishes") {
  TempDir dir;
  RankLog log0, log1;
  log0.open(dir.path + "/rank-0.log", 0);
  const int port = 21000 + ::getpid() % 20000;
  WatchdogOptions options;
  options.hang_timeout = 0;
  options.connect_timeout = 20;
  const std::string secret = SharedSecretAuth::new_secret();
  Watchdog root(WatchdogRendezvous{0, 2, "localhost", port}, std::make_unique<SharedSecretAuth>(secret),
                {"127.0.0.1", 100, "0", "-"}, options, log0);
  auto stranger_closed = [&](const std::string& bytes) {
    int fd = -1;
    for (int i = 0; i < 100 && (fd = connect_to("127.0.0.1", port, 1000)) < 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(fd >= 0);
    [[maybe_unused]] const auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    std::string in;
    bool closed = false;
    for (int i = 0; i < 100 && !closed; ++i) {
      pollfd p{fd, POLLIN, 0};
      closed = ::poll(&p, 1, 100) == 1 && !drain(fd, in);
    }
    ::close(fd);
    return closed;
  };
  // Before rank 1 connects: a hello for it made with another secret, and bytes that are no hello.
  SharedSecretAuth other(SharedSecretAuth::new_secret());
  auto forged_hello = [&](ControlAuth& auth) {
    // The challenge is not read: a stranger cannot know it, and its proof is for another one anyway.
    const ControlProof proof = auth.prove(1, nonce_of(0));
    WatchdogFrame hello;
    hello.kind = WatchdogFrame::kHello;
    hello.rank = 1;
    hello.length = static_cast<std::uint32_t>(proof.bytes.size());
    hello.set_text("evil\t-\t-");
    seal_frame(hello, proof.key, FrameDirection::kToRoot, 0);
    return std::string(reinterpret_cast<const char*>(&hello), sizeof hello) + proof.bytes;
  };
  CHECK(stranger_closed(forged_hello(other)));
  CHECK(stranger_closed(forged_hello(other)));
  CHECK(stranger_closed(std::string(300, 'x')));
  // With the secret but not rank 0's challenge: the seal is for another key.
  SharedSecretAuth same(secret);
  CHECK(stranger_closed(forged_hello(same)));
  std::promise<void> hello_again_done;
  std::thread member([&] {
    Watchdog w(WatchdogRendezvous{1, 2, "localhost", port}, std::make_unique<SharedSecretAuth>(secret),
               {"127.0.0.1", 101, "1", "-"}, options, log1);
    hello_again_done.get_future().wait();
    w.finish_and_wait_for_rank0(0);
  });
  const auto ranks = root.wait_for_all_ranks(20);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[1].host == "127.0.0.1");
  // Now a second hello for rank 1, even a genuine one, is refused, and the rank stays in.
  auto session = join_control_plane(
      "127.0.0.1", port,
      [] {
        WatchdogFrame h;
        h.rank = 1;
        return h;
      }(),
      same, 3000);
  CHECK_FALSE(session);
  hello_again_done.set_value();
  const auto table = root.wait_for_all_finished();
  CHECK(table[1].state == RankState::kFinished);
  CHECK(table[1].host == "127.0.0.1");
  root.finish(0);
  member.join();
  const std::string log = read_file(log0.path());
  CAPTURE(log);
  CHECK(count_of(log, "its hello carried no valid proof") == 1);
  CHECK(count_of(log, "it did not open with a hello of this protocol") == 1);
  CHECK(count_of(log, "it said hello for a rank that is already connected") == 1);
  CHECK(count_of(log,
                 "watchdog: 5 connection(s) refused: 1 not a hello, 3 without a valid proof, 1 for a rank already "
                 "connected") == 1);
}
