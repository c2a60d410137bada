#include "launcher/watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

#include "launcher/exit_codes.h"
#include "launcher/rank_log.h"
#include "launcher/watchdog_wire.h"

namespace slurm_train {

struct Watchdog::Conn {
  int fd = -1;
  int rank = -1;  // -1 until its hello
  std::string in;
  std::string tail;  // the text of kTail frames, for the kFail that follows
  int closed_fd = -1;  // the fd it had, once closed
  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 200;
// Rank 0's "still here" to every rank (they wait 30 s or more): every 5 s, every 10 s from
// 10,000 ranks (sending it is then most of rank 0's work).
double root_beat_seconds(int ranks) { return std::max(5.0, 2 * member_beat_seconds(ranks)); }

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void write_stderr(const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(2, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Rank 0 holds one connection per rank: the soft open-files limit (often 1024) is raised within
// the hard one, and a hard limit too low for the job is an error that says so.
void ensure_open_files(int ranks) {
  const rlim_t needed = static_cast<rlim_t>(ranks) + 256;
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0 || l.rlim_cur >= needed) return;
  if (l.rlim_max != RLIM_INFINITY && l.rlim_max < needed)
    throw std::runtime_error(fmt::format(
        "watchdog: rank 0 needs about {} open files for the connections of {} ranks, but the hard limit is {} "
        "(ulimit -Hn; raise it for the job, e.g. LimitNOFILE= for slurmd or /etc/security/limits.conf)",
        needed, ranks, l.rlim_max));
  l.rlim_cur = needed;
  if (::setrlimit(RLIMIT_NOFILE, &l) != 0)
    throw std::runtime_error(fmt::format("watchdog: setrlimit(RLIMIT_NOFILE, {}): {}", needed, std::strerror(errno)));
}

}  // namespace

void Watchdog::init_table(const RankIdentity& me) {
  pid_ = me.pid;
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(fmt::format("watchdog: pipe2: {}", std::strerror(errno)));
  table_.resize(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) table_[static_cast<std::size_t>(r)].rank = r;
  table_[static_cast<std::size_t>(rank_)].host = me.host;
  table_[static_cast<std::size_t>(rank_)].pid = me.pid;
  table_[static_cast<std::size_t>(rank_)].cpus = me.cpus;
  table_[static_cast<std::size_t>(rank_)].device = me.device;
  table_[static_cast<std::size_t>(rank_)].state = RankState::kRunning;
}

Watchdog::Watchdog(Comm& comm, const RankIdentity& me, const WatchdogOptions& options, RankLog& log)
    : me_(me), options_(options), log_(log), rank_(comm.rank()), size_(comm.size()) {
  init_table(me);
  if (size_ == 1) {
    thread_ = std::thread([this] { run_root(); });
    return;
  }
  // Rank 0 listens before it says where; the token tells its listener from any other.
  char address[1024] = {};
  if (rank_ == 0) {
    ensure_open_files(size_);
    const Listener listener = listen_on_any_port();
    listen_fd_ = listener.fd;
    std::random_device random;
    token_ = (static_cast<std::uint64_t>(random()) << 32) ^ random() ^ static_cast<std::uint64_t>(::getpid());
    std::string text = fmt::format("{} {}", token_, listener.port);
    for (const auto& a : local_addresses(me.host)) text += " " + a;
    std::snprintf(address, sizeof address, "%s", text.c_str());
    thread_ = std::thread([this] { run_root(); });
  }
  comm.broadcast(address, sizeof address, 0);
  if (rank_ == 0) return;
  connect_to_root(address);
}

Watchdog::Watchdog(const WatchdogRendezvous& rendezvous, const RankIdentity& me, const WatchdogOptions& options,
                   RankLog& log)
    : me_(me), options_(options), log_(log), rank_(rendezvous.rank), size_(rendezvous.size) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw std::runtime_error(fmt::format("watchdog: rank {} of {} is not a rank of the job", rank_, size_));
  init_table(me);
  token_ = rendezvous.token;
  if (rank_ == 0) {
    if (size_ > 1) {
      ensure_open_files(size_);
      try {
        listen_fd_ = listen_on_port(rendezvous.port).fd;
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(fmt::format("{} (the port is derived from the job and step ids; is another job's "
                                             "task 0 on this node using it?)", e.what()));
      }
    }
    thread_ = std::thread([this] { run_root(); });
    return;
  }
  std::string text = fmt::format("{} {}", token_, rendezvous.port);
  const auto addresses = host_addresses(rendezvous.root_host);
  if (addresses.empty())
    throw std::runtime_error(fmt::format("watchdog: the host of task 0, '{}' (the step's first node), does not "
                                         "resolve to an IPv4 address on {}", rendezvous.root_host, me.host));
  for (const auto& a : addresses) text += " " + a;
  connect_to_root(text);
}

// The others: "TOKEN PORT ADDRESS..." says where rank 0 listens; try each address until rank 0
// welcomes this rank with the token.
void Watchdog::connect_to_root(const std::string& address_text) {
  std::istringstream words(address_text);
  int port = 0;
  words >> token_ >> port;
  std::vector<std::string> addresses;
  for (std::string a; words >> a;) addresses.push_back(a);
  const auto deadline = Clock::now() + std::chrono::duration<double>(options_.connect_timeout);
  // Rank 0 may not listen yet: retry soon at first (a job's start-up waits on this), then less often.
  auto pause = std::chrono::milliseconds(10);
  while (root_fd_ < 0) {
    for (const auto& a : addresses) {
      const int fd = connect_to(a, port, 2000);
      if (fd < 0) continue;
      WatchdogFrame hello;
      hello.kind = WatchdogFrame::kHello;
      hello.rank = rank_;
      hello.pid = me_.pid;
      hello.counter = token_;
      hello.set_text(me_.host + "\t" + me_.cpus + "\t" + me_.device);
      std::string in;
      WatchdogFrame reply;
      pollfd p{fd, POLLIN, 0};
      if (send_frame(fd, hello) && ::poll(&p, 1, 3000) == 1 && drain(fd, in) && next_frame(in, reply) &&
          reply.magic == WatchdogFrame::kMagic && reply.kind == WatchdogFrame::kWelcome && reply.counter == token_) {
        root_fd_ = fd;
        root_address_ = fmt::format("{}:{}", a, port);
        break;
      }
      ::close(fd);
    }
    if (root_fd_ >= 0) break;
    if (Clock::now() > deadline) {
      std::string list;
      for (const auto& a : addresses) list += (list.empty() ? "" : ", ") + a;
      throw std::runtime_error(fmt::format(
          "watchdog: cannot reach rank 0's watchdog on port {} at any of its addresses ({}) within {:.0f} s: is TCP "
          "between the nodes blocked? (--hang-timeout=0 does not turn this off; the watchdog also ends the job "
          "when a rank dies)",
          port, list, options_.connect_timeout));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  thread_ = std::thread([this] { run_member(); });
}

Watchdog::~Watchdog() {
  finish();
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, root_fd_, wake_[0], wake_[1], epoll_fd_})
    if (fd >= 0) ::close(fd);
}

std::vector<RankStatus> Watchdog::wait_for_all_ranks(double timeout_seconds) {
  if (rank_ != 0) return {};
  std::unique_lock lock(mutex_);
  all_connected_.wait_for(lock, std::chrono::duration<double>(timeout_seconds), [&] { return connected_ >= size_; });
  return table_;
}

void Watchdog::report_failure(int exit_code, const std::string& cause, const std::string& detail,
                              std::uint64_t when_ms) noexcept {
  if (size_ == 1 || finished_.exchange(true)) return;
  log_.line(fmt::format("failed (exit {}): {}", exit_code, cause));
  if (rank_ != 0) {
    WatchdogFrame piece;
    piece.kind = WatchdogFrame::kTail;
    piece.rank = rank_;
    const std::size_t chunk = sizeof piece.text - 1;
    // At most 16 frames: rank 0 wants the end of it.
    const std::size_t from = detail.size() > 16 * chunk ? detail.size() - 16 * chunk : 0;
    for (std::size_t at = from; at < detail.size(); at += chunk) {
      piece.set_text(std::string_view(detail).substr(at, chunk));
      send_to_peers(piece);
    }
  }
  WatchdogFrame f;
  f.kind = rank_ == 0 ? WatchdogFrame::kAbort : WatchdogFrame::kFail;
  f.rank = rank_;
  f.pid = pid_;
  f.code = exit_code;
  f.step = when_ms;
  f.set_text(cause);
  send_to_peers(f);
  stop_thread();
}

void Watchdog::fail_job(int exit_code, const std::string& cause, const std::string& detail, std::uint64_t when_ms) {
  log_.line(fmt::format("failed (exit {}): {}", exit_code, cause));
  {
    std::lock_guard lock(mutex_);
    table_[0].state = RankState::kFailed;
    add_failure({0, me_.host, cause, detail, when_ms, kExitFailed}, Clock::now());
  }
  // This rank exits with its own code; the others with the job's (end_job).
  own_exit_code_ = exit_code;
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void Watchdog::add_failure(Failure f, TimePoint now) {
  if (failures_.empty())
    failures_deadline_ = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.gather_failures_seconds));
  failures_.push_back(std::move(f));
}

void Watchdog::set_pid(int pid) noexcept {
  pid_ = pid;
  std::lock_guard lock(mutex_);
  table_[static_cast<std::size_t>(rank_)].pid = pid;
}

void Watchdog::say_bye(int code) noexcept {
  progress_.set(TrainPhase::kFinished, progress_.step());
  if (finished_.exchange(true)) return;
  WatchdogFrame f;
  f.kind = WatchdogFrame::kBye;
  f.rank = rank_;
  f.pid = pid_;
  f.code = code;
  send_to_peers(f);
}

void Watchdog::finish(int code) noexcept {
  say_bye(code);
  stop_thread();
}

std::vector<RankStatus> Watchdog::wait_for_all_finished() {
  progress_.set(TrainPhase::kFinished, progress_.step());
  std::unique_lock lock(mutex_);
  table_[static_cast<std::size_t>(rank_)].state = RankState::kFinished;
  if (rank_ != 0) return {};
  all_finished_.wait(lock, [&] {
    return std::all_of(table_.begin(), table_.end(), [](const RankStatus& s) { return s.state == RankState::kFinished; });
  });
  return table_;
}

int Watchdog::finish_and_wait_for_rank0(int code) {
  if (rank_ == 0 || root_fd_ < 0) {
    finish(code);
    return code;
  }
  say_bye(code);
  // The thread keeps watching rank 0 (and ends this process if rank 0 is lost) until its bye.
  std::unique_lock lock(mutex_);
  root_finished_.wait(lock, [&] { return root_said_bye_; });
  return root_code_;
}

void Watchdog::send_to_peers(const WatchdogFrame& f) {
  if (rank_ == 0) {
    std::lock_guard lock(mutex_);
    send_all(f);
  } else if (root_fd_ >= 0) {
    std::lock_guard lock(send_mutex_);
    send_frame(root_fd_, f);
  }
}

void Watchdog::stop_thread() {
  stop_ = true;
  const char byte = 1;
  [[maybe_unused]] const auto n = ::write(wake_[1], &byte, 1);
}

void Watchdog::send_all(const WatchdogFrame& f) {
  for (const auto& c : conns_)
    if (c->rank >= 0) send_frame(c->fd, f);
}

void Watchdog::end_job(int exit_code, const std::string& message, bool print) {
  log_.line(message);
  if (print) write_stderr("slurm-train: error: " + message + "\n");
  if (rank_ == 0) {
    WatchdogFrame f;
    f.kind = WatchdogFrame::kAbort;
    f.rank = 0;
    f.code = exit_code;
    f.set_text(message);
    std::lock_guard lock(mutex_);
    send_all(f);
  }
  exit_process(own_exit_code_ != 0 ? own_exit_code_.load() : exit_code);
}

void Watchdog::exit_process(int exit_code) {
  if (options_.before_exit) options_.before_exit();
  ::_exit(exit_code);
}

// Rank 0's loop: wait for input, accept new ranks, read every rank's frames, judge the table,
// then send its own beat.
void Watchdog::run_root() {
  last_counter_.assign(static_cast<std::size_t>(size_), ~0ull);
  last_progress_.assign(static_cast<std::size_t>(size_), Clock::now());
  const auto started = Clock::now();
  auto last_beat = Clock::now(), last_judged = Clock::now() - std::chrono::seconds(1);
  // epoll: a wake costs what is ready, not every rank's connection (thousands of ranks).
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    end_job(kExitFailed, fmt::format("watchdog: epoll_create1: {}", std::strerror(errno)), true);
  }
  for (const int fd : {wake_[0], listen_fd_}) {
    if (fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  std::vector<epoll_event> ready(512);
  while (!stop_) {
    const int n = ::epoll_wait(epoll_fd_, ready.data(), static_cast<int>(ready.size()), kPollMs);
    if (stop_) break;
    const auto now = Clock::now();
    std::vector<Conn*> readable;
    for (int i = 0; i < n; ++i) {
      const int fd = ready[static_cast<std::size_t>(i)].data.fd;
      if (fd == listen_fd_) accept_ranks();
      else if (fd != wake_[0]) readable.push_back(conn_by_fd_[fd]);
    }
    std::unique_lock lock(mutex_);
    bool closed = false;
    for (Conn* c : readable) {
      if (!c || c->fd < 0) continue;
      read_rank(*c, now, lock);
      closed = closed || c->fd < 0;
    }
    if (closed) {
      for (const auto& c : conns_)
        if (c->fd < 0) conn_by_fd_.erase(c->closed_fd);
      conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->fd < 0; }), conns_.end());
    }
    // The verdicts look at every rank: a few times a second (a hang is named within a tenth of a
    // second of its limit), not at every frame; a reported failure as soon as it comes.
    if (!failures_.empty() || seconds_between(last_judged, now) >= 0.1) {
      last_judged = now;
      judge(started, now, lock);
    }
    if (seconds_between(last_beat, now) >= root_beat_seconds(size_)) {
      last_beat = now;
      WatchdogFrame beat;
      beat.kind = WatchdogFrame::kBeat;
      beat.step = progress_.step();
      beat.phase = static_cast<std::uint32_t>(progress_.phase());
      beat.counter = progress_.counter();
      send_all(beat);
    }
  }
}

// Every connection waiting on the listener (thousands arrive at once when a job starts).
void Watchdog::accept_ranks() {
  for (;;) {
    const int fd = accept_peer(listen_fd_);
    if (fd < 0) return;
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) continue;  // Conn's destructor closes it
    std::lock_guard lock(mutex_);
    conn_by_fd_[fd] = conn.get();
    conns_.push_back(std::move(conn));
  }
}

// A connection's frames: its hello (with this job's token, or it is a stranger), beats, bye or
// failure; a connection that closes while its rank runs ends the job.
void Watchdog::read_rank(Conn& c, TimePoint now, std::unique_lock<std::mutex>& lock) {
  const bool alive = drain(c.fd, c.in);
  WatchdogFrame f;
  while (next_frame(c.in, f)) {
    if (f.magic != WatchdogFrame::kMagic) break;
    if (c.rank < 0) {
      if (f.kind != WatchdogFrame::kHello || f.counter != token_ || f.rank <= 0 || f.rank >= size_) break;
      c.rank = f.rank;
      RankStatus& s = table_[static_cast<std::size_t>(f.rank)];
      std::istringstream parts(f.get_text());
      std::getline(parts, s.host, '\t');
      std::getline(parts, s.cpus, '\t');
      std::getline(parts, s.device, '\t');
      s.pid = f.pid;
      s.state = RankState::kRunning;
      last_progress_[static_cast<std::size_t>(f.rank)] = now;
      WatchdogFrame welcome;
      welcome.kind = WatchdogFrame::kWelcome;
      welcome.counter = token_;
      send_frame(c.fd, welcome);
      if (++connected_ >= size_) all_connected_.notify_all();
      continue;
    }
    RankStatus& s = table_[static_cast<std::size_t>(c.rank)];
    if (f.kind == WatchdogFrame::kBeat) {
      if (f.pid != 0) s.pid = f.pid;
      s.step = f.step;
      s.phase = static_cast<TrainPhase>(f.phase);
      last_progress_[static_cast<std::size_t>(c.rank)] = now - std::chrono::milliseconds(f.idle_ms);
    } else if (f.kind == WatchdogFrame::kBye) {
      s.state = RankState::kFinished;
      s.exit_code = f.code;
      if (f.pid != 0) s.pid = f.pid;
      all_finished_.notify_all();
    } else if (f.kind == WatchdogFrame::kTail) {
      c.tail += f.get_text();
    } else if (f.kind == WatchdogFrame::kFail) {
      s.state = RankState::kFailed;
      if (f.pid != 0) s.pid = f.pid;
      add_failure({c.rank, s.host, f.get_text(), c.tail, f.step, f.code}, now);
      // Judged at once or after the gathering time, in judge().
    }
  }
  if (!alive && c.rank > 0 && table_[static_cast<std::size_t>(c.rank)].state == RankState::kRunning) {
    const RankStatus s = table_[static_cast<std::size_t>(c.rank)];
    lock.unlock();
    end_job(kExitFailed,
            fmt::format("rank {} (host {}, pid {}) is gone: its connection to rank 0 closed without a word (killed? out "
                        "of memory? its node lost?); its last report: the {} phase after step {}; ending the job",
                        s.rank, s.host, s.pid, phase_name(s.phase), s.step),
            true);
  }
  if (!alive) {
    ::close(c.fd);
    c.closed_fd = c.fd;
    c.fd = -1;
  }
}

// Rank 0's own row, then the verdicts: failures reported, ranks that never connected, a hang.
void Watchdog::judge(TimePoint started, TimePoint now, std::unique_lock<std::mutex>& lock) {
  if (!failures_.empty() && now >= failures_deadline_) {
    const auto first = std::min_element(failures_.begin(), failures_.end(),
                                        [](const Failure& a, const Failure& b) { return a.when_ms < b.when_ms; });
    std::string message = fmt::format("ending the job: rank {} on {} failed: {}", first->rank, first->host, first->text);
    if (!first->tail.empty()) message += "\n" + first->tail;
    std::vector<int> others;
    for (const auto& f : failures_)
      if (&f != &*first) others.push_back(f.rank);
    if (!others.empty())
      message += fmt::format("{}(rank(s) {} failed too, after it)", message.back() == '\n' ? "" : "\n", format_rank_list(others));
    const int code = first->code;
    lock.unlock();
    // `run`: the failing rank printed its own message; rank 0 ends everyone else.
    end_job(code, message, options_.print_reported_failures);
  }
  RankStatus& own = table_[0];
  own.step = progress_.step();
  own.phase = progress_.phase();
  if (progress_.counter() != last_counter_[0]) {
    last_counter_[0] = progress_.counter();
    last_progress_[0] = now;
  }
  for (int r = 0; r < size_; ++r)
    table_[static_cast<std::size_t>(r)].seconds_since_progress = seconds_between(last_progress_[static_cast<std::size_t>(r)], now);

  if (connected_ < size_ && seconds_between(started, now) > options_.connect_timeout) {
    std::vector<int> missing;
    for (const auto& s : table_)
      if (s.state == RankState::kConnecting) missing.push_back(s.rank);
    lock.unlock();
    end_job(kExitFailed,
            fmt::format("rank(s) {} never reached rank 0's watchdog within {:.0f} s; ending the job",
                        format_rank_list(missing), options_.connect_timeout),
            true);
  }
  if (options_.hang_timeout > 0) {
    const HangVerdict v = judge_hang(table_, options_.hang_timeout);
    if (v.hung) {
      const std::string table = format_status_table(table_);
      lock.unlock();
      log_.line("rank status:\n" + table);
      write_stderr("slurm-train: rank status (gathered by the watchdog, not through MPI):\n" + table);
      end_job(kExitHang, fmt::format("hang: {}; ending the job (--hang-timeout={:.0f})", v.summary, options_.hang_timeout),
              true);
    }
  }
}

void Watchdog::run_member() {
  auto last_heard = Clock::now(), last_beat = Clock::now() - std::chrono::seconds(10);
  const double beat_seconds = member_beat_seconds(size_);
  std::uint64_t seen_counter = progress_.counter();
  auto last_change = Clock::now();
  std::string in;
  const double silence_limit = (options_.hang_timeout > 0 ? options_.hang_timeout : 600) + 30;
  while (!stop_) {
    pollfd fds[2] = {{wake_[0], POLLIN, 0}, {root_fd_, POLLIN, 0}};
    ::poll(fds, 2, kPollMs);
    if (stop_) break;
    const auto now = Clock::now();
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      const bool alive = drain(root_fd_, in);
      WatchdogFrame f;
      while (next_frame(in, f)) {
        if (f.magic != WatchdogFrame::kMagic) continue;
        last_heard = now;
        if (f.kind == WatchdogFrame::kAbort) {
          log_.line(fmt::format("rank 0 ends the job (exit {}): {}", f.code, f.get_text()));
          exit_process(f.code);
        }
        if (f.kind == WatchdogFrame::kBye) {
          stop_ = true;  // rank 0 is done; nothing more to watch
          std::lock_guard lock(mutex_);
          root_said_bye_ = true;
          root_code_ = f.code;
          root_finished_.notify_all();
          return;
        }
      }
      if (!alive)
        // Every rank sees this; rank 1 says it for them all (the rest only log it).
        end_job(kExitFailed,
                fmt::format("rank 0 is gone: its watchdog connection ({}) closed without a word (killed? out of "
                            "memory? its node lost?); ending rank {}",
                            root_address_, rank_),
                rank_ == 1);
    }
    if (seconds_between(last_heard, now) > silence_limit)
      end_job(kExitHang,
              fmt::format("rank 0's watchdog sent nothing for {:.0f} s (stopped? its node unreachable?); ending rank {}",
                          silence_limit, rank_),
              rank_ == 1);
    const std::uint64_t counter = progress_.counter();
    if (counter != seen_counter) seen_counter = counter, last_change = now;
    if (seconds_between(last_beat, now) >= beat_seconds) {
      WatchdogFrame beat;
      beat.kind = WatchdogFrame::kBeat;
      beat.rank = rank_;
      beat.pid = pid_;
      beat.step = progress_.step();
      beat.phase = static_cast<std::uint32_t>(progress_.phase());
      beat.counter = counter;
      beat.idle_ms = static_cast<std::uint32_t>(
          std::min<double>(1e3 * seconds_between(last_change, now), std::numeric_limits<std::uint32_t>::max()));
      bool sent;
      {
        std::lock_guard lock(send_mutex_);
        sent = send_frame(root_fd_, beat);
      }
      if (!sent && !stop_)
        end_job(kExitFailed, fmt::format("rank 0 is gone: cannot send to its watchdog ({}); ending rank {}", root_address_, rank_),
                rank_ == 1);
      last_beat = now;
    }
  }
}

}  // namespace slurm_train
