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
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "launcher/control_handshake.h"
#include "launcher/exit_codes.h"
#include "launcher/rank_log.h"
#include "launcher/watchdog_wire.h"
#include "train/io/write_all.h"

namespace slurm_train {

struct Watchdog::Conn {
  int fd = -1;
  int rank = -1;         // -1 until its hello is proved
  std::string source;    // the peer's address
  bool pending = false;  // counted by admission_ until it is let in or closed
  std::chrono::steady_clock::time_point accepted_at;
  Nonce challenge{};
  SessionKey key{};
  std::uint64_t seq_in = 1, seq_out = 1;  // the hello and the welcome were frame 0 each way
  std::string in;
  std::string tail;    // the text of kTail frames, for the kFail that follows
  int closed_fd = -1;  // the fd it had, once closed
  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 200;
// Rank 0's "still here" to every rank: every second up to 1,000 ranks, then longer, every 10 s
// from 10,000 (sending it is then most of rank 0's work). Three missed mean rank 0 is silent.
double root_beat_seconds(int ranks) { return std::clamp(ranks / 1000.0, 1.0, 10.0); }

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void write_stderr(const std::string& text) { write_all(2, text); }

// Rank 0 holds one connection per rank, and some for connections still proving themselves: the
// soft open-files limit (often 1024) is raised within the hard one, and a hard limit too low for
// the job's ranks is an error that says so. Returns how many connections may wait to prove
// themselves within the limit now in force (at most `wanted_pending`).
std::size_t ensure_open_files(int ranks, std::size_t wanted_pending) {
  const rlim_t needed = static_cast<rlim_t>(ranks) + 256;
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0) return 16;
  if (l.rlim_max != RLIM_INFINITY && l.rlim_max < needed)
    throw std::runtime_error(fmt::format(
        "watchdog: rank 0 needs about {} open files for the connections of {} ranks, but the hard limit is {} "
        "(ulimit -Hn; raise it for the job, e.g. LimitNOFILE= for slurmd or /etc/security/limits.conf)",
        needed, ranks, l.rlim_max));
  const rlim_t wanted = needed + static_cast<rlim_t>(wanted_pending);
  const rlim_t target = l.rlim_max == RLIM_INFINITY ? wanted : std::min(l.rlim_max, wanted);
  if (l.rlim_cur < target) {
    l.rlim_cur = target;
    if (::setrlimit(RLIMIT_NOFILE, &l) != 0)
      throw std::runtime_error(fmt::format("watchdog: setrlimit(RLIMIT_NOFILE, {}): {}", target, std::strerror(errno)));
  }
  return std::clamp<std::size_t>(static_cast<std::size_t>(l.rlim_cur - needed), 16, wanted_pending);
}

// How long a wrong listener may keep a rank waiting at each turn of the handshake; rank 0 itself
// answers within milliseconds (a munge credential's decode takes 0.1 ms; 16k of them 1.4 s).
constexpr int kAnswerMs = 15000;

std::string hex(std::string_view bytes) {
  std::string out;
  for (const unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

std::string unhex(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2)
    out += static_cast<char>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16));
  return out;
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
  if (rank_ == 0 && options_.straggler_threshold > 0) {
    stragglers_.emplace(size_, options_.straggler_threshold, options_.straggler_windows);
    window_started_ = Clock::now();
  }
}

Watchdog::Watchdog(Comm& comm, const RankIdentity& me, const WatchdogOptions& options, RankLog& log)
    : me_(me), options_(options), log_(log), rank_(comm.rank()), size_(comm.size()) {
  init_table(me);
  if (size_ == 1) {
    thread_ = std::thread([this] { run_root(); });
    return;
  }
  // Rank 0 listens before it says where, and draws the secret that proves a rank is the job's:
  // the broadcast reaches the job's processes only.
  char address[1024] = {};
  if (rank_ == 0) {
    ControlAdmission::Limits limits;
    limits.pending = ensure_open_files(size_, limits.pending);
    limits.per_source = std::min(limits.per_source, limits.pending);
    admission_ = ControlAdmission(limits);
    const Listener listener = listen_on_any_port();
    listen_fd_ = listener.fd;
    const std::string secret = SharedSecretAuth::new_secret();
    auth_ = std::make_unique<SharedSecretAuth>(secret);
    std::string text = fmt::format("{} {}", hex(secret), listener.port);
    for (const auto& a : local_addresses(me.host)) text += " " + a;
    std::snprintf(address, sizeof address, "%s", text.c_str());
    log_.line(fmt::format("watchdog: listening on port {} for the job's {} ranks (proof: {})", listener.port, size_,
                          auth_->name()));
    thread_ = std::thread([this] { run_root(); });
  }
  comm.broadcast(address, sizeof address, 0);
  char root_name[256] = {};
  if (rank_ == 0) std::snprintf(root_name, sizeof root_name, "%s", me.host.c_str());
  comm.broadcast(root_name, sizeof root_name, 0);
  root_name_ = root_name;
  if (rank_ == 0) return;
  // "SECRET PORT ADDRESS...": where rank 0 listens, and how to prove this rank is the job's.
  std::istringstream words(address);
  std::string secret;
  int port = 0;
  words >> secret >> port;
  auth_ = std::make_unique<SharedSecretAuth>(unhex(secret));
  std::vector<std::string> addresses;
  for (std::string a; words >> a;) addresses.push_back(a);
  connect_to_root(port, addresses);
}

Watchdog::Watchdog(const WatchdogRendezvous& rendezvous, std::unique_ptr<ControlAuth> auth, const RankIdentity& me,
                   const WatchdogOptions& options, RankLog& log)
    : me_(me), options_(options), log_(log), rank_(rendezvous.rank), size_(rendezvous.size), auth_(std::move(auth)) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_)
    throw std::runtime_error(fmt::format("watchdog: rank {} of {} is not a rank of the job", rank_, size_));
  if (size_ > 1 && !auth_) throw std::logic_error("watchdog: a job of several ranks needs a way to prove them");
  root_name_ = rendezvous.root_host;
  init_table(me);
  if (rank_ == 0) {
    if (size_ > 1) {
      ControlAdmission::Limits limits;
      limits.pending = ensure_open_files(size_, limits.pending);
      limits.per_source = std::min(limits.per_source, limits.pending);
      admission_ = ControlAdmission(limits);
      try {
        listen_fd_ = listen_on_port(rendezvous.port).fd;
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(
            fmt::format("{} (the port is derived from the job and step ids; is another job's "
                        "task 0 on this node using it?)",
                        e.what()));
      }
      log_.line(fmt::format("watchdog: listening on port {} for the job's {} ranks (proof: {})", rendezvous.port, size_,
                            auth_->name()));
    }
    thread_ = std::thread([this] { run_root(); });
    return;
  }
  const auto addresses = host_addresses(rendezvous.root_host);
  if (addresses.empty())
    throw std::runtime_error(
        fmt::format("watchdog: the host of task 0, '{}' (the step's first node), does not "
                    "resolve to an IPv4 address on {}",
                    rendezvous.root_host, me.host));
  connect_to_root(rendezvous.port, addresses);
}

// The others: try each of rank 0's addresses until rank 0 welcomes this rank with a seal that
// only the job's rank 0 can make.
void Watchdog::connect_to_root(int port, const std::vector<std::string>& addresses) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(options_.connect_timeout);
  // Rank 0 may not listen yet: retry soon at first (a job's start-up waits on this), then less often.
  auto pause = std::chrono::milliseconds(10);
  WatchdogFrame hello;
  hello.rank = rank_;
  hello.pid = me_.pid;
  hello.set_text(me_.host + "\t" + me_.cpus + "\t" + me_.device);
  while (root_fd_ < 0) {
    for (const auto& a : addresses) {
      std::optional<MemberSession> session;
      try {
        session = join_control_plane(a, port, hello, *auth_, kAnswerMs);
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(
            fmt::format("watchdog: cannot prove to rank 0 that this is rank {} of the job: {}", rank_, e.what()));
      }
      if (!session) continue;
      root_fd_ = session->fd;
      root_key_ = session->key;
      root_in_ = std::move(session->in);
      root_address_ = fmt::format("{}:{}", a, port);
      break;
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

bool Watchdog::all_connected() {
  if (rank_ != 0) return true;
  std::lock_guard lock(mutex_);
  return connected_ >= size_;
}

void Watchdog::report_failure(int exit_code, const std::string& cause, const std::string& detail, std::uint64_t when_ms,
                              StepCause kind) noexcept {
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
  f.phase = static_cast<std::uint32_t>(kind);  // a kFail's phase is its cause
  f.set_text(cause);
  send_to_peers(f);
  stop_thread();
}

void Watchdog::fail_job(int exit_code, const std::string& cause, const std::string& detail, std::uint64_t when_ms,
                        StepCause kind) {
  log_.line(fmt::format("failed (exit {}): {}", exit_code, cause));
  {
    std::lock_guard lock(mutex_);
    table_[0].state = RankState::kFailed;
    add_failure({0, me_.host, cause, detail, when_ms, kExitFailed, kind}, Clock::now());
  }
  // This rank exits with its own code; the others with the job's (end_job).
  own_exit_code_ = exit_code;
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void Watchdog::add_failure(Failure f, TimePoint now) {
  if (failures_.empty())
    failures_deadline_ = now + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(options_.gather_failures_seconds));
  failures_.push_back(std::move(f));
}

void Watchdog::set_pid(int pid) noexcept {
  pid_ = pid;
  std::lock_guard lock(mutex_);
  table_[static_cast<std::size_t>(rank_)].pid = pid;
}

void Watchdog::say_bye(int code, const std::optional<RankEnergy>& energy) noexcept {
  progress_.set(TrainPhase::kFinished, progress_.step());
  if (finished_.exchange(true)) return;
  WatchdogFrame f;
  f.kind = WatchdogFrame::kBye;
  f.rank = rank_;
  f.pid = pid_;
  f.code = code;
  if (energy && energy->has_gpu) {
    f.energy_joules = energy->joules ? std::max(0.0, *energy->joules) : WatchdogFrame::kNotCounted;
    f.energy_steps = energy->steps;
  }
  send_to_peers(f);
  if (rank_ == 0) {
    std::lock_guard lock(mutex_);
    log_refusals();
  }
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
    return std::all_of(table_.begin(), table_.end(),
                       [](const RankStatus& s) { return s.state == RankState::kFinished; });
  });
  return table_;
}

int Watchdog::finish_and_wait_for_rank0(int code, const std::optional<RankEnergy>& energy) {
  if (rank_ == 0 || root_fd_ < 0) {
    finish(code);
    return code;
  }
  say_bye(code, energy);
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
    send_to_root(f);
  }
}

bool Watchdog::send_to_root(WatchdogFrame f) {
  std::lock_guard lock(send_mutex_);
  seal_frame(f, root_key_, FrameDirection::kToRoot, root_seq_out_++);
  return send_frame(root_fd_, f);
}

void Watchdog::stop_thread() {
  stop_ = true;
  const char byte = 1;
  [[maybe_unused]] const auto n = ::write(wake_[1], &byte, 1);
}

void Watchdog::send_all(const WatchdogFrame& f) {
  for (const auto& c : conns_) {
    if (c->rank < 0 || c->fd < 0) continue;
    WatchdogFrame sealed = f;
    seal_frame(sealed, c->key, FrameDirection::kToMember, c->seq_out++);
    send_frame(c->fd, sealed);
  }
}

void Watchdog::end_job(int exit_code, const std::string& message, bool print, StepOutcome verdict) {
  log_.line(message);
  if (print) write_stderr("slurm-train: error: " + message + "\n");
  if (rank_ == 0 && options_.on_verdict) {
    {
      std::lock_guard lock(mutex_);
      verdict.stragglers = straggler_hosts_;
    }
    verdict.exit_code = own_exit_code_ != 0 ? own_exit_code_.load() : exit_code;
    // A rank's last beat may be a second old: rank 0's own step is the job's, where it is further.
    verdict.step = std::max(verdict.step, progress_.step());
    if (verdict.cause == StepCause::kRunning) verdict.cause = cause_of_exit_code(exit_code);
    verdict.message = message;
    options_.on_verdict(verdict);
  } else if (rank_ == 1 && verdict.rank == 0 && options_.on_root_verdict) {
    verdict.exit_code = exit_code;
    verdict.step = std::max(verdict.step, progress_.step());
    verdict.message = message;
    options_.on_root_verdict(verdict);
  }
  if (rank_ == 0) {
    WatchdogFrame f;
    f.kind = WatchdogFrame::kAbort;
    f.rank = 0;
    f.code = exit_code;
    f.set_text(message);
    std::lock_guard lock(mutex_);
    send_all(f);
    log_refusals();
  }
  exit_process(own_exit_code_ != 0 ? own_exit_code_.load() : exit_code);
}

void Watchdog::log_refusals() {
  if (const std::string summary = admission_.summary(); !summary.empty())
    log_.line(fmt::format("watchdog: {} (each kind was logged once, when it first happened)", summary));
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
  last_heard_.assign(static_cast<std::size_t>(size_), Clock::now());
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
    bool listener_ready = false;
    for (int i = 0; i < n; ++i) {
      const int fd = ready[static_cast<std::size_t>(i)].data.fd;
      if (fd == listen_fd_)
        listener_ready = true;
      else if (fd != wake_[0])
        readable.push_back(conn_by_fd_[fd]);
    }
    std::unique_lock lock(mutex_);
    if (listener_ready) accept_ranks(now);
    bool closed = false;
    for (Conn* c : readable) {
      if (!c || c->fd < 0) continue;
      read_rank(*c, now, lock);
      closed = closed || c->fd < 0;
    }
    if (admission_.pending() > 0 && seconds_between(last_judged, now) >= 0.1) {
      close_silent(now);
      closed = true;
    }
    // Paused while too many strangers wait, or the process has no file left: resumed here.
    if (!accepting_ && listen_fd_ >= 0 && admission_.accepting() && now >= accept_paused_until_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd_;
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) == 0) accepting_ = true;
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

// Every connection waiting on the listener (thousands arrive at once when a job starts), each
// challenged at once; with mutex_ held.
void Watchdog::accept_ranks(TimePoint now) {
  for (;;) {
    if (!admission_.accepting()) return pause_accepting(now);
    std::string source;
    const int fd = accept_peer(listen_fd_, source);
    if (fd < 0) {
      // Out of files: the listener would stay readable and the loop spin.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        pause_accepting(now + std::chrono::milliseconds(100));
      return;
    }
    if (!admission_.admit(source)) {
      ::close(fd);
      note_refusal(ControlRefusal::kTooMany, source,
                   fmt::format("{} are waiting already", admission_.limits().per_source));
      continue;
    }
    auto conn = std::make_unique<Conn>();
    conn->fd = fd;
    conn->source = source;
    conn->pending = true;
    conn->accepted_at = now;
    try {
      random_bytes(conn->challenge.data(), conn->challenge.size());
    } catch (const std::runtime_error&) {
      admission_.settled(source);
      continue;  // no challenge, no way in (getrandom fails only without entropy at boot)
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    // A new socket's buffer is empty: the challenge does not block.
    if (!send_frame(fd, challenge_frame(conn->challenge)) || ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      admission_.settled(source);
      continue;  // Conn's destructor closes it
    }
    conn_by_fd_[fd] = conn.get();
    conns_.push_back(std::move(conn));
  }
}

void Watchdog::pause_accepting(TimePoint until) {
  accept_paused_until_ = until;
  if (accepting_ && ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr) == 0) accepting_ = false;
}

void Watchdog::note_refusal(ControlRefusal kind, const std::string& source, const std::string& why) {
  if (!admission_.refuse(kind)) return;
  log_.line(
      fmt::format("watchdog: refused a connection from {}: {}{}; the job goes on (refusals of this kind are "
                  "counted from now on, not logged)",
                  source, describe(kind), why.empty() ? "" : " (" + why + ")"));
}

void Watchdog::close_conn(Conn& c) {
  if (c.pending) admission_.settled(c.source);
  c.pending = false;
  if (c.fd >= 0) ::close(c.fd);
  c.closed_fd = c.fd;
  c.fd = -1;
}

void Watchdog::refuse(Conn& c, ControlRefusal kind, const std::string& why) {
  note_refusal(kind, c.source, why);
  close_conn(c);
}

void Watchdog::close_silent(TimePoint now) {
  const auto limit = std::chrono::duration<double>(admission_.limits().hello_seconds);
  for (const auto& c : conns_)
    if (c->pending && c->fd >= 0 && now - c->accepted_at > limit)
      refuse(*c, ControlRefusal::kSilent, fmt::format("{:.0f} s", admission_.limits().hello_seconds));
}

// A pending connection's hello, when it is whole: a rank of the job not yet connected, and its
// proof. Then the rank is in, and rank 0 welcomes it. False when it was refused (and closed).
bool Watchdog::admit_rank(Conn& c, TimePoint now) {
  Hello hello = take_hello(c.in, size_);
  if (hello.state == HelloState::kIncomplete) return true;
  if (hello.state == HelloState::kMalformed) {
    refuse(c, ControlRefusal::kNotAHello, "");
    return false;
  }
  const int rank = hello.frame.rank;
  RankStatus& s = table_[static_cast<std::size_t>(rank)];
  // Before the proof, which costs rank 0 a munged round trip: a rank speaks once.
  if (s.state != RankState::kConnecting) {
    refuse(c, ControlRefusal::kDuplicateRank, fmt::format("rank {}", rank));
    return false;
  }
  const ProofCheck proof = check_hello(hello, c.challenge, *auth_);
  if (!proof.key) {
    refuse(c, proof.refusal, fmt::format("as rank {}: {}", rank, proof.why));
    return false;
  }
  admission_.settled(c.source);
  c.pending = false;
  c.rank = rank;
  c.key = *proof.key;
  std::istringstream parts(hello.frame.get_text());
  std::getline(parts, s.host, '\t');
  std::getline(parts, s.cpus, '\t');
  std::getline(parts, s.device, '\t');
  s.pid = hello.frame.pid;
  s.state = RankState::kRunning;
  last_progress_[static_cast<std::size_t>(rank)] = now;
  last_heard_[static_cast<std::size_t>(rank)] = now;
  send_frame(c.fd, welcome_frame(c.key));
  if (++connected_ >= size_) all_connected_.notify_all();
  return true;
}

// A connection's frames: its hello (proved, or it is a stranger and closed), then beats, bye or
// failure, each sealed with its key and in order, and always its own rank's; a connection that
// closes while its rank runs ends the job.
void Watchdog::read_rank(Conn& c, TimePoint now, std::unique_lock<std::mutex>& lock) {
  const bool alive = drain(c.fd, c.in, c.rank < 0 ? kMaxUnprovenBytes : SIZE_MAX);
  if (c.rank < 0) {
    if (!admit_rank(c, now)) return;
    if (c.rank < 0) {
      if (!alive) refuse(c, ControlRefusal::kSilent, "it closed first");
      return;
    }
  }
  // A tail longer than a failure sends is cut to its end.
  constexpr std::size_t kMaxTail = 16 * (sizeof(WatchdogFrame::text) - 1);
  bool sealed = true;
  WatchdogFrame f;
  while (next_frame(c.in, f)) {
    if (f.magic != WatchdogFrame::kMagic || !frame_is_sealed(f, c.key, FrameDirection::kToRoot, c.seq_in)) {
      sealed = false;
      break;
    }
    ++c.seq_in;
    last_heard_[static_cast<std::size_t>(c.rank)] = now;
    RankStatus& s = table_[static_cast<std::size_t>(c.rank)];
    if (f.kind == WatchdogFrame::kBeat) {
      // A beat's code and length: the rank's mean compute time per step (microseconds) and its
      // steps since its last beat.
      if (stragglers_ && f.length > 0) stragglers_->add(c.rank, static_cast<double>(f.code) / 1e6, f.length);
      if (f.pid != 0) s.pid = f.pid;
      s.step = f.step;
      s.phase = static_cast<TrainPhase>(f.phase);
      if (f.text[0] != '\0') s.gpu_fault = f.get_text();
      if (f.gpu_utilization_percent >= 0 && f.gpu_power_watts >= 0) {
        if (gpu_readings_.empty()) gpu_readings_.resize(static_cast<std::size_t>(size_));
        gpu_readings_[static_cast<std::size_t>(c.rank)] =
            RankGpuReading{c.rank, f.gpu_utilization_percent, f.gpu_power_watts};
      }
      last_progress_[static_cast<std::size_t>(c.rank)] = now - std::chrono::milliseconds(f.idle_ms);
    } else if (f.kind == WatchdogFrame::kBye) {
      s.state = RankState::kFinished;
      s.exit_code = f.code;
      if (f.pid != 0) s.pid = f.pid;
      if (f.energy_joules != WatchdogFrame::kNoGpu) {
        if (energies_.empty()) energies_.resize(static_cast<std::size_t>(size_));
        energies_[static_cast<std::size_t>(c.rank)] = RankEnergy{
            c.rank, true, f.energy_joules >= 0 ? std::optional<double>(f.energy_joules) : std::nullopt, f.energy_steps};
      }
      all_finished_.notify_all();
    } else if (f.kind == WatchdogFrame::kTail) {
      c.tail += f.get_text();
      if (c.tail.size() > kMaxTail) c.tail.erase(0, c.tail.size() - kMaxTail);
    } else if (f.kind == WatchdogFrame::kFail) {
      s.state = RankState::kFailed;
      if (f.pid != 0) s.pid = f.pid;
      const auto kind = f.phase <= static_cast<std::uint32_t>(StepCause::kLast) ? static_cast<StepCause>(f.phase)
                                                                                : StepCause::kRunning;
      add_failure({c.rank, s.host, f.get_text(), c.tail, f.step, f.code, kind}, now);
      // Judged at once or after the gathering time, in judge().
    }
  }
  if ((!alive || !sealed) && table_[static_cast<std::size_t>(c.rank)].state == RankState::kRunning) {
    const RankStatus s = table_[static_cast<std::size_t>(c.rank)];
    lock.unlock();
    StepOutcome verdict;
    verdict.cause = sealed ? StepCause::kRankLost : StepCause::kRankFailed;
    verdict.rank = s.rank, verdict.host = s.host, verdict.step = s.step, verdict.gpu_fault = s.gpu_fault;
    end_job(kExitFailed,
            sealed ? fmt::format("rank {} (host {}, pid {}) is gone: its connection to rank 0 closed without a word "
                                 "({}); its last report: the {} phase after step {}; ending the job",
                                 s.rank, s.host, s.pid,
                                 s.gpu_fault.empty() ? "killed? out of memory? its node lost?"
                                                     : "after " + s.gpu_fault + " on its node",
                                 phase_name(s.phase), s.step)
                   : fmt::format("rank {} (host {}, pid {}): its connection to rank 0 carried a frame without its seal "
                                 "(someone else wrote into it?); ending the job",
                                 s.rank, s.host, s.pid),
            true, verdict);
  }
  if (!alive || !sealed) close_conn(c);
}

// Rank 0's own row, then the verdicts: failures reported, ranks that never connected, a hang.
void Watchdog::judge(TimePoint started, TimePoint now, std::unique_lock<std::mutex>& lock) {
  if (!failures_.empty() && now >= failures_deadline_) {
    const auto first = std::min_element(failures_.begin(), failures_.end(),
                                        [](const Failure& a, const Failure& b) { return a.when_ms < b.when_ms; });
    std::string message =
        fmt::format("ending the job: rank {} on {} failed: {}", first->rank, first->host, first->text);
    if (!first->tail.empty()) message += "\n" + first->tail;
    std::vector<int> others;
    for (const auto& f : failures_)
      if (&f != &*first) others.push_back(f.rank);
    if (!others.empty())
      message += fmt::format("{}(rank(s) {} failed too, after it)", message.back() == '\n' ? "" : "\n",
                             format_rank_list(others));
    const int code = first->code;
    StepOutcome verdict;
    verdict.cause = first->kind;
    verdict.rank = first->rank, verdict.host = first->host;
    verdict.step = table_[static_cast<std::size_t>(first->rank)].step;
    verdict.gpu_fault = table_[static_cast<std::size_t>(first->rank)].gpu_fault;
    lock.unlock();
    // `run`: the failing rank printed its own message; rank 0 ends everyone else.
    end_job(code, message, options_.print_reported_failures, verdict);
  }
  if (stragglers_) judge_stragglers(now);
  RankStatus& own = table_[0];
  own.step = progress_.step();
  own.phase = progress_.phase();
  if (progress_.counter() != last_counter_[0]) {
    last_counter_[0] = progress_.counter();
    last_progress_[0] = now;
  }
  last_heard_[0] = now;
  for (int r = 0; r < size_; ++r) {
    auto& status = table_[static_cast<std::size_t>(r)];
    status.seconds_since_progress = seconds_between(last_progress_[static_cast<std::size_t>(r)], now);
    status.seconds_since_heard = seconds_between(last_heard_[static_cast<std::size_t>(r)], now);
  }

  if (connected_ < size_ && seconds_between(started, now) > options_.connect_timeout) {
    std::vector<int> missing;
    for (const auto& s : table_)
      if (s.state == RankState::kConnecting) missing.push_back(s.rank);
    StepOutcome verdict;
    verdict.cause = StepCause::kNeverConnected;
    if (!missing.empty()) verdict.rank = missing.front();
    lock.unlock();
    end_job(kExitFailed,
            fmt::format("rank(s) {} never reached rank 0's watchdog within {:.0f} s; ending the job",
                        format_rank_list(missing), options_.connect_timeout),
            true, verdict);
  }
  if (options_.hang_timeout > 0) {
    // Silent: three beats missed.
    const HangVerdict v = judge_hang(table_, options_.hang_timeout, 3 * member_beat_seconds(size_));
    if (v.hung) {
      const std::string table = format_status_table(table_);
      StepOutcome verdict;
      verdict.cause = StepCause::kHang;
      if (!v.stuck.empty()) {
        const RankStatus& stuck = table_[static_cast<std::size_t>(v.stuck.front())];
        verdict.rank = stuck.rank, verdict.host = stuck.host, verdict.step = stuck.step;
        verdict.gpu_fault = stuck.gpu_fault;
      }
      lock.unlock();
      log_.line("rank status:\n" + table);
      write_stderr("slurm-train: rank status (gathered by the watchdog, not through MPI):\n" + table);
      end_job(kExitHang,
              fmt::format("hang: {}{}; ending the job (--hang-timeout={:.0f})", v.summary,
                          verdict.gpu_fault.empty()
                              ? ""
                              : fmt::format(" (rank {} on {}, {})", verdict.rank, verdict.host, verdict.gpu_fault),
                          options_.hang_timeout),
              true, verdict);
    }
  }
}

void Watchdog::judge_stragglers(TimePoint now) {
  if (const auto [us, steps] = progress_.take_compute(); steps > 0)
    stragglers_->add(0, static_cast<double>(us) / 1e6, steps);
  if (seconds_between(window_started_, now) < options_.straggler_window_seconds) return;
  window_started_ = now;
  for (const StragglerFinding& f : stragglers_->close_window()) {
    const RankStatus& s = table_[static_cast<std::size_t>(f.rank)];
    const std::string message = fmt::format(
        "straggler: rank {} ({}, pid {}, {}) computes {:.2f}x the ranks' median ({:.1f} ms a step against {:.1f} ms, "
        "waits in collectives left out) for {} windows of {:.0f} s",
        f.rank, s.host, s.pid, s.device, f.slowdown, 1e3 * f.compute_seconds, 1e3 * f.median_seconds,
        options_.straggler_windows, options_.straggler_window_seconds);
    log_.line(message);
    write_stderr("slurm-train: warning: " + message + "\n");
    new_stragglers_.push_back({f.rank, s.host, s.device, f.slowdown, f.compute_seconds, f.median_seconds});
    if (std::find(straggler_hosts_.begin(), straggler_hosts_.end(), s.host) == straggler_hosts_.end())
      straggler_hosts_.push_back(s.host);
  }
}

std::vector<RankSlowdown> Watchdog::take_new_stragglers() {
  std::lock_guard lock(mutex_);
  std::vector<RankSlowdown> out;
  out.swap(new_stragglers_);
  return out;
}

std::vector<std::string> Watchdog::straggler_hosts() {
  std::lock_guard lock(mutex_);
  return straggler_hosts_;
}

namespace {
// What the ranks that sent one sent, in rank order.
template <class T>
std::vector<T> sent(const std::vector<std::optional<T>>& by_rank) {
  std::vector<T> out;
  for (const auto& x : by_rank)
    if (x) out.push_back(*x);
  return out;
}
}  // namespace

std::vector<RankGpuReading> Watchdog::member_gpu_readings() {
  std::lock_guard lock(mutex_);
  return sent(gpu_readings_);
}

std::vector<RankEnergy> Watchdog::member_energies() {
  std::lock_guard lock(mutex_);
  return sent(energies_);
}

void Watchdog::run_member() {
  auto last_heard = Clock::now(), last_beat = Clock::now() - std::chrono::seconds(10);
  const double beat_seconds = member_beat_seconds(size_);
  std::uint64_t seen_counter = progress_.counter();
  auto last_change = Clock::now();
  // What came with the welcome is read first.
  std::string in = std::move(root_in_);
  // Rank 0 judges hangs: a member waits for its verdict, then for three of its beats more.
  const double silence_limit = (options_.hang_timeout > 0 ? options_.hang_timeout : 600) + 3 * root_beat_seconds(size_);
  while (!stop_) {
    pollfd fds[2] = {{wake_[0], POLLIN, 0}, {root_fd_, POLLIN, 0}};
    if (in.size() < sizeof(WatchdogFrame)) ::poll(fds, 2, kPollMs);
    if (stop_) break;
    const auto now = Clock::now();
    const bool alive = !(fds[1].revents & (POLLIN | POLLHUP | POLLERR)) || drain(root_fd_, in);
    WatchdogFrame f;
    while (next_frame(in, f)) {
      if (f.magic != WatchdogFrame::kMagic || !frame_is_sealed(f, root_key_, FrameDirection::kToMember, root_seq_in_))
        end_job(kExitFailed,
                fmt::format("rank 0's watchdog connection ({}) carried a frame without rank 0's seal (someone else "
                            "wrote into it?); ending rank {}",
                            root_address_, rank_),
                rank_ == 1);
      ++root_seq_in_;
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
    if (seconds_between(last_heard, now) > silence_limit) {
      StepOutcome verdict;
      verdict.cause = StepCause::kHang;
      verdict.rank = 0, verdict.host = root_name_;
      end_job(kExitHang,
              fmt::format("hang: rank 0 ({}) silent for {:.0f} s: its watchdog sends nothing (the process stopped, or "
                          "its node cut off); ending rank {}",
                          root_name_, silence_limit, rank_),
              rank_ == 1, verdict);
    }
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
      const auto [compute_us, steps] = progress_.take_compute();
      beat.code =
          static_cast<std::int32_t>(std::min<std::uint64_t>(compute_us, std::numeric_limits<std::int32_t>::max()));
      beat.length =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(steps, std::numeric_limits<std::uint32_t>::max()));
      if (options_.gpu_fault) beat.set_text(options_.gpu_fault());
      if (const std::optional<GpuReading> gpu = options_.gpu_reading ? options_.gpu_reading() : std::nullopt) {
        beat.gpu_utilization_percent = gpu->utilization_percent;
        beat.gpu_power_watts = gpu->power_watts;
      }
      if (!send_to_root(beat) && !stop_)
        end_job(kExitFailed,
                fmt::format("rank 0 is gone: cannot send to its watchdog ({}); ending rank {}", root_address_, rank_),
                rank_ == 1);
      last_beat = now;
    }
  }
}

}  // namespace slurm_train
