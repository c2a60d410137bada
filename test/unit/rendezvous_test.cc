#include "spank/jobenv/rendezvous.h"

#include <map>
#include <set>

#include "spank/jobenv/hostlist.h"
#include "spank/jobenv/text.h"
#include "test/unit/test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

TEST_CASE("rendezvous: MASTER_ADDR is the first host of the step's node list") {
  CHECK(master_addr("gpu-[001-004,010],login1") == "gpu-001");
  CHECK(master_addr("login1,gpu-[001-004]") == "login1");
  CHECK(master_addr("node[2-3]") == "node2");
  check_refused<HostlistError>([] { master_addr("node[2"); }, "unclosed '['");
}

TEST_CASE("rendezvous: MASTER_PORT stays in range and differs between the steps of a job") {
  PortRange range{29500, 29999};
  for (std::uint32_t job : {1u, 2u, 77u, 123456u, 0xfffffff0u}) {
    std::set<std::uint16_t> ports;
    for (std::uint32_t step = 0; step < 500; ++step) {
      std::uint16_t port = master_port(job, step, range);
      CHECK(port >= 29500);
      CHECK(port <= 29999);
      ports.insert(port);
    }
    CHECK(ports.size() == 500);  // one per step: no two steps of a job collide
  }
  CHECK(master_port(41, 0, range) == master_port(41, 0, range));
  CHECK(master_port(41, 0, range) != master_port(42, 0, range));
  CHECK(master_port(9, 3, {40000, 40000}) == 40000);
}

TEST_CASE("rendezvous: port ranges are checked") {
  CHECK(parse_port_range("port_range", "20000-20099").low == 20000);
  CHECK(parse_port_range("port_range", "20000-20099").high == 20099);
  check_refused<InputError>([] { parse_port_range("port_range", "2000"); }, "expected LOW-HIGH");
  check_refused<InputError>([] { parse_port_range("port_range", "80-90"); }, "from 1024 to 65535");
  check_refused<InputError>([] { parse_port_range("port_range", "30000-20000"); }, "runs backwards");
  check_refused<InputError>([] { parse_port_range("port_range", "1024-70000"); }, "high port '70000'");
}

TEST_CASE("rendezvous: the seven variables of a task") {
  TaskFacts f;
  f.job_id = 12;
  f.step_id = 3;
  f.global_rank = 5;
  f.local_rank = 1;
  f.world_size = 8;
  f.local_world_size = 4;
  f.node_rank = 1;
  f.step_nodelist = "gpu-[07-08]";
  auto vars = rendezvous_variables(f, {29500, 29999});
  std::map<std::string, std::string> m(vars.begin(), vars.end());
  CHECK(m.size() == 7);
  CHECK(m["RANK"] == "5");
  CHECK(m["LOCAL_RANK"] == "1");
  CHECK(m["WORLD_SIZE"] == "8");
  CHECK(m["LOCAL_WORLD_SIZE"] == "4");
  CHECK(m["NODE_RANK"] == "1");
  CHECK(m["MASTER_ADDR"] == "gpu-07");
  CHECK(m["MASTER_PORT"] == std::to_string(master_port(12, 3, {29500, 29999})));
}
