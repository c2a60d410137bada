#!/usr/bin/env bats
# The sources' format: every C++ and CUDA file as .clang-format says (Debian's clang-format,
# installed by scripts/install-deps.sh); `make format` applies it.

load helpers

@test "every C++ and CUDA source is formatted as .clang-format says" {
  command -v clang-format >/dev/null || skip "clang-format is not installed (scripts/install-deps.sh installs it)"
  cd "$ROOT"
  mapfile -t sources < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
  [ "${#sources[@]}" -gt 100 ]
  run clang-format --dry-run --Werror "${sources[@]}"
  # One line a file that differs, with its first place.
  echo "$output" | grep -E '^[^ ]+:[0-9]+:[0-9]+: error' | awk -F: '!seen[$1]++ {print $1 ":" $2 ": not formatted (make format)"}'
  [ "$status" -eq 0 ]
}
