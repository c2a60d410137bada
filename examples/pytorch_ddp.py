#!/usr/bin/env python3
"""A small, real PyTorch DistributedDataParallel training run to put under `slurm-train exec`.

An MLP (784 -> --hidden -> 10) learns Fashion-MNIST (Debian's dataset-fashion-mnist, read from
--data) with SGD and momentum, on CPU (gloo) or GPU (nccl). Every rank is one process; run it as

    srun -N2 -n4 slurm-train exec -- python3 examples/pytorch_ddp.py --ckpt ckpt/ddp.pt

`slurm-train exec` gives each rank RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK,
MASTER_ADDR and MASTER_PORT (the rendezvous of init_method="env://"). The script cooperates with
it through the `slurm_train` module (python/slurm_train; `module load slurm-train` puts it on
PYTHONPATH): after every step `slurm_train.heartbeat(step, compute_seconds, loss=...)` tells
the supervisor the step reached (its progress), the seconds the step spent computing (what names
a straggler) and the figures for exec's --metrics and --prometheus files. Without Slurm, set the
variables yourself, e.g. one process:

    RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 examples/pytorch_ddp.py

Preemption: on SIGUSR1, SIGUSR2 or SIGTERM (which `slurm-train exec` forwards from Slurm)
`slurm_train.stop_requested()`, called by every rank before every step, becomes true on all of
them at the same step; rank 0 then writes the checkpoint (--ckpt, with `slurm_train.save`: a
temporary file, fsync, rename) and every rank exits 0. `slurm-train exec` requeues the job, and
the next run finds PATH and resumes from it: every rank loads the model, the optimizer (momentum
included) and the step. The data of a step depends only on the seed and the step, so for the same
number of ranks an interrupted and resumed run ends with exactly the same model, and prints the
same `final loss`, as one that ran straight through. PATH must be on a file system every rank
sees. After the last checkpoint the script calls `slurm_train.done()`: a signal during the final
evaluation no longer requeues the job.

Restarts inside the job: under `slurm-train srun` (a spare node takes a failed node's place),
a restarted step gets SLURM_TRAIN_RESTART_COUNT (1, 2, ...) and SLURM_TRAIN_RESTART_CAUSE; rank 0
says so, and the run resumes from PATH as above. The testing aids below act in a job's first
attempt only (SLURM_TRAIN_RESTART_COUNT unset or 0), so that a test can watch the recovery.

Output: each rank prints `rank R of W on HOST pid PID`; rank 0 prints `step N/TOTAL loss X`
every --log-every steps, and at the end `final loss X` (mean cross-entropy of the final model on
the first 2000 test images) and `test accuracy A` (a fraction). Exit status: 0 when done or
preempted, 2 for a usage error or missing rendezvous variables, 3 for --fail-at-step.
"""
import argparse
import gzip
import os
import signal
import socket
import sys
import time

# First: from here on a stop signal during start-up (importing torch takes seconds on a busy node)
# is kept and answered at the first step boundary. A source checkout finds the module beside
# examples/; an installation puts it on PYTHONPATH (module load slurm-train).
try:
    import slurm_train
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, "python"))
    import slurm_train

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

REQUIRED_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
TEST_SAMPLES = 2000


def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: cuda if available (backend nccl), else cpu (backend gloo)")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist",
                   help="folder of the gzipped IDX files {train,t10k}-{images-idx3,labels-idx1}"
                   "-ubyte.gz (default: %(default)s)")
    p.add_argument("--hidden", type=int, default=128, help="hidden width (default: %(default)s)")
    p.add_argument("--lr", type=float, default=0.05,
                   help="SGD learning rate, momentum 0.9 (default: %(default)s)")
    p.add_argument("--batch", type=int, default=256,
                   help="global batch, split evenly over the ranks (default: %(default)s)")
    p.add_argument("--steps", type=int, default=300, help="steps in all (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="initialisation and data order "
                   "(default: %(default)s)")
    p.add_argument("--ckpt", metavar="PATH",
                   help="checkpoint: resumed from when it exists, written on preemption, every "
                   "--ckpt-every steps and at the end")
    p.add_argument("--ckpt-every", type=int, default=100, metavar="N",
                   help="also checkpoint every N steps, against kills without warning; 0: only on "
                   "preemption and at the end (default: %(default)s)")
    p.add_argument("--log-every", type=int, default=50, metavar="N",
                   help="rank 0 prints the loss every N steps (default: %(default)s)")
    p.add_argument("--eval-every", type=int, default=0, metavar="N",
                   help="rank 0 also evaluates on the first 2000 test images every N steps and "
                   "reports test_loss and test_accuracy; 0: only at the end (default: %(default)s)")
    t = p.add_argument_group("testing aids", "to exercise the supervisor on a short run")
    t.add_argument("--step-sleep", type=float, default=0.0, metavar="SECONDS",
                   help="sleep after each step, so that a short run lasts long enough to be "
                   "signalled (default: %(default)s)")
    t.add_argument("--eval-sleep", type=float, default=0.0, metavar="SECONDS",
                   help="rank 0 sleeps this long in each --eval-every evaluation, so that a signal "
                   "can come during one (default: %(default)s)")
    t.add_argument("--hang-at-step", type=int, metavar="N",
                   help="rank --hang-rank, once it has computed step N, hangs for ever without "
                   "writing heartbeat N (its reported step stays behind the others')")
    t.add_argument("--hang-rank", type=int, default=0, metavar="R", help="(default: %(default)s)")
    t.add_argument("--fail-at-step", type=int, metavar="N",
                   help="rank --fail-rank, once it has computed step N, exits with status 3 "
                   "(the others then fail in their next collective)")
    t.add_argument("--fail-rank", type=int, default=0, metavar="R", help="(default: %(default)s)")
    t.add_argument("--kill-at-step", type=int, metavar="N",
                   help="rank --kill-rank, once it has computed step N, kills itself with SIGKILL "
                   "(as the out-of-memory killer or a lost node would end it)")
    t.add_argument("--kill-rank", type=int, default=0, metavar="R", help="(default: %(default)s)")
    t.add_argument("--slow-ms", type=float, default=0.0, metavar="MS",
                   help="rank --slow-rank sleeps MS milliseconds in every step, counted as its "
                   "compute time (a straggler) (default: %(default)s)")
    t.add_argument("--slow-rank", type=int, default=0, metavar="R", help="(default: %(default)s)")
    args = p.parse_args()
    for name in ("hidden", "batch", "steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if (args.ckpt_every < 0 or args.log_every < 1 or args.eval_every < 0 or args.step_sleep < 0
            or args.slow_ms < 0 or args.eval_sleep < 0):
        p.error("--ckpt-every, --log-every, --eval-every, --step-sleep, --slow-ms and --eval-sleep "
                "must not be negative (--log-every at least 1)")
    return args


def rendezvous_env():
    """RANK, LOCAL_RANK and WORLD_SIZE from the environment, or exit 2 saying how to run."""
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        sys.stderr.write(
            f"{sys.argv[0]}: {', '.join(missing)} not set: this is one rank of a distributed run.\n"
            f"Run it under Slurm as   srun slurm-train exec -- python3 {sys.argv[0]} ...\n"
            "or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT yourself (one process: "
            "RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500).\n")
        sys.exit(2)
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError as e:
        sys.stderr.write(f"{sys.argv[0]}: a rendezvous variable is not a number: {e}\n")
        sys.exit(2)
    if not 0 <= rank < world:
        sys.stderr.write(f"{sys.argv[0]}: RANK={rank} is not within WORLD_SIZE={world}\n")
        sys.exit(2)
    return rank, local_rank, world


def read_idx(path):
    """An IDX file (big-endian header: 0, 0, type 0x08 = uint8, ndim, then ndim uint32 sizes)."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw[:3] != b"\0\0\x08":
        sys.exit(f"{path}: not an IDX file of unsigned bytes")
    ndim = raw[3]
    shape = tuple(int(n) for n in np.frombuffer(raw, ">u4", ndim, 4))
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_split(folder, split):
    """Images as uint8 [N, 784] (scaled per batch: a float copy of all of them, on every rank,
    would cost 188 MB a rank), labels as int64 [N]."""
    try:
        images = read_idx(os.path.join(folder, f"{split}-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(folder, f"{split}-labels-idx1-ubyte.gz"))
    except OSError as e:
        sys.exit(f"{e}\n(install Debian's dataset-fashion-mnist, or point --data at the IDX files)")
    return images.reshape(len(images), -1), labels.astype(np.int64)


def to_inputs(images, device):
    return torch.from_numpy(images.astype(np.float32) / 255.0).to(device)


class StepData:
    """The samples of global step s depend on (seed, s) only, not on where a run started: epoch
    e = s // steps_per_epoch is a permutation drawn from default_rng(seed + e), and step s takes
    the next global batch of it (the tail short of a batch is dropped). Rank r takes its
    contiguous slice, so every rank count sees the same global batches."""

    def __init__(self, count, seed, batch, rank, world):
        self.count, self.seed, self.batch = count, seed, batch
        self.per_rank = batch // world
        self.begin = rank * self.per_rank
        self.steps_per_epoch = count // batch
        self.epoch, self.perm = None, None

    def indices(self, step):
        epoch, within = divmod(step, self.steps_per_epoch)
        if epoch != self.epoch:
            self.epoch = epoch
            self.perm = np.random.default_rng(self.seed + epoch).permutation(self.count)
        start = within * self.batch + self.begin
        return self.perm[start:start + self.per_rank]


def rank_ordered_mean(world, bucket):
    """DDP communication hook: the mean of a gradient bucket over the ranks, added up in rank
    order. Plain DDP allreduces the bucket, and gloo's ring adds the ranks' values in an order
    that depends on an element's place in the bucket; DDP lays its buckets out again after the
    first step (in backward order), so with 3 or more ranks the first step of a resumed run would
    round differently from the same step of a run that went straight through. An all_gather and
    a fixed-order sum cost world x bucket memory, nothing for this model, and make resume exact."""
    buffer = bucket.buffer()
    parts = [torch.empty_like(buffer) for _ in range(world)]
    work = dist.all_gather(parts, buffer, async_op=True)

    def mean(_):
        total = parts[0].clone()
        for part in parts[1:]:
            total += part
        return total.div_(world)

    return work.get_future().then(mean)


def evaluate(model, test_x, test_y, device):
    """Mean cross-entropy and accuracy of the model on the first TEST_SAMPLES test images."""
    model.eval()
    with torch.no_grad():
        logits = model(to_inputs(test_x[:TEST_SAMPLES], device))
        labels = torch.from_numpy(test_y[:TEST_SAMPLES]).to(device)
        test_loss = F.cross_entropy(logits, labels).item()
        accuracy = (logits.argmax(1) == labels).double().mean().item()
    model.train()
    return test_loss, accuracy


def main():
    args = parse_args()
    rank, local_rank, world = rendezvous_env()
    if args.batch % world:
        sys.stderr.write(f"{sys.argv[0]}: --batch {args.batch} is not divisible by "
                         f"WORLD_SIZE={world}\n")
        sys.exit(2)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.stderr.write(f"{sys.argv[0]}: --device cuda, but torch sees no usable GPU\n")
            sys.exit(2)
        device, backend = torch.device("cuda", local_rank), "nccl"
        torch.cuda.set_device(device)
    else:
        device, backend = torch.device("cpu"), "gloo"
        # Several ranks share a node's cores: one thread each unless the user chose otherwise.
        if "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(1)

    print(f"rank {rank} of {world} on {socket.gethostname()} pid {os.getpid()}", flush=True)
    restarts = int(os.environ.get("SLURM_TRAIN_RESTART_COUNT", "0") or 0)  # inside this job
    if restarts > 0:
        if rank == 0:
            cause = os.environ.get("SLURM_TRAIN_RESTART_CAUSE", "cause unknown")
            print(f"restart {restarts} inside the job ({cause}): resuming from "
                  f"{args.ckpt or 'nothing (no --ckpt)'}", flush=True)
        args.hang_at_step = args.fail_at_step = args.kill_at_step = None
        args.slow_ms = 0.0
    slow_seconds = args.slow_ms / 1000 if args.slow_rank == rank else 0.0

    train_x, train_y = load_split(args.data, "train")
    if len(train_x) < args.batch:
        sys.stderr.write(f"{sys.argv[0]}: --batch {args.batch} exceeds the {len(train_x)} "
                         "training samples\n")
        sys.exit(2)
    data = StepData(len(train_x), args.seed, args.batch, rank, world)

    dist.init_process_group(backend, init_method="env://")

    # Seeded before the model is built: every rank starts from the same parameters (DDP also
    # broadcasts rank 0's, but a seeded build makes runs repeatable).
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(784, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step = 0
    if args.ckpt and os.path.exists(args.ckpt):
        state = torch.load(args.ckpt, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])  # the momentum buffers: exact resume
        step = int(state["step"])
        if rank == 0:
            print(f"resumed from {args.ckpt} at step {step}", flush=True)
            saved = state.get("args", {})
            for key in ("seed", "batch", "lr"):
                if key in saved and saved[key] != getattr(args, key):
                    print(f"warning: the checkpoint was written with --{key} {saved[key]}, this "
                          f"run has {getattr(args, key)}", flush=True)
        del state
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    ddp.register_comm_hook(world, rank_ordered_mean)

    def barrier():
        # nccl would otherwise guess the GPU of a barrier from the rank, not LOCAL_RANK.
        dist.barrier(**({"device_ids": [local_rank]} if backend == "nccl" else {}))

    def checkpoint():
        """Collective: rank 0 writes, the others wait, so nobody runs on (or exits) before the
        checkpoint is complete."""
        if rank == 0:
            slurm_train.save({
                "step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "args": {"seed": args.seed, "batch": args.batch, "lr": args.lr,
                         "hidden": args.hidden, "world_size": world}}, args.ckpt)
        barrier()

    supervised = slurm_train.under_exec()
    if supervised:
        slurm_train.heartbeat(step)  # where a resumed run starts counts as progress too
    test_x = test_y = None
    while step < args.steps:
        # Every rank stops at the same step, or the ones still training would wait for ever in
        # the next collective: stop_requested() agrees across the ranks.
        if slurm_train.stop_requested():
            name = slurm_train.stop_signal()
            print(f"rank {rank} stops at step {step} ({name})", flush=True)
            if args.ckpt:
                checkpoint()
                outcome = f"checkpoint written to {args.ckpt}"
            else:
                outcome = "no --ckpt, nothing saved"
            if rank == 0:
                print(f"preempted by {name} at step {step}: {outcome}", flush=True)
            dist.destroy_process_group()
            return 0

        idx = data.indices(step)
        x, y = to_inputs(train_x[idx], device), torch.from_numpy(train_y[idx]).to(device)
        optimizer.zero_grad(set_to_none=True)
        # The step's compute seconds, for the straggler judge: the forward pass and the loss, and
        # the injected slowdown. The backward pass is left out: DDP runs the gradient all-reduce
        # inside it, overlapped, and the time a rank waits there for a slow peer is not its own.
        # The forward is the proxy for the whole step's compute.
        started = time.perf_counter()
        loss = F.cross_entropy(ddp(x), y)
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # the kernels, not only their launch
        if slow_seconds:
            time.sleep(slow_seconds)
        compute_seconds = time.perf_counter() - started
        loss.backward()  # DDP averages the gradients over the ranks (rank_ordered_mean)
        optimizer.step()
        step += 1

        figures = {}
        if step % args.log_every == 0 or step == args.steps:
            # The loss of the global batch, not only rank 0's slice of it.
            logged = loss.detach().clone()
            dist.all_reduce(logged)
            figures["loss"] = logged.item() / world
            if rank == 0:
                print(f"step {step}/{args.steps} loss {figures['loss']:.6f}", flush=True)
        if args.eval_every and step % args.eval_every == 0 and rank == 0:
            if test_x is None:
                test_x, test_y = load_split(args.data, "t10k")
            print(f"evaluating at step {step}", flush=True)
            figures["test_loss"], figures["test_accuracy"] = evaluate(model, test_x, test_y, device)
            time.sleep(args.eval_sleep)
        if args.hang_at_step == step and args.hang_rank == rank:
            print(f"rank {rank} hangs at step {step} (--hang-at-step)", flush=True)
            while True:
                time.sleep(3600)
        if args.kill_at_step == step and args.kill_rank == rank:
            print(f"rank {rank} kills itself at step {step} (--kill-at-step)", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if args.fail_at_step == step and args.fail_rank == rank:
            sys.stderr.write(f"rank {rank} fails at step {step} (--fail-at-step)\n")
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(3)  # at once: interpreter teardown with a live process group can block
        if supervised:
            slurm_train.heartbeat(step, compute_seconds, **figures)
        if args.ckpt and args.ckpt_every and step % args.ckpt_every == 0 and step < args.steps:
            checkpoint()
        if args.step_sleep:
            time.sleep(args.step_sleep)

    if args.ckpt:
        checkpoint()  # a requeued run after the end resumes at the last step and only evaluates
    if supervised:
        slurm_train.done()  # the work is saved: a signal from now on does not requeue the job
    if rank == 0:
        if test_x is None:
            test_x, test_y = load_split(args.data, "t10k")
        test_loss, accuracy = evaluate(model, test_x, test_y, device)
        print(f"final loss {test_loss:.8f}", flush=True)
        print(f"test accuracy {accuracy:.4f}", flush=True)
    barrier()  # all ranks end together, after rank 0's result
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
