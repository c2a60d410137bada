#include "spank/jobenv/hostlist.h"

#include <doctest/doctest.h>

using slurm_train::expand_hostlist;
using slurm_train::HostlistError;
using Hosts = std::vector<std::string>;

TEST_CASE("hostlist: plain names and lists") {
  CHECK(expand_hostlist("login1") == Hosts{"login1"});
  CHECK(expand_hostlist("a,b.example.org,c_d") == Hosts{"a", "b.example.org", "c_d"});
}

TEST_CASE("hostlist: ranges keep the lower bound's zero padding") {
  CHECK(expand_hostlist("gpu-[001-004,010],login1") ==
        Hosts{"gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-010", "login1"});
  CHECK(expand_hostlist("n[8-11]") == Hosts{"n8", "n9", "n10", "n11"});
  CHECK(expand_hostlist("n[08-10]") == Hosts{"n08", "n09", "n10"});
  CHECK(expand_hostlist("n[98-100]") == Hosts{"n98", "n99", "n100"});
  CHECK(expand_hostlist("n[0]") == Hosts{"n0"});
}

TEST_CASE("hostlist: text after a range and several ranges multiply") {
  CHECK(expand_hostlist("r[1-2]-ib") == Hosts{"r1-ib", "r2-ib"});
  CHECK(expand_hostlist("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(expand_hostlist("[1-2]") == Hosts{"1", "2"});
}

TEST_CASE("hostlist: order is kept, duplicates are not removed") {
  CHECK(expand_hostlist("b,a,b") == Hosts{"b", "a", "b"});
  CHECK(expand_hostlist("n[3,1]") == Hosts{"n3", "n1"});
}

TEST_CASE("hostlist: bad input is refused with the position and the reason") {
  auto refuses = [](std::string_view text, std::string_view reason) {
    CAPTURE(text);
    try {
      expand_hostlist(text);
      FAIL("accepted");
    } catch (const HostlistError& e) {
      std::string what = e.what();
      CAPTURE(what);
      CHECK(what.find(reason) != std::string::npos);
    }
  };
  refuses("", "empty");
  refuses("a,,b", "empty host name");
  refuses("a,", "trailing ','");
  refuses(",a", "empty host name");
  refuses("n[1-3", "unclosed '['");
  refuses("n1-3]", "']' without '['");
  refuses("n[3-1]", "runs backwards (3-1)");
  refuses("n[]", "expected a number");
  refuses("n[a-b]", "expected a number");
  refuses("n[1-2[3]]", "unexpected '['");
  refuses("n[1;2]", "unexpected ';'");
  refuses("n 1", "character ' ' not allowed");
  refuses("n\n1", "character 0x0a not allowed");
  refuses("n$(reboot)", "character '$' not allowed");
  refuses("n[0-99999]", "more than 65536 hosts");
  refuses("a[1-300]b[1-300]", "more than 65536 hosts");
  refuses("n[1234567890]", "longer than 9 digits");
  refuses(std::string(300, 'x'), "longer than 255");
  refuses(std::string(70000, 'x'), "at most 65536");
}
