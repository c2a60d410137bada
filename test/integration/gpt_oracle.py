"""The PyTorch oracle for train/models/gpt.h: GPT-2's architecture written here in plain torch (not our
code), loaded with the parameters gpt-oracle wrote, run on the same batch; the logits, the loss,
every parameter's gradient, and three clipped AdamW steps must match ours within a relative error
of 1e-5 (fp32); a parameter's change over the steps within 1e-5 or within one fp32 step of its
values, where that is larger (a LayerNorm weight near 1 holds a change of 3e-3 to about 4e-5:
two correct fp32 updates may land on neighbouring floats, and PyTorch's own fp32 update differs
from the exact, fp64 one by 2-3e-5 there).

    gpt_oracle.py FILE.h5      (written by build/test/gpt_oracle)
"""
import math
import sys

import h5py
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def block(x, p, n, heads):
    """One pre-LayerNorm block; weights as transformers' Conv1D keeps them ([in, out])."""
    B, T, C = x.shape
    h = F.layer_norm(x, (C,), p[f"h.{n}.ln_1.weight"], p[f"h.{n}.ln_1.bias"], eps=1e-5)
    qkv = h @ p[f"h.{n}.attn.c_attn.weight"] + p[f"h.{n}.attn.c_attn.bias"]
    q, k, v = qkv.split(C, dim=2)
    q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) / math.sqrt(C // heads)
    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf")).softmax(dim=-1)
    y = (att @ v).transpose(1, 2).reshape(B, T, C)
    x = x + y @ p[f"h.{n}.attn.c_proj.weight"] + p[f"h.{n}.attn.c_proj.bias"]
    h = F.layer_norm(x, (C,), p[f"h.{n}.ln_2.weight"], p[f"h.{n}.ln_2.bias"], eps=1e-5)
    h = F.gelu(h @ p[f"h.{n}.mlp.c_fc.weight"] + p[f"h.{n}.mlp.c_fc.bias"])
    return x + h @ p[f"h.{n}.mlp.c_proj.weight"] + p[f"h.{n}.mlp.c_proj.bias"]


def logits_and_loss(p, tokens, targets, layers, heads, recompute=False):
    """The model on tokens [B, T]: the logits [B*T, V] and the mean cross-entropy against targets.
    With recompute, each block's activations are recomputed in the backward pass (less memory)."""
    vocab, embd = p["wte"].shape
    x = p["wte"][tokens] + p["wpe"][: tokens.shape[1]]
    for n in range(layers):
        x = checkpoint(block, x, p, n, heads, use_reentrant=False) if recompute else block(x, p, n, heads)
    x = F.layer_norm(x, (embd,), p["ln_f.weight"], p["ln_f.bias"], eps=1e-5)
    logits = (x @ p["wte"].T).view(-1, vocab)
    return logits, F.cross_entropy(logits, targets.reshape(-1))


def relative_error(ours, theirs):
    return (torch.linalg.vector_norm(ours - theirs) / torch.linalg.vector_norm(theirs).clamp_min(1e-30)).item()


def one_float_step(values, change):
    """The relative error of `change` that one fp32 step of each of `values` (where the change
    ends) makes: the resolution of a change read back as a difference of fp32 values."""
    step = torch.nextafter(values, torch.full_like(values, float("inf"))) - values
    return (torch.linalg.vector_norm(step) / torch.linalg.vector_norm(change).clamp_min(1e-30)).item()


def main(path):
    torch.set_num_threads(1)  # one summation order, run after run
    f = h5py.File(path, "r")
    vocab, block_size, layers, heads, embd = (int(v) for v in f.attrs["config"])
    p = {name: torch.tensor(f["model"][name][()], requires_grad=True) for name in f["model"]}
    tokens = torch.tensor(f["tokens"][()].astype("int64"))
    targets = torch.tensor(f["targets"][()].astype("int64"))
    logits, loss = logits_and_loss(p, tokens, targets, layers, heads)
    loss.backward()
    limit = 1e-5
    checks = [("logits", relative_error(torch.tensor(f["logits"][()]), logits.detach().view(-1, vocab)), limit),
              ("loss", abs(float(f.attrs["loss"]) - loss.item()) / abs(loss.item()), limit)]
    checks += [(f"grad {name}", relative_error(torch.tensor(f["grad"][name][()]), p[name].grad), limit)
               for name in sorted(p)]
    # Three AdamW steps on the same batch, decay on matrices only, the gradients clipped first as
    # torch.nn.utils.clip_grad_norm_ clips them: each step's norm before clipping must match, and
    # each parameter's change from its initial value (the change, not the value, which would hide
    # a wrong update).
    initial = {name: t.detach().clone() for name, t in p.items()}
    decay = [t for t in p.values() if t.dim() >= 2]
    no_decay = [t for t in p.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    clip_norm, bound = float(f.attrs["clip_norm"]), 0
    for step in range(3):
        if step > 0:
            opt.zero_grad()
            logits_and_loss(p, tokens, targets, layers, heads)[1].backward()
        norm = torch.nn.utils.clip_grad_norm_(list(p.values()), clip_norm).item()
        bound += norm > clip_norm
        checks.append((f"clip step {step} norm", abs(float(f.attrs[f"grad_norm_{step}"]) - norm) / norm, limit))
        opt.step()
    for name in sorted(p):
        final = p[name].detach()
        ours, theirs = torch.tensor(f["adamw"][name][()]) - initial[name], final - initial[name]
        if name.endswith("attn.c_attn.bias"):
            # The key's bias has no gradient in exact arithmetic (a shift common to all of one
            # query's scores leaves its softmax as it is); Adam scales its rounding noise up to a
            # step of lr either way. Its query and value thirds are compared.
            thirds = lambda t: torch.cat([t[:embd], t[2 * embd:]])  # noqa: E731
            ours, theirs, final = thirds(ours), thirds(theirs), thirds(final)
        checks.append((f"adamw {name}", relative_error(ours, theirs), max(limit, one_float_step(final, theirs))))
    if not bound:
        print(f"the clip norm {clip_norm} bound on none of the three steps: the test would not see a wrong clip")
        return 1
    for name, err, bound in checks:
        note = "" if bound == limit else f" (limit {bound:.1e}: one fp32 step of the values)"
        print(f"{name:32s} relative error {err:.2e}{note}{'' if err <= bound else f'  > {bound:.1e}'}")
    name, err, bound = max(checks, key=lambda c: c[1] / c[2])
    print(f"{len(checks)} checks, worst {err:.2e} against its limit {bound:.1e} ({name}; limit 1e-5, or one fp32 step "
          f"of a parameter's values where larger); loss ours {float(f.attrs['loss']):.8f}, PyTorch {loss.item():.8f}")
    return 0 if all(err <= bound for _, err, bound in checks) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
