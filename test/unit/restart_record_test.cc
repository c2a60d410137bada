// The restart record: starts in a row from one step, and its file.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "launcher/restart_record.h"
#include "test_support.h"

using namespace slurm_train;
using slurm_train::testing::check_refused;

TEST_CASE("the restart record counts starts in a row from the same step") {
  RestartRecord r = next_start(std::nullopt, 0);
  CHECK(r.starts == 1);
  CHECK(r.restarts_without_progress == 0);
  r = next_start(r, 100);  // got further: progress
  CHECK(r.restarts_without_progress == 0);
  r = next_start(r, 100);
  r = next_start(r, 100);
  CHECK(r.starts == 4);
  CHECK(r.restarts_without_progress == 2);
  CHECK_FALSE(should_give_up(r, 2));
  r = next_start(r, 100);
  CHECK(should_give_up(r, 2));
  CHECK_FALSE(should_give_up(r, 0));  // 0: never give up
  CHECK(next_start(r, 150).restarts_without_progress == 0);

  r.last_step_reached = 123;
  const RestartRecord back = parse_restart_record(format_restart_record(r));
  CHECK(back.starts == r.starts);
  CHECK(back.restarts_without_progress == r.restarts_without_progress);
  CHECK(back.last_start_step == r.last_start_step);
  CHECK(back.last_step_reached == 123);
  check_refused<std::invalid_argument>([] { parse_restart_record("starts = 1\n"); }, "expected the keys");
  check_refused<std::invalid_argument>([] { parse_restart_record("starts = one\n"); },
                                       "cannot read the line 'starts = one'");
}

TEST_CASE("the restart record survives a round trip through its file, and a damaged one is named") {
  const std::string dir = std::filesystem::temp_directory_path() / "slurm-train-restart-test";
  std::filesystem::remove_all(dir);
  const TrustedFolder folder("the checkpoint folder", dir, true);
  CHECK_FALSE(read_restart_record(folder));
  write_restart_record(folder, next_start(std::nullopt, 7));
  const auto read = read_restart_record(folder);
  REQUIRE(read);
  CHECK(read->last_start_step == 7);
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    CHECK(entry.path().filename().string() == "restarts");  // no temporary file left
  std::ofstream(dir + "/restarts") << "garbage\n";
  check_refused<std::runtime_error>([&] { read_restart_record(folder); }, dir + "/restarts' is damaged");
  std::filesystem::remove_all(dir);
}
