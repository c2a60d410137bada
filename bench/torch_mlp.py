"""torch_mlp.py: the PyTorch peer of bench/train_step.cc, the same training step in PyTorch.

DistributedDataParallel over gloo, the same model (Linear -> ReLU -> Dropout per hidden layer,
then Linear), the same loss (cross-entropy with label smoothing, mean over the global batch),
the same AdamW (weight decay on weights only, warmup-cosine learning rate), clipping by global
norm, the same loss all-reduce for reporting, and the same in-memory data: each rank gathers its
rows of the global batch from a normalised float copy of the data.

Rendezvous: env:// (MASTER_ADDR, MASTER_PORT; RANK and WORLD_SIZE, or Open MPI's own variables
when started by mpirun, as bench/run.sh does). Prints one line from rank 0 in train_step's
key=value form. Run with Debian's /usr/bin/python3.
"""
import argparse
import math
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn


def load_samples(args):
    if args.data:
        import h5py
        with h5py.File(args.data, "r") as f:
            raw = f["/images"][...].reshape(f["/images"].shape[0], -1).astype(np.float32) / 255.0
            labels = f["/labels"][...].astype(np.int64)
        raw = (raw - raw.mean()) / raw.std()
        return torch.from_numpy(raw), torch.from_numpy(labels)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((args.synthetic_samples, args.inputs), dtype=np.float32)
    y = rng.integers(0, args.classes, args.synthetic_samples)
    return torch.from_numpy(x), torch.from_numpy(y)


def make_model(inputs, hidden, classes, dropout):
    layers, width = [], inputs
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        if dropout > 0:
            layers.append(nn.Dropout(dropout))
        width = h
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="")
    p.add_argument("--hidden", default="1024,512")
    p.add_argument("--inputs", type=int, default=784)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--synthetic-samples", type=int, default=8192)
    p.add_argument("--global-batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()

    for ours, ompi in (("RANK", "OMPI_COMM_WORLD_RANK"), ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")):
        if ours not in os.environ and ompi in os.environ:
            os.environ[ours] = os.environ[ompi]
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42)
    x_all, y_all = load_samples(args)
    order = torch.from_numpy(np.random.default_rng(42).permutation(len(y_all)))
    # Rank r's rows of a global batch: the exact split of bench/train_step.cc (train/data/batches.cc).
    base, extra = divmod(args.global_batch, world)
    begin = rank * base + min(rank, extra)
    rows = base + (1 if rank < extra else 0)
    batches = len(y_all) // args.global_batch

    hidden = [int(h) for h in args.hidden.split(",")]
    model = nn.parallel.DistributedDataParallel(make_model(x_all.shape[1], hidden, args.classes, args.dropout))
    weights = [q for n, q in model.named_parameters() if n.endswith("weight")]
    biases = [q for n, q in model.named_parameters() if n.endswith("bias")]
    optimizer = torch.optim.AdamW([{"params": weights, "weight_decay": 0.05},
                                   {"params": biases, "weight_decay": 0.0}], lr=1e-3)
    total = args.warmup + args.steps * args.repeats
    warmup = 200
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup
        else 0.5 * (1 + math.cos(math.pi * min(1.0, (s - warmup) / max(total - warmup - 1, 1)))))
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    model.train()

    def step(s):
        first = (s % batches) * args.global_batch + begin
        idx = order[first:first + rows]
        x, y = x_all[idx], y_all[idx]
        logits = model(x)
        loss = loss_fn(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        totals = torch.stack([loss.detach() * rows, (logits.argmax(1) == y).sum().to(loss.dtype)])
        dist.all_reduce(totals)
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        schedule.step()

    s = 0
    for _ in range(args.warmup):
        step(s)
        s += 1
    best = float("inf")
    cpu0 = time.process_time()
    for _ in range(args.repeats):
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step(s)
            s += 1
        best = min(best, (time.perf_counter() - t0) / args.steps)
    if rank == 0:
        params = sum(q.numel() for q in model.parameters())
        print(f"ranks={world} threads={args.threads} params={params} global_batch={args.global_batch} "
              f"step_ms={1e3 * best:.3f} samples_per_s={args.global_batch / best:.1f} "
              f"rank0_cpu_ms_per_step={1e3 * (time.process_time() - cpu0) / (args.steps * args.repeats):.3f}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
