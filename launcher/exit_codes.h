// The exit codes of `slurm-train run`, one table for docs/launcher.md (Exit codes), --help and the code. A job
// script (or a site's requeue policy) tells by them what happened without reading the log.
#pragma once

namespace slurm_train {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;             // an error on some rank (named in the message)
inline constexpr int kExitUsage = 2;              // bad command line or configuration
inline constexpr int kExitCheckpointWrite = 3;    // a checkpoint could not be written
inline constexpr int kExitHang = 4;               // the watchdog found a rank without progress
inline constexpr int kExitRequeued = 5;           // preempted: checkpoint written, job requeued
inline constexpr int kExitPreempted = 6;          // preempted: checkpoint written, not requeued
inline constexpr int kExitDoNotRequeue = 7;       // restarted too often without progress: give up
inline constexpr int kExitCheckpointDirBusy = 8;  // ckpt.dir belongs to another running job
inline constexpr int kExitDiverged = 9;           // the loss or gradient norm is not finite

// For `slurm-train run --help` and docs/launcher.md.
inline constexpr const char* kExitCodeTable =
    "Exit codes:\n"
    "  0  training finished (or stopped at train.stop_after)\n"
    "  1  an error on some rank; the message names the rank, host and cause\n"
    "  2  usage or configuration error\n"
    "  3  a checkpoint could not be written (the message names the path; older ones are intact)\n"
    "  4  hang: a rank made no progress for --hang-timeout seconds (a rank-status table names it)\n"
    "  5  preempted: checkpoint written and the job requeued itself (scontrol requeue)\n"
    "  6  preempted: checkpoint written, not requeued (not a requeueable batch job)\n"
    "  7  do not requeue: --max-restarts-without-progress restarts made no progress\n"
    "  8  ckpt.dir belongs to another running job (the message names it and the job); nothing was touched\n"
    "  9  training diverged: a loss or gradient norm not finite (the message names the step);\n"
    "     no checkpoint of it was written\n";

// For `slurm-train exec --help` and docs/launcher.md: the same codes, where they apply to a program
// the launcher supervises, and the program's own status where it failed.
inline constexpr const char* kExecExitCodeTable =
    "Exit codes (those of `run`, where they apply):\n"
    "  0    the program exited 0 on every rank\n"
    "  1    another rank's program failed (task 0 names it), a rank was lost, or the supervisor failed\n"
    "  2    usage error\n"
    "  4    hang: a rank's program wrote no output and did not touch its heartbeat file for --hang-timeout\n"
    "       seconds (a rank-status table names it)\n"
    "  5    preempted: every rank's program exited after the forwarded signal, and the job requeued itself\n"
    "  6    preempted, not requeued (not a requeueable batch job)\n"
    "  7    do not requeue: --max-restarts-without-progress preempted runs in a row made no progress\n"
    "  N    on the rank whose program failed: the program's own exit status (128+S when signal S killed it)\n"
    "  126  the program is not executable; 127: it was not found\n";

}  // namespace slurm_train
