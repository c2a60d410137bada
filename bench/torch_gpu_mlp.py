"""torch_gpu_mlp.py: the PyTorch peer of `gpu_check bench`, on the same GPU.

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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--precision", choices=["bf16", "fp32", "tf32"], default="bf16")
    a = p.parse_args()
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
