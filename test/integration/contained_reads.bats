#!/usr/bin/env bats
# The contained-read server (train/io/crash_contained.h) as slurm-train uses it: a program of
# the tests' own (build/test/contained_reads) sends reads that finish, throw, crash, exit or hang
# to it; each outcome is reported as the reader's, the server keeps a child forked ahead for the
# next read, and a spare child killed while it waits costs no read its verdict.

load helpers

reads() {
  run --separate-stderr "$BUILD/test/contained_reads" "$@"
}

@test "contained reads through the server: each reader's ending is its own, read after read" {
  reads finish segv throw abort finish exit3 finish
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "finish: finished" ]
  [ "${lines[1]}" = "segv: ended in signal 11 (Segmentation fault)" ]
  [ "${lines[2]}" = "throw: finished" ]
  [ "${lines[3]}" = "abort: ended in signal 6 (Aborted)" ]
  [ "${lines[4]}" = "finish: finished" ]
  [ "${lines[5]}" = "exit3: ended in exit status 3" ]
  [ "${lines[6]}" = "finish: finished" ]
}

@test "contained reads through the server: a read that hangs is stopped at its limit, and the next one runs" {
  CONTAINED_READS_LIMIT_MS=500 reads hang finish
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "hang: was stopped after 0.5 s without finishing" ]
  [ "${lines[1]}" = "finish: finished" ]
}

@test "contained reads through the server: one child waits for the next read; killed as it waits, no read is blamed" {
  reads children finish children kill-spare finish segv kill-spare finish
  [ "$status" -eq 0 ]
  [[ ${lines[0]} == "children: 1 server "* ]]
  [ "${lines[1]}" = "finish: finished" ]
  [[ ${lines[2]} == "children: 1 server "* ]]
  [[ ${lines[3]} == "kill-spare: killed "* ]]
  [ "${lines[4]}" = "finish: finished" ]
  [ "${lines[5]}" = "segv: ended in signal 11 (Segmentation fault)" ]
  [[ ${lines[6]} == "kill-spare: killed "* ]]
  [ "${lines[7]}" = "finish: finished" ]
}

@test "contained reads through the server: the server and its waiting child end with the program" {
  reads finish children
  [ "$status" -eq 0 ]
  [[ ${lines[1]} =~ ^children:\ 1\ server\ ([0-9]+):\ ([0-9]+)$ ]]
  local server=${BASH_REMATCH[1]} spare=${BASH_REMATCH[2]}
  # Both end with the program (PR_SET_PDEATHSIG): none is left reading.
  for _ in $(seq 50); do
    kill -0 "$server" 2>/dev/null || kill -0 "$spare" 2>/dev/null || break
    sleep 0.1
  done
  ! kill -0 "$server" 2>/dev/null
  ! kill -0 "$spare" 2>/dev/null
}
