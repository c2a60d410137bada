// The site's configuration: the arguments after the plugin's path in plugstack.conf, e.g.
//   required /usr/lib/slurm/spank_train.so profiles=/etc/slurm/nccl default_profile=ib
//            bind=soft port_range=29500-29999   (one line in the file)
// Parsed into a plain struct. An unknown key, a key given twice or a bad value is fatal: the
// admin sees it at once in srun, sbatch and slurmd instead of a silent default.
#pragma once

#include <string>
#include <vector>

#include "spank/jobenv/binding.h"
#include "spank/jobenv/rendezvous.h"

namespace slurm_train {

struct SiteConfig {
  std::string profiles_dir;             // profiles=DIR: site NCCL profiles NAME.conf
  std::string default_profile = "off";  // default_profile=NAME: when the user names none
  BindMode bind = BindMode::soft;       // bind=soft|strict|none: default of --train-bind
  bool env = true;                      // env=on|off: default of --train-env
  PortRange ports;                      // port_range=LOW-HIGH: MASTER_PORT's range
  std::string sysfs = "/sys";           // sysfs=DIR: where the topology is read
};

// Throws InputError naming the argument and what was expected. Checks that the folders exist
// and that the default profile loads.
SiteConfig parse_site_args(const std::vector<std::string>& args);

}  // namespace slurm_train
