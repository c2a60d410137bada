#include "spank/jobenv/cpuset.h"

#include "spank/jobenv/text.h"
#include "test/unit/test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

TEST_CASE("cpuset: kernel list format parses and prints back") {
  CHECK(parse_cpulist("x", "0-3,8,10-11\n") == CpuSet{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpulist("x", "") == CpuSet{});
  CHECK(parse_cpulist("x", "5,1-2,2") == CpuSet{1, 2, 5});
  CHECK(format_cpulist({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(format_cpulist({}) == "");
  CHECK(format_cpulist(parse_cpulist("x", "0-31,64-95")) == "0-31,64-95");
  CHECK(intersect({0, 1, 2, 5}, {1, 5, 7}) == CpuSet{1, 5});
}

TEST_CASE("cpuset: bad lists are refused, naming the input") {
  check_refused<InputError>([] { parse_cpulist("local_cpulist", "3-1"); },
                            "local_cpulist '3-1': range '3-1' runs backwards");
  check_refused<InputError>([] { parse_cpulist("local_cpulist", "0,,1"); }, "expected a whole number");
  check_refused<InputError>([] { parse_cpulist("local_cpulist", "a-b"); }, "local_cpulist CPU id 'a'");
  check_refused<InputError>([] { parse_cpulist("l", "0-70000"); }, "from 0 to 65535");
  check_refused<InputError>([] { parse_cpulist("l", "1,"); }, "expected a whole number");
}

TEST_CASE("text: values are checked for length and characters") {
  check_text("v", "abc", 3);
  check_refused<InputError>([] { check_text("--train-bind", "abcd", 3); },
                            "--train-bind 'abcd' is 4 characters long (at most 3)");
  check_refused<InputError>([] { check_text("v", "a\nb", 10); }, "v 'a\\x0ab' contains a newline");
  check_refused<InputError>([] { check_text("v", std::string("a\0b", 3), 10); }, "contains a control character");
  check_refused<InputError>([] { check_text("v", "a b", 10); }, "contains a space");
  check_text("v", "a b", 10, true);
  check_refused<InputError>([] { check_text("v", "", 10); }, "v is empty");
  CHECK(parse_uint("n", "42", 0, 100) == 42);
  check_refused<InputError>([] { parse_uint("n", "-1", 0, 100); }, "n '-1': expected a whole number from 0 to 100");
  check_refused<InputError>([] { parse_uint("n", "101", 0, 100); }, "from 0 to 100");
  check_refused<InputError>([] { parse_uint("n", "99999999999999999999999", 0, 100); }, "expected a whole number");
}
