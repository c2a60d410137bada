#include "spank/site_config.h"

#include <filesystem>
#include <set>

#include "spank/jobenv/nccl_profile.h"
#include "spank/jobenv/text.h"

namespace slurm_train {

namespace {

constexpr const char* kKeys = "profiles, default_profile, bind, env, port_range, sysfs";

std::string folder(const std::string& what, const std::string& value) {
  check_text(what, value, 4096);
  if (value.front() != '/') throw InputError(what + " " + quote_value(value) + ": expected an absolute path");
  std::error_code ec;
  if (!std::filesystem::is_directory(value, ec)) throw InputError(what + " " + quote_value(value) + ": no such folder");
  return value;
}

}  // namespace

SiteConfig parse_site_args(const std::vector<std::string>& args) {
  SiteConfig site;
  std::set<std::string> seen;
  bool profile_named = false;
  for (const auto& arg : args) {
    check_text("plugstack.conf argument", arg, 4096);
    auto eq = arg.find('=');
    if (eq == std::string::npos)
      throw InputError("plugstack.conf argument " + quote_value(arg) + ": expected KEY=VALUE (keys: " + kKeys + ")");
    std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
    std::string what = "plugstack.conf " + key + "=";
    if (!seen.insert(key).second) throw InputError("plugstack.conf: " + key + "= is given twice");
    if (value.empty()) throw InputError(what + ": empty value");
    if (key == "profiles") {
      site.profiles_dir = folder(what, value);
    } else if (key == "default_profile") {
      check_profile_name(what, value);
      site.default_profile = value;
      profile_named = true;
    } else if (key == "bind") {
      auto mode = parse_bind_mode(value);
      if (!mode) throw InputError(what + quote_value(value) + ": expected soft, strict or none");
      site.bind = *mode;
    } else if (key == "env") {
      if (value != "on" && value != "off") throw InputError(what + quote_value(value) + ": expected on or off");
      site.env = value == "on";
    } else if (key == "port_range") {
      site.ports = parse_port_range(what, value);
    } else if (key == "sysfs") {
      site.sysfs = folder(what, value);
    } else {
      throw InputError("plugstack.conf: unknown key " + quote_value(key) + " (keys: " + kKeys + ")");
    }
  }
  // After the loop: profiles= may come after default_profile=.
  if (profile_named) {
    try {
      load_profile(site.default_profile, site.profiles_dir);
    } catch (const InputError& e) {
      throw InputError("plugstack.conf default_profile=" + site.default_profile + ": " + e.what());
    }
  }
  return site;
}

}  // namespace slurm_train
