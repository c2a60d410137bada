#include "spank/jobenv/nccl_profile.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "spank/jobenv/text.h"
#include "test/unit/test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

namespace {

std::map<std::string, std::string> as_map(const std::vector<std::pair<std::string, std::string>>& vars) {
  return {vars.begin(), vars.end()};
}

struct ProfileDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() / "slurm-train-profiles-test";
  ProfileDir() {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ProfileDir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
};

}  // namespace

TEST_CASE("nccl: built-in profiles set only system settings") {
  CHECK(as_map(builtin_profile("tcp")->variables).at("NCCL_IB_DISABLE") == "1");
  CHECK(as_map(builtin_profile("ib")->variables).at("NCCL_IB_DISABLE") == "0");
  CHECK(as_map(builtin_profile("roce")->variables).at("NCCL_IB_GID_INDEX") == "3");
  CHECK(builtin_profile("off")->variables.empty());
  CHECK_FALSE(builtin_profile("infiniband"));
  for (const char* name : {"ib", "roce", "tcp"}) {
    NcclProfile profile = *builtin_profile(name);
    for (const auto& [key, value] : profile.variables) {
      CAPTURE(key);
      CHECK(key != "NCCL_ALGO");
      CHECK(key != "NCCL_DEBUG");
    }
  }
}

TEST_CASE("nccl: a site file: comments, blanks, KEY=VALUE, allowed debugging keys") {
  NcclProfile p = parse_profile("cluster-a", "/etc/nccl/cluster-a.conf",
                                "# our fabric\n\nNCCL_IB_HCA=mlx5_0:1,mlx5_3:1  # rails\n"
                                "NCCL_SOCKET_IFNAME = ib0\nallow_debug=NCCL_ALGO\nNCCL_ALGO=Ring\n");
  CHECK(p.name == "cluster-a");
  REQUIRE(p.variables.size() == 3);
  CHECK(p.variables[0] == std::pair<std::string, std::string>{"NCCL_IB_HCA", "mlx5_0:1,mlx5_3:1"});
  CHECK(p.variables[1] == std::pair<std::string, std::string>{"NCCL_SOCKET_IFNAME", "ib0"});
  CHECK(p.variables[2] == std::pair<std::string, std::string>{"NCCL_ALGO", "Ring"});
}

TEST_CASE("nccl: bad site files are refused with file, line and reason") {
  auto refuses = [](const std::string& text, const std::string& reason) {
    CAPTURE(text);
    check_refused<InputError>([&] { parse_profile("p", "p.conf", text); }, reason);
  };
  refuses("NCCL_ALGO=Ring\n",
          "p.conf:1: NCCL_ALGO is a debugging key; a profile sets it only when the file says allow_debug=NCCL_ALGO");
  refuses("\nNCCL_PROTO=LL\nallow_debug=NCCL_ALGO\n", "p.conf:2: NCCL_PROTO is a debugging key");
  refuses("allow_debug=NCCL_IB_HCA\n", "p.conf:1: allow_debug names NCCL_IB_HCA, which is not a debugging key");
  refuses("NCCL_IB_HCA\n", "p.conf:1: expected KEY=VALUE");
  refuses("LD_PRELOAD=/tmp/x.so\n", "p.conf:1: key 'LD_PRELOAD': expected an NCCL variable name");
  refuses("nccl_ib_hca=x\n", "expected an NCCL variable name");
  refuses("NCCL_=x\n", "expected an NCCL variable name");
  refuses("NCCL_IB_HCA=\n", "p.conf:1: value of NCCL_IB_HCA is empty");
  refuses("NCCL_IB_HCA=a b\n", "contains a space");
  refuses("NCCL_IB_HCA=$(reboot)\n", "character '$' not allowed");
  refuses("NCCL_IB_HCA=a\nNCCL_IB_HCA=b\n", "p.conf:2: NCCL_IB_HCA is set twice");
  refuses("NCCL_IB_HCA=" + std::string(300, 'a') + "\n", "at most 256");
  refuses(std::string(70 * 1024, '#'), "larger than 65536 bytes");
  refuses(std::string("NCCL_IB_HCA=a\0b\n", 16), "NUL");
}

TEST_CASE("nccl: profile names are file names: no path, no dots") {
  for (const char* bad :
       {"../etc/passwd", "a/b", ".hidden", "Ib", "-x", "", "a b", "abcdefghijklmnopqrstuvwxyz0123456789"}) {
    CAPTURE(bad);
    check_refused<InputError>([&] { check_profile_name("--train-nccl", bad); }, "expected a profile name");
  }
  check_profile_name("--train-nccl", "cluster_a-2");
}

TEST_CASE("nccl: site files are found by name, override built-ins, and unknown names list the choices") {
  ProfileDir dir;
  dir.write("fabric.conf", "NCCL_IB_HCA=mlx5_0\n");
  dir.write("tcp.conf", "NCCL_IB_DISABLE=1\nNCCL_SOCKET_IFNAME=eth0\n");
  dir.write("broken.conf", "NCCL_ALGO=Tree\n");
  dir.write("notes.txt", "not a profile");
  CHECK(as_map(load_profile("fabric", dir.path.string()).variables).at("NCCL_IB_HCA") == "mlx5_0");
  CHECK(as_map(load_profile("tcp", dir.path.string()).variables).at("NCCL_SOCKET_IFNAME") == "eth0");
  CHECK(load_profile("roce", dir.path.string()).name == "roce");
  check_refused<InputError>([&] { load_profile("broken", dir.path.string()); },
                            "broken.conf:1: NCCL_ALGO is a debugging key");
  check_refused<InputError>([&] { load_profile("nope", dir.path.string()); },
                            "NCCL profile 'nope' does not exist (available: broken, fabric, ib, off, roce, tcp)");
  check_refused<InputError>([&] { load_profile("nope", ""); }, "(available: ib, off, roce, tcp)");
}

TEST_CASE("nccl: a symlink in the profiles folder is refused, and nothing of the file it points to is quoted") {
  ProfileDir dir;
  // A file the profile reader must never show: its first line is no KEY=VALUE.
  const std::filesystem::path secret = dir.path / "secret";
  std::ofstream(secret) << "root:s3cret-hash:19000:0:99999:7:::\n";
  std::filesystem::create_directories(dir.path / "profiles");
  std::filesystem::create_symlink(secret, dir.path / "profiles" / "leak.conf");
  std::filesystem::create_symlink(dir.path / "profiles" / "missing", dir.path / "profiles" / "dangling.conf");
  const std::string folder = (dir.path / "profiles").string();
  for (const char* name : {"leak", "dangling"}) {
    CAPTURE(name);
    try {
      load_profile(name, folder);
      FAIL("a symlinked profile was loaded");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(std::string(name) + ".conf: a symbolic link") != std::string::npos);
      CHECK(std::string(e.what()).find("s3cret") == std::string::npos);
    }
  }
  CHECK(available_profiles(folder) == std::vector<std::string>{"ib", "off", "roce", "tcp"});
  // A regular file whose line is unparsable: the line is not quoted either.
  try {
    parse_profile("p", "p.conf", "root:s3cret-hash:19000\n");
    FAIL("an unparsable line was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "p.conf:1: expected KEY=VALUE (the line is not shown)");
  }
}

TEST_CASE("nccl: precedence: explicit option > the user's exports > the profile") {
  NcclProfile p{"site", {{"NCCL_IB_HCA", "mlx5_0"}, {"NCCL_SOCKET_IFNAME", "ib0"}}};
  auto user = [](const std::string& key) -> std::optional<std::string> {
    if (key == "NCCL_SOCKET_IFNAME") return "eth0";
    return std::nullopt;
  };
  NcclAssignment from_default = resolve_nccl(p, false, user);
  CHECK(as_map(from_default.set) == std::map<std::string, std::string>{{"NCCL_IB_HCA", "mlx5_0"}});
  CHECK(from_default.kept_from_user == std::vector<std::string>{"NCCL_SOCKET_IFNAME"});
  NcclAssignment from_option = resolve_nccl(p, true, user);
  CHECK(as_map(from_option.set).at("NCCL_SOCKET_IFNAME") == "ib0");
  CHECK(from_option.kept_from_user.empty());
}

TEST_CASE("nccl: NCCL_SOCKET_IFNAME is checked against the node's interfaces") {
  std::vector<std::string> ifs = {"lo", "eth0", "ib0"};
  CHECK_FALSE(check_socket_ifname("eth", "node1", ifs));
  CHECK_FALSE(check_socket_ifname("=eth0", "node1", ifs));
  CHECK_FALSE(check_socket_ifname("bond0,ib", "node1", ifs));
  CHECK_FALSE(check_socket_ifname("^docker,lo", "node1", ifs));
  CHECK(check_socket_ifname("=eth", "node1", ifs) ==
        "NCCL_SOCKET_IFNAME==eth matches no interface on node1 (it has: lo, eth0, ib0)");
  CHECK(check_socket_ifname("ib1", "node7", ifs).value().find("on node7 (it has: lo, eth0, ib0)") != std::string::npos);
  CHECK(check_socket_ifname("^eth,ib", "node1", ifs).has_value());
}
