// control-plane: the watchdog's star at many ranks on one machine. Rank 0 is the real watchdog
// (launcher/watchdog.h, in a process of its own); the other N - 1 ranks are simulated by one
// process holding N - 1 connections that speak the watchdog's wire (launcher/watchdog_wire.h):
// each joins as a rank does (launcher/control_handshake.h: rank 0's challenge, a hello with its
// proof, the sealed welcome; 8 at a time, as the tasks of a node knock together), then sends a
// sealed beat with a growing step every member_beat_seconds(N), as ranks in steady training send
// them (all at once: a worse burst than real ranks, whose beats spread).
// --auth secret: `run`'s proof (a secret shared over MPI); --auth munge: `exec`'s (a munge
// credential per rank, encoded and decoded by the munged at --munge-socket, on this machine).
// For each N it prints one line of key=value pairs:
//   connect_s    from the start of rank 0 until every rank has its welcome
//   rank0_cpu    rank 0's CPU time per second of wall time over --steady seconds of training
//   death_s      from one simulated rank closing its connection (a rank that died) until every
//                other connection has rank 0's word that the job ends (or is closed)
//   table_ms     rank 0's verdict over the whole table and the table's text (judge_hang,
//                format_status_table), as a hang would print it
// A run that does not finish within --limit seconds says so (finished=0).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "launcher/control_auth.h"
#include "launcher/control_handshake.h"
#include "launcher/munge_auth.h"
#include "launcher/rank_log.h"
#include "launcher/rank_status.h"
#include "launcher/watchdog.h"
#include "launcher/watchdog_wire.h"

using namespace slurm_train;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void raise_open_files(int needed) {
  rlimit l{};
  getrlimit(RLIMIT_NOFILE, &l);
  if (l.rlim_cur < static_cast<rlim_t>(needed)) {
    l.rlim_cur = std::min<rlim_t>(l.rlim_max, static_cast<rlim_t>(needed));
    setrlimit(RLIMIT_NOFILE, &l);
  }
}

struct AuthChoice {
  std::string kind = "secret";  // or "munge"
  std::string secret;           // drawn once, before the fork: both processes hold it
  std::string munge_socket;
  std::unique_ptr<ControlAuth> make(bool root) const {
    if (kind == "munge") return std::make_unique<MungeAuth>(1, 0, munge_socket, root);
    return std::make_unique<SharedSecretAuth>(secret);
  }
};

// Rank 0: the real watchdog. Reports "connected S" and "cpu F" lines on `out`, then waits to be
// ended by its own watchdog (a simulated rank dies).
[[noreturn]] void run_rank0(int ranks, int port, double steady, int out, const AuthChoice& auth) {
  raise_open_files(ranks + 64);
  RankLog log;
  WatchdogOptions options;
  options.hang_timeout = 0;
  options.connect_timeout = 1e6;
  const auto started = Clock::now();
  Watchdog watchdog(WatchdogRendezvous{0, ranks, "127.0.0.1", port}, auth.make(true), {"127.0.0.1", getpid(), "0", "-"},
                    options, log);
  watchdog.wait_for_all_ranks();
  const std::string connected = fmt::format("connected {:.3f}\n", seconds_since(started));
  [[maybe_unused]] auto n = write(out, connected.data(), connected.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(steady));
  const std::string cpu = fmt::format("cpu {:.4f}\n", (cpu_seconds() - cpu0) / seconds_since(t0));
  n = write(out, cpu.data(), cpu.size());
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

// The other ranks: one connection each. Prints "connected S" (all welcomed), then beats for
// `steady` + 1 s, then closes rank 1's connection and measures until the others hear of it.
int run_members(int ranks, int port, double steady, double limit, const AuthChoice& choice) {
  raise_open_files(ranks + 64);
  const auto started = Clock::now();
  std::vector<int> fds(static_cast<std::size_t>(ranks), -1);
  std::vector<SessionKey> keys(static_cast<std::size_t>(ranks));
  std::vector<std::string> in(static_cast<std::size_t>(ranks));
  // Joiners in parallel, each with its own proof maker (a munge context is one thread's).
  constexpr int kJoiners = 8;
  std::atomic<int> next{1};
  std::atomic<bool> gave_up{false};
  std::vector<std::thread> joiners;
  for (int j = 0; j < kJoiners; ++j)
    joiners.emplace_back([&] {
      const auto auth = choice.make(false);
      for (int r; (r = next++) < ranks && !gave_up;) {
        WatchdogFrame hello;
        hello.rank = r;
        hello.pid = r;
        hello.set_text(fmt::format("sim{}\t{}\t-", r / 8, r % 8));
        std::optional<MemberSession> s;
        while (!(s = join_control_plane("127.0.0.1", port, hello, *auth, 15000))) {
          if (seconds_since(started) > limit) {
            gave_up = true;
            return;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        fds[static_cast<std::size_t>(r)] = s->fd;
        keys[static_cast<std::size_t>(r)] = s->key;
        in[static_cast<std::size_t>(r)] = std::move(s->in);
      }
    });
  for (auto& t : joiners) t.join();
  if (gave_up) return 1;
  std::vector<std::uint64_t> seq(static_cast<std::size_t>(ranks), 1);
  std::vector<pollfd> polled;
  auto poll_all = [&](int timeout_ms) {
    polled.clear();
    for (int r = 1; r < ranks; ++r)
      if (fds[static_cast<std::size_t>(r)] >= 0) polled.push_back({fds[static_cast<std::size_t>(r)], POLLIN, 0});
    return poll(polled.data(), polled.size(), timeout_ms);
  };
  std::vector<int> rank_of_fd(static_cast<std::size_t>(ranks) + 65536, -1);
  for (int r = 1; r < ranks; ++r) rank_of_fd[static_cast<std::size_t>(fds[static_cast<std::size_t>(r)])] = r;
  std::printf("members_connected %.3f\n", seconds_since(started));
  std::fflush(stdout);
  // Steady training: a beat from every rank every member_beat_seconds, its step growing.
  const double beat_seconds = member_beat_seconds(ranks);
  const auto steady_start = Clock::now();
  std::uint64_t step = 0;
  auto last_beat = Clock::now() - std::chrono::seconds(2);
  while (seconds_since(steady_start) < steady + 1.0) {
    if (seconds_since(last_beat) >= beat_seconds) {
      last_beat = Clock::now();
      ++step;
      for (int r = 1; r < ranks; ++r) {
        WatchdogFrame beat;
        beat.kind = WatchdogFrame::kBeat;
        beat.rank = r;
        beat.pid = r;
        beat.step = step;
        beat.counter = step;
        seal_frame(beat, keys[static_cast<std::size_t>(r)], FrameDirection::kToRoot,
                   seq[static_cast<std::size_t>(r)]++);
        send_frame(fds[static_cast<std::size_t>(r)], beat);
      }
    }
    poll_all(20);
    for (const auto& p : polled)
      if (p.revents & POLLIN) {
        const int r = rank_of_fd[static_cast<std::size_t>(p.fd)];
        drain(p.fd, in[static_cast<std::size_t>(r)]);
        in[static_cast<std::size_t>(r)].clear();
      }
  }
  // Rank 1 dies: its connection closes without a word.
  const auto died = Clock::now();
  close(fds[1]);
  fds[1] = -1;
  int unaware = ranks - 2;
  std::vector<bool> told(static_cast<std::size_t>(ranks), false);
  while (unaware > 0) {
    if (seconds_since(died) > limit) return 1;
    poll_all(200);
    for (const auto& p : polled) {
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int r = rank_of_fd[static_cast<std::size_t>(p.fd)];
      if (told[static_cast<std::size_t>(r)]) continue;
      const bool alive = drain(p.fd, in[static_cast<std::size_t>(r)]);
      WatchdogFrame f;
      bool ended = !alive;
      while (next_frame(in[static_cast<std::size_t>(r)], f))
        if (f.kind == WatchdogFrame::kAbort) ended = true;
      if (ended) {
        told[static_cast<std::size_t>(r)] = true;
        --unaware;
      }
    }
  }
  std::printf("death %.3f\n", seconds_since(died));
  std::fflush(stdout);  // the caller leaves with _exit
  return 0;
}

double table_ms(int ranks) {
  std::vector<RankStatus> table(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    auto& s = table[static_cast<std::size_t>(r)];
    s.rank = r;
    s.host = fmt::format("node{:05}", r / 8);
    s.pid = 10000 + r;
    s.state = RankState::kRunning;
    s.step = r == 7 ? 99 : 100;
    s.phase = r == 7 ? TrainPhase::kForward : TrainPhase::kAllreduce;
    s.seconds_since_progress = 700;
  }
  const auto t0 = Clock::now();
  const HangVerdict v = judge_hang(table, 600, 600);
  const std::string text = format_status_table(table);
  const double ms = 1e3 * seconds_since(t0);
  return v.hung && !text.empty() ? ms : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes{1024, 4096, 16384};
  double steady = 15, limit = 120;  // steady: three beats of the largest job
  int port = 0;
  AuthChoice auth;
  CLI::App app{"the watchdog's control plane at N simulated ranks", "control-plane"};
  app.add_option("--ranks", sizes, "rank counts to simulate")->capture_default_str();
  app.add_option("--steady", steady, "seconds of steady training to measure rank 0's CPU over")->capture_default_str();
  app.add_option("--limit", limit, "seconds a phase may take before the run is given up")->capture_default_str();
  app.add_option("--port", port, "rank 0's port (default: a free one)");
  app.add_option("--auth", auth.kind, "how the ranks prove themselves: secret (run's) or munge (exec's)")
      ->check(CLI::IsMember({"secret", "munge"}))
      ->capture_default_str();
  app.add_option("--munge-socket", auth.munge_socket, "munged's socket for --auth munge (default: munge's own)");
  CLI11_PARSE(app, argc, argv);
  auth.secret = SharedSecretAuth::new_secret();
  signal(SIGPIPE, SIG_IGN);
  for (const int ranks : sizes) {
    int p = port;
    if (p == 0) {
      const Listener l = listen_on_any_port();
      p = l.port;
      close(l.fd);
    }
    int report[2];
    if (pipe(report) != 0) return 1;
    const pid_t root = fork();
    if (root == 0) {
      close(report[0]);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 2);  // its verdict on the dead rank: measured, not shown
      run_rank0(ranks, p, steady, report[1], auth);
    }
    close(report[1]);
    std::fflush(stdout);
    int member_out[2];
    if (pipe(member_out) != 0) return 1;
    const pid_t members = fork();
    if (members == 0) {
      close(member_out[0]);
      dup2(member_out[1], 1);
      _exit(run_members(ranks, p, steady, limit, auth));
    }
    close(member_out[1]);
    std::string rank0_text, member_text;
    char buffer[4096];
    for (ssize_t n; (n = read(member_out[0], buffer, sizeof buffer)) > 0;)
      member_text.append(buffer, static_cast<std::size_t>(n));
    int status = 0;
    waitpid(members, &status, 0);
    const bool finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    kill(root, SIGKILL);
    waitpid(root, nullptr, 0);
    for (ssize_t n; (n = read(report[0], buffer, sizeof buffer)) > 0;)
      rank0_text.append(buffer, static_cast<std::size_t>(n));
    close(report[0]);
    close(member_out[0]);
    double connected = -1, cpu = -1, death = -1;
    std::sscanf(rank0_text.c_str(), "connected %lf\ncpu %lf", &connected, &cpu);
    if (const auto at = member_text.find("death "); at != std::string::npos)
      std::sscanf(member_text.c_str() + at, "death %lf", &death);
    std::printf("auth=%s ranks=%d finished=%d connect_s=%.3f rank0_cpu=%.4f death_s=%.3f table_ms=%.1f\n",
                auth.kind.c_str(), ranks, finished ? 1 : 0, connected, cpu, death, table_ms(ranks));
    std::fflush(stdout);
  }
  return 0;
}
