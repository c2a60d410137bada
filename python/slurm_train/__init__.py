"""Cooperate with `slurm-train exec`: stop together, report progress, save safely, resume.

A program run as

    srun slurm-train exec --metrics metrics.jsonl -- python3 train.py

is supervised on every rank (teardown, hangs, preemption, requeue). This module is the program's
side of it, the Python standard library only (and torch.distributed where the program uses it):

    import slurm_train                  # first: a signal during start-up is then kept, not fatal
    import torch, torch.distributed as dist

    dist.init_process_group("gloo")     # or "nccl"
    path = slurm_train.latest("ckpt")   # None on a fresh start
    step = load(path) if path else 0
    while step < steps:
        if slurm_train.stop_requested():              # collective: every rank, every step
            slurm_train.save(state(), f"ckpt/step-{step:08d}.pt")   # rank 0
            dist.barrier()
            break                                     # exit 0: exec requeues the job
        loss = train_one_step(step)
        step += 1
        slurm_train.heartbeat(step, loss=loss)        # progress, and the figures for the files
    else:
        slurm_train.done()                            # finished: a late signal does not requeue

Functions:
  stop_requested()  a preemption or stop signal (SIGUSR1, SIGUSR2, SIGTERM, as exec forwards it)
                    seen by any rank; agreed over torch.distributed, so that every rank answers at
                    the same step. Call it on every rank at every step boundary.
  stop_signal()     the agreed signal's name ("SIGUSR1"), or None.
  time_left()       seconds until the job's time limit (math.inf without one).
  restart_count()   how many times the job started again: requeues and restarts inside the job.
  heartbeat(step, compute_seconds=None, **metrics)
                    progress for exec's watchdog and straggler judge; the metrics go to exec's
                    --metrics (JSON lines) and --prometheus files, and its --tensorboard folder.
  save(obj, path)   atomically: a temporary file beside it, fsync, rename, fsync of the folder.
  latest(folder)    the newest checkpoint save() left in a folder, or None; UntrustedFolder when
                    another user could have put it there.
  done()            the program has finished: exec will not requeue the job for a later signal.
  under_exec()      True when the program runs under `slurm-train exec`.

heartbeat(), done() and restart_count() need `slurm-train exec` (SLURM_TRAIN_HEARTBEAT and
SLURM_TRAIN_PROGRAM_PIPE); outside it they raise NotUnderExec saying how to run the program.
time_left() needs a Slurm job. stop_requested(), save() and latest() work anywhere.
"""

import errno
import json
import math
import os
import pwd
import re
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time

__all__ = ["NotUnderExec", "UntrustedFolder", "under_exec", "stop_requested", "stop_signal", "time_left",
           "restart_count", "heartbeat", "save", "latest", "done"]

# The signals exec forwards for a preemption or a stop.
STOP_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)
# What exec's metrics file keeps for its own fields, and what a name may be (the supervisor checks
# the same: launcher/program_message.h).
_RESERVED = ("run", "step", "time")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{0,63}\Z")
_MAX_METRICS = 64


class NotUnderExec(RuntimeError):
    """A function that needs `slurm-train exec` (or a Slurm job) was called outside it."""


class UntrustedFolder(RuntimeError):
    """A checkpoint folder that another user could write to: what it holds may not be the job's."""


def _how_to_run(what, variable):
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "train.py"
    return NotUnderExec(
        f"slurm_train.{what} needs `slurm-train exec`, and {variable} is not set: run the program as\n"
        f"    srun slurm-train exec -- python3 {program} ...\n"
        f"(one process without Slurm: slurm-train exec -- python3 {program} ...)")


def under_exec():
    """True when this process runs under `slurm-train exec` (its variables are set)."""
    return bool(os.environ.get("SLURM_TRAIN_HEARTBEAT") and os.environ.get("SLURM_TRAIN_PROGRAM_PIPE"))


# ---- signals ------------------------------------------------------------------------------------

_seen_signal = 0  # the highest stop signal this process received (0: none)


def _on_stop_signal(signum, frame):
    # Only a flag: the handler may run inside a collective, and only a step boundary is a
    # consistent place to stop.
    global _seen_signal
    _seen_signal = max(_seen_signal, signum)


def _watch_stop_signals():
    """Installed at import, in the main thread, for the signals nobody handles yet: a signal that
    comes while the program starts (importing torch takes seconds) must not kill it."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_stop_signal)


_watch_stop_signals()

_agreed_signal = 0


def _distributed():
    """torch.distributed when the program initialised it, else None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


def _world_size():
    try:
        return int(os.environ.get("WORLD_SIZE", "1") or 1)
    except ValueError:
        raise ValueError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a whole number") from None


def stop_requested(group=None):
    """True when any rank received a stop signal: every rank gets the same answer at the same step.

    A collective over torch.distributed (one all-reduce of one integer): call it on every rank at
    every step boundary, in the same place. With one rank it only reads this process's flag. With
    several ranks and torch.distributed not initialised it raises RuntimeError: the ranks could
    not agree, and ranks stopping at different steps would wait for each other for ever.
    """
    global _agreed_signal
    dist = _distributed()
    if dist is None:
        world = _world_size()
        if world > 1:
            raise RuntimeError(
                f"slurm_train.stop_requested(): WORLD_SIZE={world} but torch.distributed is not initialised; "
                "call torch.distributed.init_process_group() first, so that the ranks agree on the step to stop at")
        _agreed_signal = _seen_signal
        return _agreed_signal != 0
    import torch  # torch.distributed is initialised, so torch is imported

    backend = dist.get_backend(group)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    flag = torch.tensor([_seen_signal], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
    _agreed_signal = int(flag.item())
    return _agreed_signal != 0


def stop_signal():
    """The name of the signal stop_requested() agreed on ("SIGUSR1"), or None."""
    return signal.Signals(_agreed_signal).name if _agreed_signal else None


# ---- the job --------------------------------------------------------------------------------------

_deadline = None  # (time.monotonic() of the job's end, when it was asked)
_DEADLINE_TTL = 300.0  # the limit can change (scontrol update); asked again after this long


def _parse_time_left(text):
    """squeue's %L: [DAYS-][HOURS:]MINUTES:SECONDS, or UNLIMITED / NOT_SET / INVALID."""
    text = text.strip()
    if text in ("UNLIMITED", "NOT_SET", "INVALID", ""):
        return math.inf
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    parts = [int(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def time_left():
    """Seconds until the job reaches its time limit (math.inf without one); never negative.

    From SLURM_JOB_END_TIME where Slurm sets it, else asked of slurmctld once (squeue) and
    counted down on this machine's clock, asked again every 5 minutes at most.
    """
    global _deadline
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        raise NotUnderExec("slurm_train.time_left(): not in a Slurm job (SLURM_JOB_ID is not set)")
    end = os.environ.get("SLURM_JOB_END_TIME")
    if end and end.isdigit() and int(end) > 0:
        return max(0.0, int(end) - time.time())
    now = time.monotonic()
    if _deadline is None or now - _deadline[1] > _DEADLINE_TTL:
        try:
            out = subprocess.run(["squeue", "--noheader", "--jobs", job, "--format=%L"], capture_output=True,
                                 text=True, timeout=30, check=True).stdout
        except (OSError, subprocess.SubprocessError) as e:
            raise RuntimeError(f"slurm_train.time_left(): cannot ask Slurm for job {job}'s time left: {e}") from None
        try:
            left = _parse_time_left(out.splitlines()[0] if out.strip() else "")
        except ValueError:
            raise RuntimeError(f"slurm_train.time_left(): squeue gave {out.strip()!r} for job {job}'s time left, "
                               "expected [DAYS-][HOURS:]MINUTES:SECONDS") from None
        _deadline = (now + left, now)
    return max(0.0, _deadline[0] - now)


def _env_count(name):
    value = os.environ.get(name, "") or "0"
    if not value.isdigit():
        raise ValueError(f"{name}={value!r}: expected a whole number")
    return int(value)


def restart_count():
    """How many times this job started again: Slurm's requeues (SLURM_RESTART_COUNT) and the
    restarts inside the allocation (SLURM_TRAIN_RESTART_COUNT). 0 on the first run."""
    if not os.environ.get("SLURM_TRAIN_HEARTBEAT"):
        raise _how_to_run("restart_count()", "SLURM_TRAIN_HEARTBEAT")
    return _env_count("SLURM_RESTART_COUNT") + _env_count("SLURM_TRAIN_RESTART_COUNT")


# ---- the supervisor's files -----------------------------------------------------------------------

_pipe = None
_pipe_broken = False


def _send(message):
    """One line to exec's pipe. A write of under 4 KiB to a pipe is atomic, and the supervisor
    reads as it comes; once the supervisor is gone (the job is ending) lines are dropped."""
    global _pipe, _pipe_broken
    path = os.environ.get("SLURM_TRAIN_PROGRAM_PIPE")
    if not path:
        raise _how_to_run("done()" if "done" in message else "heartbeat()", "SLURM_TRAIN_PROGRAM_PIPE")
    if _pipe_broken:
        return
    line = (json.dumps(message, allow_nan=False, separators=(",", ":")) + "\n").encode()
    try:
        if _pipe is None:
            # Non-blocking open: with no supervisor left holding the pipe it fails (ENXIO) rather
            # than waiting for a reader for ever; the writes then block as usual (a full pipe
            # waits for the supervisor, which reads as lines come).
            _pipe = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            os.set_blocking(_pipe, True)
        os.write(_pipe, line)
    except OSError as e:
        _pipe_broken = True
        sys.stderr.write(f"slurm_train: the supervisor's pipe {path}: {e.strerror}; figures are no longer sent\n")


def _figures(metrics):
    if len(metrics) > _MAX_METRICS:
        raise ValueError(f"slurm_train.heartbeat(): {len(metrics)} metrics, at most {_MAX_METRICS}")
    out = {}
    for name, value in metrics.items():
        if not _NAME.match(name) or name in _RESERVED:
            raise ValueError(f"slurm_train.heartbeat(): metric name {name!r}: expected letters, digits and _ . / - "
                             "(at most 64, starting with a letter or _), and none of " + ", ".join(_RESERVED))
        if hasattr(value, "item"):  # a one-element tensor or numpy number
            value = value.item()
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"slurm_train.heartbeat(): metric {name!r} = {value!r}: expected a number")
        out[name] = float(value) if math.isfinite(value) else None  # JSON has no NaN: null
    return out


def heartbeat(step, compute_seconds=None, **metrics):
    """Progress: `step` steps done. Call it on every rank after every step (it is cheap: one small
    write to a file in memory, and a line to a pipe when there are metrics).

    compute_seconds: the seconds this step spent computing, its waits in collectives left out;
    exec's straggler judge compares them across ranks (without it, the pace between heartbeats).
    metrics: figures at this step (loss=0.41, lr=3e-4, tensors of one element too); rank 0's
    supervisor appends them to exec's --metrics file and --tensorboard folder, and keeps the newest
    in its --prometheus file. A value that is not finite is written as null.
    """
    path = os.environ.get("SLURM_TRAIN_HEARTBEAT")
    if not path:
        raise _how_to_run("heartbeat()", "SLURM_TRAIN_HEARTBEAT")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"slurm_train.heartbeat(): step {step!r}: expected a whole number >= 0")
    if compute_seconds is not None and not (isinstance(compute_seconds, (int, float)) and compute_seconds >= 0):
        raise ValueError(f"slurm_train.heartbeat(): compute_seconds={compute_seconds!r}: expected seconds >= 0")
    figures = _figures(metrics)
    # No fsync: the supervisor on this node reads the page cache.
    with open(path, "w") as f:
        f.write(f"{step}\n" if compute_seconds is None else f"{step} {compute_seconds:.6f}\n")
    if figures:
        _send({"step": step, "metrics": figures})


def done():
    """The program has finished its work: a preemption signal from now on ends the job without
    requeueing it (the program still gets the signal). Call it once training and its last
    checkpoint are complete."""
    _send({"done": True})


# ---- checkpoints ----------------------------------------------------------------------------------

_TEMPORARY = ".slurm-train-tmp."


def _write(obj_or_writer, f):
    if callable(obj_or_writer):
        obj_or_writer(f)
    elif isinstance(obj_or_writer, (bytes, bytearray, memoryview)):
        f.write(obj_or_writer)
    elif "torch" in sys.modules:
        sys.modules["torch"].save(obj_or_writer, f)
    else:
        import pickle

        pickle.dump(obj_or_writer, f, protocol=pickle.HIGHEST_PROTOCOL)


def _create_temporary(folder, name):
    """A new file beside `name` in `folder`, open for writing: (file descriptor, path). Created
    with mode 0666 for the kernel to apply the umask (and a folder's default ACL) as it does for
    any new file, so that the checkpoint gets the mode open() would give it. Reading the umask
    instead takes os.umask(), which changes it for every thread of the process while it reads."""
    for _ in range(100):
        path = os.path.join(folder, f"{_TEMPORARY}{name}.{secrets.token_hex(6)}")
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"slurm_train.save(): no free temporary name in {folder}")


def save(obj_or_writer, path):
    """Writes a checkpoint so that `path` is always either the old file or the whole new one,
    whenever the job is killed: a temporary file in the same folder, fsync, rename over `path`,
    fsync of the folder (the rename itself durable).

    obj_or_writer: a function given the open binary file (e.g. lambda f: torch.save(state, f)),
    bytes, or an object: torch.save'd when torch is imported, else pickled. Call it on one rank
    (rank 0 for replicated state), then a barrier, so that no rank goes on before it is complete.
    Returns `path`.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = _create_temporary(folder, os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            _write(obj_or_writer, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def _user(uid):
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _trust_problem(what, st, above):
    """Why a folder with this stat is not this user's alone to change (None when it is): owned by
    this user or root, and not writable by every user; a folder on the way to it may be, when it
    is sticky (/tmp): there no one renames or removes what is not theirs. The launcher's rule
    (train/io/folder_trust.h): a group-writable folder trusts its group, the user's choice."""
    me = os.getuid()
    if st.st_uid not in (me, 0):
        return (f"{what} belongs to {_user(st.st_uid)}, not to this process's user ({_user(me)}): they could change "
                "what the job reads there. Use a folder of your own")
    mode = stat.S_IMODE(st.st_mode)
    if not st.st_mode & stat.S_IWOTH or (above and st.st_mode & stat.S_ISVTX):
        return None
    if above:
        return (f"{what} can be written by every user and is not sticky (mode {mode:04o}): anyone could put a folder "
                "of their own in the checkpoint folder's place. Use a folder of your own, or chmod o-w it")
    return (f"{what} can be written by every user (mode {mode:04o}): anyone could plant or replace what the job "
            "reads there. Use a folder of your own, or chmod o-w it")


def _link_problem(what, link, link_st, target, holder, holder_st):
    """Why a link met on the way is not followed (None when it is): a link's target never changes,
    so only who may replace the entry can repoint it: whoever can write its folder, and in a
    sticky folder the link's owner alone. Followed in a folder others cannot write (a site's
    /scratch -> /lustre/scratch), or in a sticky one when it is this user's or root's."""
    if not holder_st.st_mode & stat.S_IWOTH:
        return None
    if holder_st.st_mode & stat.S_ISVTX and link_st.st_uid in (os.getuid(), 0):
        return None
    return (f"{what}: {link!r} is a link (to {target!r}) that {_user(link_st.st_uid)} made in {holder!r}, a folder "
            f"every user can write (mode {stat.S_IMODE(holder_st.st_mode):04o}): they could point it elsewhere. "
            "Give the folder it points to instead, or a folder of your own")


def _open_trusted_folder(folder):
    """The folder, opened (a descriptor), walked from / one entry at a time as the launcher walks
    it (train/io/trusted_folder.h): each folder on the way and the folder itself judged by
    _trust_problem, each link by _link_problem before it is followed, every step opened without
    following a link; None when it does not exist. A checkpoint is unpickled when loaded: one
    that another user put there runs their code as this user."""
    what = f"the checkpoint folder {folder!r}"
    parts = [p for p in os.path.abspath(folder).split("/") if p]
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd, here, links = os.open("/", flags), "/", 0
    try:
        while parts:
            name = parts.pop(0)
            here_st = os.fstat(fd)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return None
            entry = os.path.join(here, name)
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > 40:
                    raise OSError(errno.ELOOP, "too many links on the way", folder)
                target = os.readlink(name, dir_fd=fd)
                problem = _link_problem(what, entry, st, target, here, here_st)
                if problem:
                    raise UntrustedFolder(f"slurm_train.latest(): {problem}")
                parts = [p for p in target.split("/") if p] + parts
                if target.startswith("/"):
                    os.close(fd)
                    fd, here = os.open("/", flags), "/"
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a folder", entry)
            last = not parts
            shown = what if last else f"{entry!r}, a folder on the way to {what},"
            problem = _trust_problem(shown, st, above=not last)
            if problem:
                raise UntrustedFolder(f"slurm_train.latest(): {problem}")
            inner = os.open(name, flags, dir_fd=fd)
            os.close(fd)
            fd = inner
            here = os.path.normpath(entry)
        # Opened for reading through the descriptor walked to, not by the path again.
        readable = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)
    return readable


_NUMBER = re.compile(r"(\d+)")


def latest(folder):
    """The path of the newest checkpoint in `folder` (None when there is none, or no folder):
    the one whose name holds the highest number (step-000120.pt over step-000100.pt), else the
    most recently written. save()'s temporary files, and names starting with '.', are never
    taken: what latest() returns is complete. Raises UntrustedFolder, saying why, when another
    user could write to the folder or to a folder on the way to it (other than a sticky one, such
    as /tmp), or could repoint a link on the way (one they made in /tmp): what it holds may be
    theirs, and loading a checkpoint runs code."""
    folder = os.fspath(folder)
    fd = _open_trusted_folder(folder)
    if fd is None:
        return None
    try:
        found = []
        for name in os.listdir(fd):
            if name.startswith("."):
                continue
            try:
                st = os.stat(name, dir_fd=fd)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                numbers = _NUMBER.findall(name)
                found.append((int(numbers[-1]) if numbers else -1, st.st_mtime_ns, name))
    finally:
        os.close(fd)
    return os.path.join(folder, max(found)[2]) if found else None
