// Folders of a job's state: the rule for each entry on the way (pure), and the walk and the files
// made through a held folder, on real folders, links and files in a temporary folder.
#include "train/io/folder_trust.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "test_support.h"
#include "train/io/h5.h"
#include "train/io/trusted_folder.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;
using slurm_train::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr uid_t kMe = 4000001, kOther = 4000002;  // no names: messages say "uid N"
const std::string kWhat = "the checkpoint folder 'c'";

PathEntry entry(const std::string& path, uid_t owner, mode_t mode) { return {path, owner, mode}; }

// A second user for the tests that need another's file or link: nobody, as root makes it.
uid_t nobody() {
  const passwd* pw = ::getpwnam("nobody");
  REQUIRE_MESSAGE(pw, "no user 'nobody' on this machine");
  return pw->pw_uid;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace

TEST_CASE("folder trust: the folder itself is trusted when its user's or root's and not writable by every user") {
  CHECK_FALSE(folder_trust_problem("the log folder 'x'", kMe, S_IFDIR | 0755, kMe));
  CHECK_FALSE(folder_trust_problem("the log folder 'x'", 0, S_IFDIR | 0755, kMe));
  CHECK_FALSE(folder_trust_problem("the log folder 'x'", kMe, S_IFDIR | 0775, kMe));  // its group: the user's choice
  const auto other = folder_trust_problem(kWhat, kOther, S_IFDIR | 0700, kMe);
  REQUIRE(other);
  CHECK(other->find("the checkpoint folder 'c' belongs to uid 4000002") == 0);
  const auto everyone = folder_trust_problem(kWhat, 0, S_IFDIR | 01777, kMe);
  REQUIRE(everyone);
  CHECK(everyone->find("can be written by every user (mode 1777)") != std::string::npos);
}

TEST_CASE("folder trust: a folder on the way is the user's or root's, and writable by every user only when sticky") {
  CHECK_FALSE(folder_on_the_way_problem(kWhat, entry("/", 0, S_IFDIR | 0755), kMe));
  CHECK_FALSE(folder_on_the_way_problem(kWhat, entry("/home/me", kMe, S_IFDIR | 0700), kMe));
  CHECK_FALSE(folder_on_the_way_problem(kWhat, entry("/tmp", 0, S_IFDIR | 01777), kMe));          // sticky
  CHECK_FALSE(folder_on_the_way_problem(kWhat, entry("/project", 0, S_IFDIR | 02775), kMe));      // its group
  CHECK_FALSE(folder_on_the_way_problem(kWhat, entry("/project/me", kMe, S_IFDIR | 0770), kMe));  // its group
  const auto other = folder_on_the_way_problem(kWhat, entry("/home/them", kOther, S_IFDIR | 0755), kMe);
  REQUIRE(other);
  CHECK(*other ==
        "the checkpoint folder 'c': the folder '/home/them' on its way belongs to uid 4000002, neither to this job's "
        "user (uid 4000001) nor to root: they could put another folder in its place. Use a folder whose parents are "
        "yours or root's");
  const auto open = folder_on_the_way_problem(kWhat, entry("/scratch", 0, S_IFDIR | 0777), kMe);
  REQUIRE(open);
  CHECK(open->find("the folder '/scratch' on its way can be written by every user and is not sticky (mode 0777)") !=
        std::string::npos);
}

TEST_CASE("folder trust: a link is followed where only trusted users can replace it") {
  const PathEntry tmp = entry("/tmp", 0, S_IFDIR | 01777), var = entry("/var", 0, S_IFDIR | 0755);
  // A root's link in a folder only root can write: /var/run -> /run, a site's /scratch.
  CHECK_FALSE(link_trust_problem(kWhat, entry("/var/run", 0, S_IFLNK | 0777), "/run", var, kMe));
  // In a folder no other user can write, the link's owner does not matter: a link's target never
  // changes, and only who can write its folder can replace it.
  CHECK_FALSE(link_trust_problem(kWhat, entry("/home/me/ck", kOther, S_IFLNK | 0777), "/scratch/me",
                                 entry("/home/me", kMe, S_IFDIR | 0755), kMe));
  // In a sticky folder every user can write, the user's own link or root's: only they can replace it.
  CHECK_FALSE(link_trust_problem(kWhat, entry("/tmp/ck", kMe, S_IFLNK | 0777), "/home/me/ck", tmp, kMe));
  CHECK_FALSE(link_trust_problem(kWhat, entry("/tmp/ck", 0, S_IFLNK | 0777), "/home/me/ck", tmp, kMe));
  // Another user's link there: refused, naming the link, its owner, its target and the folder.
  const auto planted = link_trust_problem(kWhat, entry("/tmp/ck", kOther, S_IFLNK | 0777), "/home/me/ck", tmp, kMe);
  REQUIRE(planted);
  CHECK(*planted ==
        "the checkpoint folder 'c': '/tmp/ck' is a link (to '/home/me/ck') that uid 4000002 made in '/tmp', a folder "
        "every user can write (mode 1777): they could point it elsewhere while the job runs. Give the folder it "
        "points to instead, or a folder of your own");
  // Not sticky: anyone can replace even the user's own link.
  CHECK(link_trust_problem(kWhat, entry("/x/ck", kMe, S_IFLNK | 0777), "/y", entry("/x", 0, S_IFDIR | 0777), kMe));
  // A group-writable folder trusts its group, as for folders.
  CHECK_FALSE(link_trust_problem(kWhat, entry("/project/ck", kOther, S_IFLNK | 0777), "/scratch/ck",
                                 entry("/project", 0, S_IFDIR | 02775), kMe));
}

TEST_CASE("trusted folder: a folder held open keeps its files there when a link on its way is repointed") {
  TempDir dir;
  fs::create_directories(dir.path + "/a");
  fs::create_directories(dir.path + "/b");
  fs::create_directory_symlink("a", dir.path + "/ck");
  const TrustedFolder folder("the checkpoint folder", dir.path + "/ck", false);
  // Repointed after the walk, as a trusted user could; and the folder itself renamed.
  fs::remove(dir.path + "/ck");
  fs::create_directory_symlink("b", dir.path + "/ck");
  fs::rename(dir.path + "/a", dir.path + "/a-renamed");
  folder.replace("latest", "step-00000001.h5\n");
  ::close(folder.create_exclusive("new"));
  const int log = folder.open_append("log", "the rank log");
  REQUIRE(::write(log, "line\n", 5) == 5);
  ::close(log);
  // HDF5 opens by path: it is given the held folder's descriptor.
  folder.replace("model.h5", [](const FilePath& temporary) { h5::create_file(temporary); });
  for (const char* name : {"latest", "new", "log", "model.h5"}) {
    CHECK_MESSAGE(fs::exists(dir.path + "/a-renamed/" + name), name);
    CHECK_MESSAGE(!fs::exists(dir.path + "/b/" + name), name);
  }
  CHECK(read_text(dir.path + "/a-renamed/latest") == "step-00000001.h5\n");
  CHECK(read_text(dir.path + "/a-renamed/log") == "line\n");
  // What libraries are given: the held folder's descriptor, and the path for people.
  CHECK(folder.file("latest").path == "/proc/self/fd/" + std::to_string(folder.fd()) + "/latest");
  CHECK(folder.file("latest").shown == dir.path + "/ck/latest");
  CHECK(read_text(folder.file("latest").path) == "step-00000001.h5\n");
}

TEST_CASE("trusted folder: missing folders are made, never writable by others; '..' and relative links resolve") {
  TempDir dir;
  const mode_t mask = ::umask(0);
  const TrustedFolder made("the log folder", dir.path + "/x/y/z", true);
  ::umask(mask);
  struct stat st {};
  REQUIRE(::stat((dir.path + "/x/y/z").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0775);  // with no umask at all, the group as the umask says, others never
  CHECK(st.st_uid == ::getuid());
  fs::create_directory_symlink("x/y", dir.path + "/to-y");
  const TrustedFolder through("the log folder", dir.path + "/x/../to-y/z", false);
  ::close(through.create_exclusive("mark"));
  CHECK(fs::exists(dir.path + "/x/y/z/mark"));
  check_refused<std::system_error>(
      [&] { TrustedFolder("the log folder", dir.path + "/none", false); },
      "cannot open the log folder '" + dir.path + "/none': open '" + dir.path + "/none': No such file or directory");
  std::ofstream(dir.path + "/file") << "x";
  check_refused<std::system_error>(
      [&] { TrustedFolder("the checkpoint folder", dir.path + "/file/ck", true); },
      "cannot create the checkpoint folder '" + dir.path + "/file/ck': open '" + dir.path + "/file': Not a directory");
  fs::create_directory_symlink("loop2", dir.path + "/loop1");
  fs::create_directory_symlink("loop1", dir.path + "/loop2");
  check_refused<std::system_error>([&] { TrustedFolder("the log folder", dir.path + "/loop1", false); },
                                   "Too many levels of symbolic links");
}

TEST_CASE("trusted folder: a parent every user can write, unless sticky, is refused; group-writable is trusted") {
  TempDir dir;
  fs::create_directories(dir.path + "/shared/mine");
  ::chmod((dir.path + "/shared").c_str(), 0777);
  check_refused<UntrustedFolder>(
      [&] { TrustedFolder("the checkpoint folder", dir.path + "/shared/mine", false); },
      "the folder '" + dir.path + "/shared' on its way can be written by every user and is not sticky (mode 0777)");
  ::chmod((dir.path + "/shared").c_str(), 01777);
  CHECK_NOTHROW(TrustedFolder("the checkpoint folder", dir.path + "/shared/mine", false));
  ::chmod((dir.path + "/shared").c_str(), 0775);
  ::chmod((dir.path + "/shared/mine").c_str(), 0770);
  CHECK_NOTHROW(TrustedFolder("the checkpoint folder", dir.path + "/shared/mine", false));
  // The user's own link in a sticky folder every user can write: no one else can replace it.
  ::chmod((dir.path + "/shared").c_str(), 01777);
  fs::create_directory_symlink(dir.path + "/shared/mine", dir.path + "/shared/link");
  CHECK_NOTHROW(TrustedFolder("the checkpoint folder", dir.path + "/shared/link", false));
}

TEST_CASE("trusted folder: root's link in a folder only root can write (/var/run -> /run) is followed" *
          doctest::skip(!fs::is_symlink("/var/run"))) {
  const TrustedFolder run("the log folder", "/var/run", false);
  CHECK_FALSE(run.names().empty());
}

TEST_CASE("trusted folder: another user's parent, or their link in a sticky folder every user can write, is refused" *
          doctest::skip(::geteuid() != 0)) {
  TempDir dir;
  const uid_t other = nobody();
  fs::create_directories(dir.path + "/theirs/mine");
  REQUIRE(::chown((dir.path + "/theirs").c_str(), other, static_cast<gid_t>(-1)) == 0);
  check_refused<UntrustedFolder>([&] { TrustedFolder("the checkpoint folder", dir.path + "/theirs/mine", false); },
                                 "the folder '" + dir.path + "/theirs' on its way belongs to uid " +
                                     std::to_string(other) + " (nobody), neither to this job's user");
  // The attack: a link planted in /tmp-like folder, to a folder of the job's user.
  fs::create_directories(dir.path + "/sticky");
  fs::create_directories(dir.path + "/victim");
  ::chmod((dir.path + "/sticky").c_str(), 01777);
  fs::create_directory_symlink(dir.path + "/victim", dir.path + "/sticky/ckpt");
  REQUIRE(::lchown((dir.path + "/sticky/ckpt").c_str(), other, static_cast<gid_t>(-1)) == 0);
  check_refused<UntrustedFolder>([&] { TrustedFolder("the checkpoint folder", dir.path + "/sticky/ckpt", true); },
                                 "'" + dir.path + "/sticky/ckpt' is a link (to '" + dir.path + "/victim') that uid " +
                                     std::to_string(other) + " (nobody) made in '" + dir.path +
                                     "/sticky', a folder every user can write (mode 1777)");
}

TEST_CASE("trusted folder: a file appended to is refused when another user's, every user's to write, or no file") {
  TempDir dir;
  const TrustedFolder folder("the metrics folder", dir.path, false);
  std::ofstream(dir.path + "/open.jsonl") << "{}\n";
  ::chmod((dir.path + "/open.jsonl").c_str(), 0666);
  check_refused<UntrustedFolder>(
      [&] { folder.open_append("open.jsonl", "the metrics file"); },
      "the metrics file '" + dir.path + "/open.jsonl' can be written by every user (mode 0666)");
  // A FIFO would hold a plain open until someone reads it: refused at once.
  REQUIRE(::mkfifo((dir.path + "/fifo.jsonl").c_str(), 0600) == 0);
  check_refused<std::runtime_error>([&] { folder.open_append("fifo.jsonl", "the metrics file"); },
                                    "the metrics file '" + dir.path + "/fifo.jsonl'");
  fs::create_directory(dir.path + "/dir.jsonl");
  check_refused<std::runtime_error>([&] { folder.open_append("dir.jsonl", "the metrics file"); },
                                    "the metrics file '" + dir.path + "/dir.jsonl'");
  REQUIRE(::symlink("/etc/hostname", (dir.path + "/link.jsonl").c_str()) == 0);
  check_refused<std::runtime_error>([&] { folder.open_append("link.jsonl", "the metrics file"); },
                                    "cannot open the metrics file '" + dir.path + "/link.jsonl'");
  // Exclusive means exclusive, a link at the name included.
  try {
    folder.create_exclusive("link.jsonl");
    FAIL("a link at the name was opened");
  } catch (const std::system_error& e) {
    CHECK(e.code() == std::errc::file_exists);
  }
}

TEST_CASE("trusted folder: a file appended to that another user made first is refused, naming its owner" *
          doctest::skip(::geteuid() != 0)) {
  TempDir dir;
  const TrustedFolder folder("the metrics folder", dir.path, false);
  std::ofstream(dir.path + "/metrics-42.jsonl") << "{\"loss\": 0.001}\n";
  REQUIRE(::chown((dir.path + "/metrics-42.jsonl").c_str(), nobody(), static_cast<gid_t>(-1)) == 0);
  check_refused<UntrustedFolder>([&] { folder.open_append("metrics-42.jsonl", "the metrics file"); },
                                 "the metrics file '" + dir.path + "/metrics-42.jsonl' belongs to uid " +
                                     std::to_string(nobody()) + " (nobody), not to this job's user");
  CHECK(read_text(dir.path + "/metrics-42.jsonl") == "{\"loss\": 0.001}\n");  // untouched
}
