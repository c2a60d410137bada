#include "spank/options.h"

#include <filesystem>
#include <fstream>
#include <map>

#include "spank/jobenv/text.h"
#include "spank/site_config.h"
#include "test/unit/test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& key) -> std::optional<std::string> {
    auto it = vars.find(key);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Settings resolve(const RecordedOptions& r, std::map<std::string, std::string> env = {}, SiteConfig site = {}) {
  return resolve_settings(r, site, env_of(std::move(env)));
}

}  // namespace

TEST_CASE("options: one table, each option with its SLURM_TRAIN_* default") {
  const auto& table = option_table();
  REQUIRE(table.size() == 4);
  CHECK(std::string(table[0].name) == "train-bind");
  CHECK(std::string(table[0].env_var) == "SLURM_TRAIN_BIND");
  CHECK(std::string(table[1].env_var) == "SLURM_TRAIN_NCCL");
  CHECK(std::string(table[2].env_var) == "SLURM_TRAIN_ENV");
  CHECK(table[3].arginfo == nullptr);  // --train-verbose is a flag
  CHECK(inherited_option_variable(OptionId::bind) == "SLURM_SPANK__SLURM_SPANK_OPTION_spank_train_train_bind");
}

TEST_CASE("options: precedence: option > SLURM_TRAIN_* > site > built-in") {
  SiteConfig site;
  site.bind = BindMode::strict;
  site.default_profile = "ib";
  site.env = false;
  Settings s = resolve({}, {}, site);
  CHECK(s.bind == BindMode::strict);
  CHECK(s.nccl_profile == "ib");
  CHECK_FALSE(s.nccl_from_option);
  CHECK(s.nccl_origin == "plugstack.conf default_profile");
  CHECK_FALSE(s.env);
  CHECK_FALSE(s.verbose);

  s = resolve({},
              {{"SLURM_TRAIN_BIND", "none"},
               {"SLURM_TRAIN_NCCL", "tcp"},
               {"SLURM_TRAIN_ENV", "on"},
               {"SLURM_TRAIN_VERBOSE", "1"}},
              site);
  CHECK(s.bind == BindMode::none);
  CHECK(s.nccl_profile == "tcp");
  CHECK_FALSE(s.nccl_from_option);
  CHECK(s.nccl_origin == "SLURM_TRAIN_NCCL");
  CHECK(s.env);
  CHECK(s.verbose);

  RecordedOptions r;
  CHECK(record_option(r, OptionId::bind, "soft") == "");
  CHECK(record_option(r, OptionId::nccl, "roce") == "");
  CHECK(record_option(r, OptionId::env, "off") == "");
  CHECK(record_option(r, OptionId::verbose, nullptr) == "");
  s = resolve(r, {{"SLURM_TRAIN_BIND", "none"}, {"SLURM_TRAIN_NCCL", "tcp"}, {"SLURM_TRAIN_ENV", "on"}}, site);
  CHECK(s.bind == BindMode::soft);
  CHECK(s.nccl_profile == "roce");
  CHECK(s.nccl_from_option);
  CHECK(s.nccl_origin == "--train-nccl");
  CHECK_FALSE(s.env);
  CHECK(s.verbose);
  CHECK(resolve({}).bind == BindMode::soft);
  CHECK(resolve({}).nccl_profile == "off");
  CHECK(resolve({}).env);
}

TEST_CASE("options: every bad value names the option, the value and what is allowed") {
  auto refused = [](OptionId id, const char* value, const std::string& message) {
    RecordedOptions r;
    std::string error = record_option(r, id, value);
    CAPTURE(error);
    CHECK(error.find(message) != std::string::npos);
    CHECK(r.error == error);
    check_refused<InputError>([&] { resolve(r); }, message);
  };
  refused(OptionId::bind, "loose", "--train-bind='loose': expected soft, strict or none");
  refused(OptionId::bind, "", "--train-bind is empty");
  refused(OptionId::bind, "soft\nstrict", "--train-bind 'soft\\x0astrict' contains a newline");
  refused(OptionId::env, "yes", "--train-env='yes': expected on or off");
  refused(OptionId::nccl, "../x", "--train-nccl '../x': expected a profile name");
  refused(OptionId::nccl, std::string(100, 'a').c_str(), "is 100 characters long (at most 64)");
  refused(OptionId::bind, nullptr, "--train-bind: expected a value (soft|strict|none)");
}

TEST_CASE("options: the same option twice with different values is an error; the same value is not") {
  RecordedOptions r;
  CHECK(record_option(r, OptionId::bind, "soft") == "");
  CHECK(record_option(r, OptionId::bind, "soft") == "");
  CHECK(record_option(r, OptionId::bind, "strict") ==
        "--train-bind is given twice with different values ('soft' and 'strict')");
  check_refused<InputError>([&] { resolve(r); }, "given twice");
}

TEST_CASE("options: srun may override what it inherited from sbatch, once") {
  RecordedOptions r;
  CHECK(record_option(r, OptionId::bind, "strict", true) == "");  // replayed from the batch job
  CHECK(record_option(r, OptionId::bind, "soft") == "");          // srun's own command line
  CHECK(resolve(r).bind == BindMode::soft);
  CHECK(record_option(r, OptionId::bind, "none") != "");  // its own line contradicts itself
}

TEST_CASE("options: bad SLURM_TRAIN_* defaults are refused naming the variable") {
  check_refused<InputError>(
      [] {
        resolve({}, {{"SLURM_TRAIN_BIND", "x"}});
      },
      "SLURM_TRAIN_BIND='x' (the default of --train-bind): expected soft, strict or none");
  check_refused<InputError>(
      [] {
        resolve({}, {{"SLURM_TRAIN_ENV", "1"}});
      },
      "SLURM_TRAIN_ENV='1' (the default of --train-env): expected on or off");
  check_refused<InputError>([] { resolve({}, {{"SLURM_TRAIN_VERBOSE", "yes"}}); }, "expected 1, 0, on or off");
  check_refused<InputError>(
      [] {
        resolve({}, {{"SLURM_TRAIN_NCCL", "a/b"}});
      },
      "SLURM_TRAIN_NCCL (the default of --train-nccl) 'a/b'");
  // An option given on the command line makes a bad default irrelevant.
  RecordedOptions r;
  record_option(r, OptionId::bind, "soft");
  CHECK(resolve(r, {{"SLURM_TRAIN_BIND", "x"}}).bind == BindMode::soft);
}

TEST_CASE("site config: plugstack.conf arguments") {
  SiteConfig defaults = parse_site_args({});
  CHECK(defaults.bind == BindMode::soft);
  CHECK(defaults.default_profile == "off");
  CHECK(defaults.ports.low == 29500);
  CHECK(defaults.sysfs == "/sys");

  auto dir = std::filesystem::temp_directory_path() / "slurm-train-site-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "fabric.conf") << "NCCL_IB_HCA=mlx5_0\n";
  std::ofstream(dir / "bad.conf") << "NCCL_PROTO=LL\n";
  SiteConfig site = parse_site_args({"default_profile=fabric", "profiles=" + dir.string(), "bind=strict", "env=off",
                                     "port_range=31000-31099", "sysfs=/"});
  CHECK(site.profiles_dir == dir.string());
  CHECK(site.default_profile == "fabric");
  CHECK(site.bind == BindMode::strict);
  CHECK_FALSE(site.env);
  CHECK(site.ports.low == 31000);
  CHECK(site.ports.high == 31099);
  CHECK(site.sysfs == "/");
  CHECK(parse_site_args({"default_profile=tcp"}).default_profile == "tcp");

  auto refused = [](std::vector<std::string> args, const std::string& message) {
    CAPTURE(message);
    check_refused<InputError>([&] { parse_site_args(args); }, message);
  };
  refused({"colour=blue"},
          "plugstack.conf: unknown key 'colour' (keys: profiles, default_profile, bind, env, port_range, sysfs)");
  refused({"bind"}, "plugstack.conf argument 'bind': expected KEY=VALUE");
  refused({"bind=loose"}, "plugstack.conf bind='loose': expected soft, strict or none");
  refused({"bind=soft", "bind=strict"}, "plugstack.conf: bind= is given twice");
  refused({"env=yes"}, "plugstack.conf env='yes': expected on or off");
  refused({"port_range=10-20"}, "plugstack.conf port_range= low port '10'");
  refused({"port_range=30000"}, "expected LOW-HIGH");
  refused({"profiles=relative/dir"}, "plugstack.conf profiles= 'relative/dir': expected an absolute path");
  refused({"profiles=/no/such/folder"}, "plugstack.conf profiles= '/no/such/folder': no such folder");
  refused({"sysfs=/no/such/sys"}, "no such folder");
  refused({"default_profile=nope"}, "plugstack.conf default_profile=nope: NCCL profile 'nope' does not exist");
  refused({"default_profile=bad", "profiles=" + dir.string()}, "bad.conf:1: NCCL_PROTO is a debugging key");
  refused({"default_profile=A/B"}, "expected a profile name");
  refused({"bind="}, "plugstack.conf bind=: empty value");
  std::filesystem::remove_all(dir);
}
