// `slurm-train exec`'s parts: the task's facts from Slurm's variables, the control port, the
// heartbeat file, the restart rule, the output relay, the child process and the watchdog's
// bootstrap without MPI.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "launcher/child_process.h"
#include "launcher/exec_command.h"
#include "launcher/heartbeat_file.h"
#include "launcher/memory_cgroup.h"
#include "launcher/output_relay.h"
#include "launcher/rank_log.h"
#include "launcher/restart_record.h"
#include "launcher/watchdog.h"
#include "spank/jobenv/rendezvous.h"
#include "spank/jobenv/task_facts.h"
#include "spank/jobenv/text.h"
#include "test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

namespace {

Environment step_env() {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "3"},
          {"SLURM_PROCID", "5"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_STEP_NUM_TASKS", "6"},
          {"SLURM_NODEID", "2"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"},
          {"SLURM_STEP_NODELIST", "gpu-[07-09]"}};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("exec: a task's facts from Slurm's variables give the plugin's rendezvous variables") {
  const TaskFacts f = task_facts_from_env(step_env());
  CHECK(f.job_id == 4242);
  CHECK(f.step_id == 3);
  CHECK(f.global_rank == 5);
  CHECK(f.local_rank == 1);
  CHECK(f.world_size == 6);
  CHECK(f.local_world_size == 2);
  CHECK(f.node_rank == 2);
  const auto vars = rendezvous_variables(f, PortRange{});
  std::map<std::string, std::string> m(vars.begin(), vars.end());
  CHECK(m["RANK"] == "5");
  CHECK(m["LOCAL_RANK"] == "1");
  CHECK(m["WORLD_SIZE"] == "6");
  CHECK(m["LOCAL_WORLD_SIZE"] == "2");
  CHECK(m["NODE_RANK"] == "2");
  CHECK(m["MASTER_ADDR"] == "gpu-07");
  CHECK(m["MASTER_PORT"] == std::to_string(master_port(4242, 3, PortRange{})));
}

TEST_CASE("exec: tasks per node in Slurm's compressed form") {
  CHECK(tasks_on_node("4", 0) == 4);
  CHECK(tasks_on_node("3,1", 1) == 1);
  CHECK(tasks_on_node("2(x3),1", 2) == 2);
  CHECK(tasks_on_node("2(x3),1", 3) == 1);
  check_refused<InputError>([] { tasks_on_node("2(x3),1", 4); }, "lists 4 node(s), and this is node 4");
  check_refused<InputError>([] { tasks_on_node("2(3)", 0); }, "is not N or N(xM)");
  check_refused<InputError>([] { tasks_on_node("two", 0); }, "'two'");
}

TEST_CASE("exec: missing or inconsistent variables are named") {
  Environment env = step_env();
  env.erase("SLURM_PROCID");
  check_refused<InputError>([&] { task_facts_from_env(env); },
                            "SLURM_PROCID is set: this is not a task of a Slurm job step");
  env = step_env();
  env["SLURM_PROCID"] = "6";
  check_refused<InputError>([&] { task_facts_from_env(env); }, "SLURM_PROCID 6 is not below the step's task count 6");
  env = step_env();
  env["SLURM_LOCALID"] = "2";
  check_refused<InputError>([&] { task_facts_from_env(env); }, "SLURM_LOCALID 2 is not below this node's task count 2");
}

TEST_CASE("exec: the control port stays in range and is never the step's MASTER_PORT") {
  const PortRange range{29500, 29999};
  for (std::uint32_t job : {1u, 77u, 410001u, 0xfffffff0u})
    for (std::uint32_t step = 0; step < 300; ++step) {
      const auto port = control_port(job, step, range);
      CHECK(port >= 29500);
      CHECK(port <= 29999);
      CHECK(port != master_port(job, step, range));
    }
}

TEST_CASE("exec: the heartbeat file's step, and a file only touched") {
  CHECK(parse_heartbeat("17\n").step == 17u);
  CHECK(parse_heartbeat("  42 ").step == 42u);
  CHECK_FALSE(parse_heartbeat("42").compute_seconds);
  CHECK_FALSE(parse_heartbeat("").step);
  CHECK_FALSE(parse_heartbeat("step 3").step);
  CHECK_FALSE(parse_heartbeat("-1").step);
  CHECK_FALSE(parse_heartbeat("3.5").step);

  std::filesystem::path path;
  {
    HeartbeatFile hb((std::filesystem::temp_directory_path() / "heartbeat-test.").string());
    path = hb.path();
    CHECK_FALSE(hb.changed());
    std::ofstream(path) << "12\n";
    CHECK(hb.changed());
    CHECK(hb.step() == 12u);
    CHECK_FALSE(hb.changed());
    std::ofstream(path) << "not a number";  // touched with other text: alive, the step stays
    CHECK(hb.changed());
    CHECK(hb.step() == 12u);
    std::ofstream(path) << "13 0.0421\n";
    CHECK(hb.changed());
    CHECK(hb.step() == 13u);
    CHECK(hb.compute_seconds() == doctest::Approx(0.0421));
    std::ofstream(path) << "14\n";  // the compute seconds go with their step
    CHECK(hb.changed());
    CHECK(hb.step() == 14u);
    CHECK_FALSE(hb.compute_seconds());
  }
  CHECK_FALSE(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path.parent_path()));
}

TEST_CASE("exec: the heartbeat's compute seconds after the step; bad ones left out, bad text says nothing") {
  const HeartbeatText said = parse_heartbeat("120 0.0421\n");
  CHECK(said.step == 120u);
  CHECK(said.compute_seconds == doctest::Approx(0.0421));
  CHECK(parse_heartbeat("\t7\t 2e-3 ").compute_seconds == doctest::Approx(0.002));
  CHECK(parse_heartbeat("7 0").compute_seconds == 0.0);
  // Not a usable time: the step stays, the figure is left out.
  for (const char* text : {"7 -0.5", "7 nan", "7 inf", "7 -inf", "7 1e999"}) {
    CAPTURE(text);
    const HeartbeatText h = parse_heartbeat(text);
    CHECK(h.step == 7u);
    CHECK_FALSE(h.compute_seconds);
  }
  // Not the format: nothing at all, as for a file only touched.
  for (const char* text : {"7 fast", "7 0.1 3", "7 0.1s", "7,0.1", "0.1 7", "x 0.1"}) {
    CAPTURE(text);
    const HeartbeatText h = parse_heartbeat(text);
    CHECK_FALSE(h.step);
    CHECK_FALSE(h.compute_seconds);
  }
}

TEST_CASE(
    "exec: the heartbeat file is in a folder of its own that only its user may enter, under a name no one foresees") {
  const std::string prefix = (std::filesystem::temp_directory_path() / "heartbeat-test.").string();
  HeartbeatFile a(prefix), b(prefix);
  CHECK(a.path() != b.path());
  const auto folder = std::filesystem::path(a.path()).parent_path();
  CHECK(folder.string().starts_with(prefix));
  struct stat st {};
  REQUIRE(::stat(folder.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(st.st_uid == ::getuid());
  REQUIRE(::lstat(a.path().c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("rank logs: a folder every user can write is refused, and so is a link in place of the log") {
  slurm_train::testing::TempDir dir;
  ::chmod(dir.path.c_str(), 0777);
  RankLog log;
  slurm_train::testing::check_refused<UntrustedFolder>(
      [&] { log.open(dir.path + "/rank-0.log", 0); }, "the log folder '" + dir.path + "' can be written by every user");
  ::chmod(dir.path.c_str(), 0755);
  // A link in place of the log is not followed.
  REQUIRE(::symlink("/etc/hostname", (dir.path + "/rank-1.log").c_str()) == 0);
  slurm_train::testing::check_refused<std::runtime_error>([&] { log.open(dir.path + "/rank-1.log", 1); },
                                                          "cannot open the rank log");
}

TEST_CASE("exec: a preempted run makes progress by its reported step, or by a minute of running") {
  // Steps: further than the run before is progress; the same step is not.
  RestartRecord r = next_exec_record(std::nullopt, 120u, 5);
  CHECK(r.restarts_without_progress == 0);
  r = next_exec_record(r, 120u, 500);
  CHECK(r.restarts_without_progress == 1);
  r = next_exec_record(r, 120u, 500);
  CHECK(r.restarts_without_progress == 2);
  CHECK_FALSE(should_give_up(r, 2));
  r = next_exec_record(r, 120u, 5);
  CHECK(should_give_up(r, 2));
  r = next_exec_record(r, 121u, 5);
  CHECK(r.restarts_without_progress == 0);
  CHECK(r.starts == 5);
  // No steps: a run under a minute made none, a longer one did.
  RestartRecord t = next_exec_record(std::nullopt, std::nullopt, 30);
  CHECK(t.restarts_without_progress == 1);
  t = next_exec_record(t, std::nullopt, 59);
  CHECK(t.restarts_without_progress == 2);
  t = next_exec_record(t, std::nullopt, 61);
  CHECK(t.restarts_without_progress == 0);
  t = next_exec_record(t, std::nullopt, 10);
  CHECK(t.restarts_without_progress == 1);
}

TEST_CASE("exec: the output relay logs lines, echoes by rank, and keeps the tail") {
  const auto dir = std::filesystem::temp_directory_path() / ("relay-test-" + std::to_string(::getpid()));
  RankLog log;
  log.open((dir / "rank-2.log").string(), 2);
  std::string echoed;
  OutputRelay relay(
      log, 2,
      [&](OutputRelay::Stream s, std::string_view b) {
        echoed += (s == OutputRelay::Stream::kStderr ? "E:" : "O:") + std::string(b);
      },
      3);
  relay.take(OutputRelay::Stream::kStdout, "one\ntw");
  relay.take(OutputRelay::Stream::kStdout, "o\n");
  relay.take(OutputRelay::Stream::kStderr, "bad thing\r\n");
  relay.take(OutputRelay::Stream::kStdout, "three\nunfinished");
  relay.flush();
  // Rank 2 echoes its errors only, marked with the rank.
  CHECK(echoed == "E:[rank 2] bad thing\n");
  CHECK(relay.tail() == "  | bad thing\n  | three\n  | unfinished\n");
  const std::string text = read_file((dir / "rank-2.log").string());
  for (const char* line :
       {"rank 2: one\n", "rank 2: two\n", "rank 2: bad thing\n", "rank 2: three\n", "rank 2: unfinished\n"})
    CHECK(text.find(line) != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("exec: rank 0 echoes everything as it comes") {
  RankLog log;  // not opened: no file
  std::string echoed;
  OutputRelay relay(log, 0, [&](OutputRelay::Stream, std::string_view b) { echoed += std::string(b); });
  relay.take(OutputRelay::Stream::kStdout, "50%\r");
  relay.take(OutputRelay::Stream::kStderr, "warn\n");
  CHECK(echoed == "50%\rwarn\n");
}

TEST_CASE("exec: programs that cannot run are named, with the shell's exit codes") {
  try {
    resolve_program("no-such-program-xyz", "/usr/bin:/bin");
    FAIL("not refused");
  } catch (const ProgramNotRunnable& e) {
    CHECK(e.exit_code == 127);
    CHECK(std::string(e.what()) == "program 'no-such-program-xyz' not found on PATH (/usr/bin:/bin)");
  }
  const auto plain = std::filesystem::temp_directory_path() / ("not-executable-" + std::to_string(::getpid()));
  std::ofstream(plain) << "echo hi\n";
  std::filesystem::permissions(plain, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  try {
    resolve_program(plain.string(), "");
    FAIL("not refused");
  } catch (const ProgramNotRunnable& e) {
    CHECK(e.exit_code == 126);
    CHECK(std::string(e.what()).find("program '" + plain.string() + "' is not executable") == 0);
  }
  std::filesystem::remove(plain);
  CHECK(resolve_program("sh", "/nonexistent:/bin") == "/bin/sh");
  CHECK(describe_wait_status(3 << 8) == "exited with status 3");
  CHECK(exit_code_of(3 << 8) == 3);
  CHECK(describe_wait_status(SIGKILL).find("was killed by signal 9 (SIGKILL)") == 0);
  CHECK(exit_code_of(SIGKILL) == 137);
}

TEST_CASE("exec: the child gets exactly its environment, its output comes on the pipes, its status back") {
  ChildProcess child({"sh", "-c", "echo \"$GREETING\"; echo oops >&2; exit 7"},
                     {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hello"}});
  std::string out, err;
  char buffer[256];
  for (ssize_t n; (n = ::read(child.stdout_fd(), buffer, sizeof buffer)) > 0;)
    out.append(buffer, static_cast<std::size_t>(n));
  for (ssize_t n; (n = ::read(child.stderr_fd(), buffer, sizeof buffer)) > 0;)
    err.append(buffer, static_cast<std::size_t>(n));
  CHECK(out == "hello\n");
  CHECK(err == "oops\n");
  std::optional<int> status;
  for (int i = 0; i < 500 && !status; ++i) {
    status = child.try_wait();
    if (!status) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(status);
  CHECK(exit_code_of(*status) == 7);
}

TEST_CASE("exec: ending the child ends its whole process group, SIGKILL after the grace") {
  // The program ignores SIGTERM and leaves a grandchild that would outlive it.
  ChildProcess child({"sh", "-c", "trap '' TERM; sleep 60 & echo $!; wait"}, {{"PATH", "/usr/bin:/bin"}});
  char buffer[64] = {};
  REQUIRE(::read(child.stdout_fd(), buffer, sizeof buffer - 1) > 0);
  const pid_t grandchild = std::stoi(buffer);
  const auto started = std::chrono::steady_clock::now();
  child.end(0.3);
  std::optional<int> status;
  for (int i = 0; i < 500 && !status; ++i) {
    status = child.try_wait();
    if (!status) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(status);
  CHECK(WIFSIGNALED(*status));
  CHECK(WTERMSIG(*status) == SIGKILL);
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(300));
  // The grandchild (reparented, so not ours to reap) is gone too.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string text;
    std::getline(stat, text);
    gone = text.empty() || text.find(") Z") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);
}

TEST_CASE("exec: the watchdog's bootstrap without MPI: a fixed port, rank 0 by its host, byes with codes") {
  RankLog log0, log1;
  const int port = 20000 + ::getpid() % 20000;
  WatchdogOptions options;
  options.hang_timeout = 0;
  options.connect_timeout = 10;
  const RankIdentity me0{"127.0.0.1", 100, "0", "-"}, me1{"127.0.0.1", 101, "1", "-"};
  const std::string secret = SharedSecretAuth::new_secret();
  Watchdog root(WatchdogRendezvous{0, 2, "localhost", port}, std::make_unique<SharedSecretAuth>(secret), me0, options,
                log0);
  std::optional<int> member_code;
  std::promise<void> table_read;
  std::thread member([&] {
    Watchdog w(WatchdogRendezvous{1, 2, "localhost", port}, std::make_unique<SharedSecretAuth>(secret), me1, options,
               log1);
    table_read.get_future().wait();  // the hello's pid first, then the program's
    w.set_pid(4321);
    member_code = w.finish_and_wait_for_rank0(6);
  });
  const auto ranks = root.wait_for_all_ranks(10);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[1].pid == 101);
  table_read.set_value();
  const auto table = root.wait_for_all_finished();
  REQUIRE(table.size() == 2);
  CHECK(table[1].exit_code == 6);
  CHECK(table[1].pid == 4321);
  root.finish(5);
  member.join();
  CHECK(member_code == 5);
}

TEST_CASE("exec: a member without the job's secret is not let in") {
  RankLog log0, log1;
  const int port = 20001 + ::getpid() % 20000;
  WatchdogOptions root_options, options;
  root_options.connect_timeout = 30;
  options.connect_timeout = 1;
  Watchdog root(WatchdogRendezvous{0, 2, "localhost", port},
                std::make_unique<SharedSecretAuth>(SharedSecretAuth::new_secret()), {"127.0.0.1", 1, "0", "-"},
                root_options, log0);
  check_refused<std::runtime_error>(
      [&] {
        Watchdog w(WatchdogRendezvous{1, 2, "localhost", port},
                   std::make_unique<SharedSecretAuth>(SharedSecretAuth::new_secret()), {"127.0.0.1", 2, "0", "-"},
                   options, log1);
      },
      "cannot reach rank 0's watchdog on port");
  root.report_failure(1, "test over");  // let the root's thread end without waiting for rank 1
}

TEST_CASE("exec: what follows `--` is the program's, never parsed as options") {
  auto split = [](std::vector<std::string> words) {
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    int argc = static_cast<int>(argv.size());
    const ExecCommandLine line = split_exec_command_line(argc, argv.data());
    return std::make_pair(argc, line);
  };
  auto [argc, line] =
      split({"slurm-train", "exec", "--hang-timeout", "6", "--", "python3", "t.py", "--steps", "5", "--", "x"});
  CHECK(argc == 4);
  CHECK(line.separator);
  CHECK(line.program == std::vector<std::string>{"python3", "t.py", "--steps", "5", "--", "x"});
  std::tie(argc, line) = split({"slurm-train", "exec", "python3"});
  CHECK(argc == 3);
  CHECK_FALSE(line.separator);
  std::tie(argc, line) = split({"slurm-train", "exec", "--"});
  CHECK(argc == 2);
  CHECK(line.separator);
  CHECK(line.program.empty());
  // Another command's `--` is left to it.
  std::tie(argc, line) = split({"slurm-train", "run", "--", "x"});
  CHECK(argc == 4);
  CHECK_FALSE(line.separator);
}

TEST_CASE("exec: the OOM killer's count of this process's memory cgroup, v1 or v2") {
  CHECK(oom_count_file("12:pids:/x\n4:memory:/slurm/uid_0/job_5/step_0\n0::/\n") ==
        "/sys/fs/cgroup/memory/slurm/uid_0/job_5/step_0/memory.oom_control");
  CHECK(oom_count_file("0::/system.slice/slurmstepd.scope/job_5/step_0/user/task_0\n", "/cg") ==
        "/cg/system.slice/slurmstepd.scope/job_5/step_0/user/task_0/memory.events");
  CHECK(oom_count_file("0::/\n") == "/sys/fs/cgroup/memory.events");
  CHECK(oom_count_file("3:cpu,memory:/a\n") == "/sys/fs/cgroup/cpu,memory/a/memory.oom_control");
  CHECK_FALSE(oom_count_file("3:cpu:/a\n"));
  CHECK(parse_oom_kill("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n") == 3u);
  CHECK(parse_oom_kill("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n") == 2u);
  CHECK_FALSE(parse_oom_kill("oom 2\n"));
  CHECK_FALSE(parse_oom_kill("oom_kill x\n"));
}
