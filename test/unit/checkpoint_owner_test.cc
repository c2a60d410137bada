// One job per checkpoint folder: the owner record, when it is stale, the claim on a real folder,
// and temporary names that tell their writer.
#include "launcher/checkpoint_owner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "spank/jobenv/host.h"
#include "test_support.h"
#include "train/checkpoint/checkpoint_store.h"
#include "train/io/durable_file.h"

using namespace slurm_train;
namespace fs = std::filesystem;

namespace {

// The pid of a process that has ended (reaped), for "a process of this host that is gone".
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

fs::path fresh_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("slurm-train-owner-{}-{}", name, ::getpid());
  fs::remove_all(dir);
  return dir;
}

void touch(const fs::path& path) { std::ofstream(path) << "x"; }

const auto no_slurm = [](const std::string&) { return std::optional<bool>(); };

}  // namespace

TEST_CASE("checkpoint owner: the record round-trips, and a damaged one is named") {
  const CheckpointOwner o{"4242_3", "0", "node7", 1234, 1796169462};
  const CheckpointOwner back = parse_checkpoint_owner(format_checkpoint_owner(o));
  CHECK(back.job == "4242_3");
  CHECK(back.step == "0");
  CHECK(back.host == "node7");
  CHECK(back.pid == 1234);
  CHECK(back.started == 1796169462);
  CHECK(describe_checkpoint_owner(o) == "job 4242_3 (step 0, host node7, pid 1234, since 2026-12-01T23:57:42Z)");
  testing::check_refused<std::invalid_argument>([] { parse_checkpoint_owner("job = 1\nhost = a\npid = x\n"); },
                                                "cannot read the line 'pid = x'");
  testing::check_refused<std::invalid_argument>([] { parse_checkpoint_owner("job = 1\n"); },
                                                "expected the keys job, step, host, pid and started");
}

TEST_CASE("checkpoint owner: stale when it is this job, a gone process of this host, or a job Slurm says ended") {
  const CheckpointOwner me{"100", "0", "node1", 50, 2000};
  const CheckpointOwner other_job_here{"99", "0", "node1", 40, 1000}, other_host{"99", "0", "node2", 40, 1000};
  CHECK(stale_owner_reason(other_job_here, me, {true, true}).empty());
  CHECK(stale_owner_reason(other_job_here, me, {false, std::nullopt}) == "its process (pid 40 on node1) is gone");
  CHECK(stale_owner_reason(other_host, me, {false, std::nullopt}).empty());  // a pid of another host says nothing
  CHECK(stale_owner_reason(other_host, me, {true, std::nullopt}).empty());
  CHECK(stale_owner_reason(other_host, me, {true, false}) == "Slurm says job 99 has ended");
  const CheckpointOwner requeued{"100", "0", "node2", 40, 1000};
  CHECK(stale_owner_reason(requeued, me, {true, true}) ==
        "it is this job's own record (job 100 requeued or restarted)");
  // Made-up local job ids are never "the same job".
  const CheckpointOwner local{"local-1", "", "node2", 40, 1000};
  CHECK(stale_owner_reason(local, {"local-1", "", "node1", 50, 2000}, {true, std::nullopt}).empty());
}

TEST_CASE("checkpoint owner: a second run is refused naming the owner; a stale owner is taken over") {
  const fs::path dir = fresh_folder("claim");
  const std::string host = host_name();
  const CheckpointOwner first{"11", "0", host, static_cast<long>(::getppid()), 1000};  // alive: our parent
  const CheckpointOwner second{"12", "0", host, static_cast<long>(::getpid()), 2000};
  const TrustedFolder folder = open_checkpoint_folder(dir.string(), true);
  REQUIRE(claim_checkpoint_folder(folder, first, no_slurm).granted);
  const std::string before = format_checkpoint_owner(first);
  const FolderClaim refused = claim_checkpoint_folder(folder, second, no_slurm);
  CHECK_FALSE(refused.granted);
  CHECK(refused.message.find("the checkpoint folder '" + dir.string() + "' belongs to job 11 (step 0, host " + host) !=
        std::string::npos);
  CHECK(refused.message.find("still running") != std::string::npos);
  // Nothing of the refused run is left, and the owner record is the first's.
  std::ifstream in(dir / "owner");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  CHECK(text == before);
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 1);
  // Slurm's word that the owner's job ended frees the folder.
  const CheckpointOwner elsewhere{"11", "0", "another-host", 77, 1000};
  fs::remove(dir / "owner");
  REQUIRE(claim_checkpoint_folder(folder, elsewhere, no_slurm).granted);
  touch(dir / "step-00000010.h5.tmp-another-host-77");           // the ended owner's partial checkpoints
  touch(dir / "step-00000020.h5.tmp-another-host-77.k3x9q0zz");  // (named as earlier versions did, and now)
  const FolderClaim ended =
      claim_checkpoint_folder(folder, second, [](const std::string& job) { return std::optional<bool>(job != "11"); });
  CHECK(ended.granted);
  CHECK(ended.message.find("taking over the checkpoint folder") != std::string::npos);
  CHECK(ended.message.find("Slurm says job 11 has ended") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "step-00000010.h5.tmp-another-host-77"));
  CHECK_FALSE(fs::exists(dir / "step-00000020.h5.tmp-another-host-77.k3x9q0zz"));
  // Released by its owner only.
  release_checkpoint_folder(folder, first);
  CHECK(fs::exists(dir / "owner"));
  release_checkpoint_folder(folder, second);
  CHECK_FALSE(fs::exists(dir / "owner"));
  // A gone process of this host is taken over.
  const CheckpointOwner gone{"13", "", host, dead_pid(), 3000};
  REQUIRE(claim_checkpoint_folder(folder, gone, no_slurm).granted);
  const FolderClaim taken = claim_checkpoint_folder(folder, second, no_slurm);
  CHECK(taken.granted);
  CHECK(taken.message.find("is gone") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE(
    "temporary names carry their writer and a part no one can foresee; a clean-up removes only its own and "
    "dead ones of its host") {
  const std::string host = host_name();
  const std::string own = temporary_name_for("step-00000005.h5");
  const std::string prefix = fmt::format("step-00000005.h5.tmp-{}-{}.", host, ::getpid());
  REQUIRE(own.starts_with(prefix));
  CHECK(own.size() == prefix.size() + 8);
  CHECK(temporary_name_for("step-00000005.h5") != own);
  const auto mine = temporary_writer(own, "step-00000005.h5");
  REQUIRE(mine);
  CHECK(mine->host == host);
  CHECK(mine->pid == ::getpid());
  const auto writer = temporary_writer("step-00000005.h5.tmp-node-a-1-77", "step-00000005.h5");  // an earlier name
  REQUIRE(writer);
  CHECK(writer->host == "node-a-1");
  CHECK(writer->pid == 77);
  CHECK(temporary_writer("step-00000005.h5.tmp-node.example.org-77.ab12cd34", "step-00000005.h5")->host ==
        "node.example.org");
  CHECK_FALSE(temporary_writer("step-00000005.h5.tmp", "step-00000005.h5"));
  CHECK_FALSE(temporary_writer("step-00000005.h5.tmp-node-x", "step-00000005.h5"));
  CHECK_FALSE(temporary_writer("step-00000005.h5.tmp-node-77.short", "step-00000005.h5"));
  CHECK_FALSE(temporary_writer("step-00000005.h5.tmp-node-77.ABCDEFGH", "step-00000005.h5"));

  const fs::path dir = fresh_folder("tmp");
  fs::create_directories(dir);
  const long dead = dead_pid(), alive = static_cast<long>(::getppid());
  const std::vector<std::string> removed = {
      temporary_name_for("step-00000005.h5"), fmt::format("step-00000006.h5.tmp-{}-{}", host, dead),
      fmt::format("step-00000009.h5.tmp-{}-{}.0a1b2c3d", host, dead), fmt::format("latest.tmp-{}-{}", host, dead)};
  const std::vector<std::string> kept = {fmt::format("step-00000007.h5.tmp-{}-{}", host, alive),
                                         fmt::format("step-00000008.h5.tmp-other-host-{}", dead),
                                         fmt::format("notes.txt.tmp-{}-{}", host, dead), "step-00000004.h5"};
  for (const auto& f : removed) touch(dir / f);
  for (const auto& f : kept) touch(dir / f);
  remove_stale_temporaries(open_checkpoint_folder(dir.string(), false));
  for (const auto& f : removed) CHECK_MESSAGE(!fs::exists(dir / f), f);
  for (const auto& f : kept) CHECK_MESSAGE(fs::exists(dir / f), f);
  fs::remove_all(dir);
}
