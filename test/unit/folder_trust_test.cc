// Folders of a job's state: the rule for each entry on the way (pure).
#include "train/io/folder_trust.h"

#include <sys/stat.h>

#include <doctest/doctest.h>

#include <string>

using namespace slurm_train;

namespace {

constexpr uid_t kMe = 4000001, kOther = 4000002;  // no names: messages say "uid N"
const std::string kWhat = "the checkpoint folder 'c'";

PathEntry entry(const std::string& path, uid_t owner, mode_t mode) { return {path, owner, mode}; }

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
