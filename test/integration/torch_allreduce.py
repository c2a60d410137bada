"""All-reduce over gloo with nothing but the environment spank_train.so exports:
init_process_group(init_method="env://") reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE.
Prints one line per rank; exits non-zero when the sum is wrong or a variable disagrees."""
import datetime
import os
import socket
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["SLURM_PROCID"]), "RANK is not SLURM_PROCID"
assert world == int(os.environ["SLURM_NTASKS"]), "WORLD_SIZE is not SLURM_NTASKS"
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
expected = world * (world + 1) / 2
ok = value.item() == expected
print(f"rank {rank}/{world} local {os.environ['LOCAL_RANK']} host {socket.gethostname()} "
      f"sum {value.item():g} expected {expected:g}: {'ok' if ok else 'WRONG'}", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
