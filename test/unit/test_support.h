// Helpers shared by the unit tests: the fixture sysfs trees, a check that a call throws an
// error whose message holds a given text, a temporary folder and a damaged byte of a file.
#pragma once

#include <doctest/doctest.h>

#include <stdlib.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace slurm_train::testing {

// test/fixtures/sysfs/<name>; the unit tests run from the repository root (test/run-tests.sh).
inline std::string fixture_sysfs(const std::string& name) {
  std::string path = "test/fixtures/sysfs/" + name;
  REQUIRE_MESSAGE(std::filesystem::is_directory(path),
                  "fixture " << path << " not found: run from the repository root");
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

// A fresh folder under /tmp, removed with everything in it at the end of the scope.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/slurm-train-test-XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// zlib's own CRC-32 of `n` bytes: the reference the project's CRC-32 must equal.
inline std::uint32_t zlib_crc(const unsigned char* p, std::size_t n) {
  return static_cast<std::uint32_t>(::crc32(0, p, static_cast<uInt>(n)));
}

// Flips bits of the byte at `offset` of `path`, in place.
inline void flip_byte(const std::string& path, std::uintmax_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

}  // namespace slurm_train::testing
