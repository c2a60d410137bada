// Helpers shared by the unit tests: the fixture sysfs trees and a check that a call throws an
// error whose message holds a given text.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace slurm_train::testing {

// test/fixtures/sysfs/<name>; the unit tests run from the repository root (test/run-tests.sh).
inline std::string fixture_sysfs(const std::string& name) {
  std::string path = "test/fixtures/sysfs/" + name;
  REQUIRE_MESSAGE(std::filesystem::is_directory(path), "fixture " << path << " not found: run from the repository root");
  return path;
}

template <typename Error, typename Fn>
void check_refused(Fn&& fn, std::string_view expected) {
  try {
    fn();
    FAIL("accepted; expected an error with: " << expected);
  } catch (const Error& e) {
    std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find(expected) != std::string::npos);
  }
}

}  // namespace slurm_train::testing
