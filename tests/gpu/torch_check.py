"""PyTorch's NCCL process group on the GPU machine, one rank.

  torch_check.py dump   NVIDIA's NCCL (the one PyTorch ships): run an all-reduce so that NCCL
                        writes its topology of this machine to NCCL_TOPO_DUMP_FILE.
  torch_check.py tutti  run with tutti's libnccl.so.2 preloaded: the all-reduce of a CUDA tensor
                        runs through tutti's cuda backend and gives the right values.
Exit status 0 when the expectation holds.
"""
import os
import socket
import sys

import torch
import torch.distributed as dist


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def all_reduce_once():
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    try:
        t = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        expected = torch.arange(1 << 20, dtype=torch.float64)
        return bool(torch.equal(t.cpu().double(), expected))
    finally:
        dist.destroy_process_group()


def main():
    mode = sys.argv[1]
    print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
    print("NCCL version seen by torch:", torch.cuda.nccl.version())
    if mode == "dump":
        ok = all_reduce_once()
        path = os.environ.get("NCCL_TOPO_DUMP_FILE", "")
        print("all-reduce correct:", ok, "| topology dump:", path, os.path.getsize(path) if os.path.exists(path) else "missing")
        return 0 if ok and os.path.exists(path) else 1
    try:
        ok = all_reduce_once()
    except Exception as error:  # torch raises DistBackendError with NCCL's last error text
        print("raised", type(error).__name__ + ":", str(error)[:2000])
        return 1
    print("all-reduce through tutti correct:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
