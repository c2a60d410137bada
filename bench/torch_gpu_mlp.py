"""torch_gpu_mlp.py: the PyTorch peers of the GPU path, on the same GPU.

With --run DIR: the reference configuration (examples/fashion-mnist.toml) trained end to end as
`slurm-train run` trains it: DIR's train.h5 and test.h5 (slurm-train data import), inputs
standardised with the training set's one mean and deviation, Linear -> ReLU -> Dropout per hidden
layer, cross-entropy with label smoothing, AdamW (weight decay on weights only) with warmup and
cosine decay, clipping by global norm, a reshuffle per epoch, a test evaluation per epoch. The
data stays in GPU memory (the strongest input pipeline there is). Prints
  torch_run precision=bf16 samples_per_s=... test_accuracy=... train_seconds=...
samples/s counts the training steps' time only, as the run's epoch lines do.

Without --run, the GEMM-bound step of `gpu_check bench`:

The same model (LAYERS Linear layers WIDTH x WIDTH with bias, ReLU between), cross-entropy over
WIDTH classes (mean over the batch), AdamW (lr 1e-4, PyTorch's defaults otherwise, fused=True),
bf16 through torch.autocast (fp32 master weights), a synthetic batch resident on the GPU;
timed with CUDA events over --steps steps after --warmup, as gpu_check times its step. Then
torch.matmul's ceiling for the same product shape and dtype. Prints key=value lines:
  torch precision=bf16 samples_per_s=... tflops=... step_ms=...
  torch_ceiling precision=bf16 tflops=...
"""
import argparse

import torch
import torch.nn as nn


def reference_run(a):
    import math
    import time

    import h5py
    import numpy as np

    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"

    def load(name):
        with h5py.File(f"{a.run}/{name}", "r") as f:
            x = f["/images"][...].reshape(f["/images"].shape[0], -1).astype(np.float32) / 255.0
            return x, f["/labels"][...].astype(np.int64)

    x_train, y_train = load("train.h5")
    x_test, y_test = load("test.h5")
    mean, std = x_train.mean(), x_train.std()
    x_train = torch.from_numpy((x_train - mean) / std).to(dev)
    x_test = torch.from_numpy((x_test - mean) / std).to(dev)
    y_train, y_test = torch.from_numpy(y_train).to(dev), torch.from_numpy(y_test).to(dev)

    torch.manual_seed(a.seed)
    layers, width = [], x_train.shape[1]
    for h in [int(v) for v in a.hidden.split(",")]:
        layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(a.dropout)]
        width = h
    layers.append(nn.Linear(width, 10))
    model = nn.Sequential(*layers).to(dev)
    decay = [q for n, q in model.named_parameters() if n.endswith("weight")]
    no_decay = [q for n, q in model.named_parameters() if n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr,
                            **({"fused": True} if dev.type == "cuda" else {}))
    per_epoch = x_train.shape[0] // a.batch
    total = a.epochs * per_epoch

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        progress = (step - a.warmup) / max(1, total - a.warmup)
        return a.lr * 0.5 * (1 + math.cos(math.pi * progress))

    loss_fn = nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)
    autocast = a.precision == "bf16"
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    generator = torch.Generator(device="cpu").manual_seed(a.seed)
    train_seconds, accuracy, step = 0.0, 0.0, 0
    for epoch in range(a.epochs):
        order = torch.randperm(x_train.shape[0], generator=generator).to(dev)
        model.train()
        sync()
        begin = time.perf_counter()
        for b in range(per_epoch):
            rows = order[b * a.batch:(b + 1) * a.batch]
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
                loss = loss_fn(model(x_train[rows]), y_train[rows])
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), a.clip)
            opt.step()
            step += 1
        sync()
        train_seconds += time.perf_counter() - begin
        model.eval()
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast):
            correct = sum(int((model(x_test[i:i + 2000]).argmax(1) == y_test[i:i + 2000]).sum())
                          for i in range(0, x_test.shape[0], 2000))
        accuracy = correct / x_test.shape[0]
    print(f"torch_run precision={a.precision} samples_per_s={step * a.batch / train_seconds:.1f} "
          f"test_accuracy={100 * accuracy:.2f} train_seconds={train_seconds:.2f} steps={step}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--run", default="", help="train the reference configuration end to end on DIR's train.h5/test.h5")
    p.add_argument("--device", default="cuda")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--hidden", default="1024,512")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--clip", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=None, help="default 4096; with --run 256")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=None, help="untimed steps (default 5); with --run the lr warmup (200)")
    p.add_argument("--precision", choices=["bf16", "fp32", "tf32"], default="bf16")
    a = p.parse_args()
    if a.run:
        a.batch = a.batch or 256
        a.warmup = 200 if a.warmup is None else a.warmup
        return reference_run(a)
    a.batch = a.batch or 4096
    a.warmup = 5 if a.warmup is None else a.warmup
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    dev = torch.device("cuda")
    mods = []
    for i in range(a.layers):
        mods.append(nn.Linear(a.width, a.width))
        if i + 1 < a.layers:
            mods.append(nn.ReLU())
    model = nn.Sequential(*mods).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, a.width, device=dev)
    y = torch.randint(0, a.width, (a.batch,), device=dev)
    autocast = a.precision == "bf16"

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(a.steps):
        loss = step()
    end.record()
    torch.cuda.synchronize()
    seconds = begin.elapsed_time(end) / 1e3
    sum_in_out = a.layers * a.width * a.width
    flops = 6.0 * a.batch * sum_in_out - 2.0 * a.batch * a.width * a.width
    print(f"torch precision={a.precision} samples_per_s={a.steps * a.batch / seconds:.1f} "
          f"tflops={flops * a.steps / seconds / 1e12:.1f} step_ms={1e3 * seconds / a.steps:.3f} loss={loss.item():.4f}")

    dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
    m1 = torch.zeros(a.batch, a.width, device=dev, dtype=dtype)
    m2 = torch.zeros(a.width, a.width, device=dev, dtype=dtype)
    for _ in range(5):
        torch.matmul(m1, m2.t())
    products = 50
    begin.record()
    for _ in range(products):
        torch.matmul(m1, m2.t())
    end.record()
    torch.cuda.synchronize()
    seconds = begin.elapsed_time(end) / 1e3
    print(f"torch_ceiling precision={a.precision} tflops={products * 2.0 * a.batch * a.width * a.width / seconds / 1e12:.1f}")


if __name__ == "__main__":
    main()
