"""PyTorch's NCCL process group on the GPU machine (tests/gpu/run.sh runs it).

  torch_check.py versions
                        python, torch, the CUDA torch was built for, whether a GPU answers, the NCCL
                        torch loads (NVIDIA's, from the nccl wheel, unless tutti is preloaded) and the
                        nvidia-nccl wheel's version; then "torch_cuda=1" or "torch_cuda=0". Never
                        fails for want of torch or a GPU (it says so instead).
  torch_check.py bench  one rank: all-reduce (float32 sum, in place) of 4 KiB to 128 MiB, timed with
                        CUDA events: one line per size, "allreduce BYTES bytes US us algbw GB/s"
                        (busbw is 0 at one rank); then the values checked. run.sh runs it twice, with
                        tutti's libnccl.so.2 preloaded and without (NVIDIA's NCCL), and compares.
  torch_check.py tutti  run with tutti's libnccl.so.2 preloaded: the all-reduce of a CUDA tensor
                        gives the right values.
  torch_check.py dump   NVIDIA's NCCL (the one PyTorch ships): run an all-reduce so that NCCL
                        writes its topology of this machine to NCCL_TOPO_DUMP_FILE.
  torch_check.py collectives N [SECONDS]
                        N rank processes sharing GPU 0 (under CUDA MPS; tutti preloaded by the
                        caller): all_reduce (sum, max, min, avg), all_gather, reduce_scatter,
                        broadcast, all_to_all_single and send/recv of CUDA tensors of several
                        dtypes, each against the values computed on the CPU in float64; the ranks
                        that have not finished after SECONDS (default 20) are ended.
Exit status 0 when the expectation holds. Which library served the calls is for the caller to
prove: tutti's log (NCCL_DEBUG=WARN or INFO) says "NCCL version X+tutti-Y".
"""
import os
import socket
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_one_rank():
    import torch
    import torch.distributed as dist
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))


def all_reduce_once():
    import torch
    import torch.distributed as dist
    init_one_rank()
    try:
        t = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        expected = torch.arange(1 << 20, dtype=torch.float64)
        return bool(torch.equal(t.cpu().double(), expected))
    finally:
        dist.destroy_process_group()


def versions():
    import platform
    print("python", platform.python_version(), sys.executable)
    try:
        import torch
    except Exception as error:  # an absent or broken torch is a finding, not a failure here
        print("torch: not importable:", type(error).__name__, str(error)[:200])
        print("torch_cuda=0")
        return 0
    available = torch.cuda.is_available()
    print("torch", torch.__version__, "built for CUDA", torch.version.cuda, "| GPU available:", available)
    try:
        print("NCCL torch loads:", ".".join(str(v) for v in torch.cuda.nccl.version()))
    except Exception as error:
        print("NCCL torch loads: unknown:", type(error).__name__, str(error)[:200])
    try:
        from importlib import metadata
        wheels = sorted({(d.metadata["Name"], d.version) for d in metadata.distributions()
                         if (d.metadata["Name"] or "").lower().startswith("nvidia-nccl")})
        print("nvidia-nccl wheel:", ", ".join(f"{n} {v}" for n, v in wheels) if wheels else "none installed")
    except Exception as error:
        print("nvidia-nccl wheel: unknown:", type(error).__name__, str(error)[:200])
    try:
        import nvidia.nccl
        for base in list(getattr(nvidia.nccl, "__path__", [])):
            library = os.path.join(base, "lib", "libnccl.so.2")
            if os.path.exists(library):
                print("NCCL wheel library:", library)
    except Exception:
        pass
    if available:
        print("GPU seen by torch:", torch.cuda.get_device_name(0), "| devices:", torch.cuda.device_count())
    print(f"torch_cuda={int(available)}")
    return 0


def bench():
    import torch
    import torch.distributed as dist
    print("torch", torch.__version__, "cuda", torch.version.cuda, "device", torch.cuda.get_device_name(0))
    print("NCCL version seen by torch:", torch.cuda.nccl.version(), flush=True)
    init_one_rank()
    right = True
    try:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for size in [4 << 10, 64 << 10, 1 << 20, 16 << 20, 128 << 20]:
            t = torch.ones(size // 4, dtype=torch.float32, device="cuda")
            for _ in range(5):
                dist.all_reduce(t)
            iterations = 20
            torch.cuda.synchronize()
            start.record()
            for _ in range(iterations):
                dist.all_reduce(t)
            end.record()
            torch.cuda.synchronize()
            us = start.elapsed_time(end) * 1000 / iterations
            print(f"allreduce {size} bytes {us:.1f} us algbw {size / us / 1e3:.2f} GB/s", flush=True)
            right = right and bool(torch.all(t == 1).item())  # one rank: a sum of itself
        t = torch.arange(1 << 20, dtype=torch.float32, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        right = right and bool(torch.equal(t.cpu().double(), torch.arange(1 << 20, dtype=torch.float64)))
    except Exception as error:  # torch raises DistBackendError with NCCL's last error text
        print("raised", type(error).__name__ + ":", str(error)[:2000])
        right = False
    finally:
        dist.destroy_process_group()
    print("all-reduce values correct:", right)
    return 0 if right else 1


def dtypes():
    import torch
    return [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8]


def inputs(rank, count, dtype):
    """Small integers, exact in every dtype and in their sums for a few ranks."""
    import torch
    values = (torch.arange(count, dtype=torch.float64) * 7 + rank * 3) % 11
    return values.to(dtype)


def close(got, expected, dtype):
    import torch
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 0)
    return bool(torch.allclose(got.cpu().double(), expected, rtol=tolerance, atol=tolerance))


def rank_main(rank, world, port, failures):
    import torch
    import torch.distributed as dist
    os.environ["TUTTI_ALLOW_SHARED_GPU"] = "1"
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", 0))
    wrong = []
    count = 1000 * world + 3 * world
    everyone = [inputs(r, count, torch.float64) for r in range(world)]
    try:
        for dtype in dtypes():
            name = str(dtype).replace("torch.", "")
            ops = [("sum", dist.ReduceOp.SUM, lambda xs: sum(xs)),
                   ("max", dist.ReduceOp.MAX, lambda xs: torch.stack(xs).max(0).values),
                   ("min", dist.ReduceOp.MIN, lambda xs: torch.stack(xs).min(0).values)]
            if dtype.is_floating_point:
                ops.append(("avg", dist.ReduceOp.AVG, lambda xs: sum(xs) / len(xs)))
            for op_name, op, reference in ops:
                t = inputs(rank, count, dtype).cuda()
                dist.all_reduce(t, op=op)
                expected = reference([x.to(dtype).double() for x in everyone])
                if not close(t, expected, dtype):
                    wrong.append(f"all_reduce {op_name} {name}")
            mine = inputs(rank, count, dtype).cuda()
            gathered = torch.empty(count * world, dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(gathered, mine)
            if not close(gathered, torch.cat([x.to(dtype).double() for x in everyone]), dtype):
                wrong.append(f"all_gather {name}")
            part = torch.empty(count // world, dtype=dtype, device="cuda")
            dist.reduce_scatter_tensor(part, inputs(rank, count, dtype).cuda())
            total = sum(x.to(dtype).double() for x in everyone)
            if not close(part, total.chunk(world)[rank], dtype):
                wrong.append(f"reduce_scatter {name}")
            b = inputs(rank, count, dtype).cuda()
            dist.broadcast(b, src=world - 1)
            if not close(b, everyone[world - 1].to(dtype).double(), dtype):
                wrong.append(f"broadcast {name}")
            out = torch.empty(count, dtype=dtype, device="cuda")
            dist.all_to_all_single(out, inputs(rank, count, dtype).cuda())
            expected = torch.cat([x.to(dtype).double().chunk(world)[rank] for x in everyone])
            if not close(out, expected, dtype):
                wrong.append(f"all_to_all_single {name}")
            # A ring of send/recv: each rank sends its input to the next.
            received = torch.empty(count, dtype=dtype, device="cuda")
            requests = dist.batch_isend_irecv([dist.P2POp(dist.isend, inputs(rank, count, dtype).cuda(), (rank + 1) % world),
                                               dist.P2POp(dist.irecv, received, (rank - 1) % world)])
            for r in requests:
                r.wait()
            if not close(received, everyone[(rank - 1) % world].to(dtype).double(), dtype):
                wrong.append(f"send/recv {name}")
        torch.cuda.synchronize()
    except Exception as error:  # torch raises DistBackendError with NCCL's last error text
        wrong.append("raised " + type(error).__name__ + ": " + str(error)[:1000])
    finally:
        dist.destroy_process_group()
    print(f"rank {rank}/{world}: {'all correct' if not wrong else 'WRONG: ' + ', '.join(wrong)}", flush=True)
    if wrong:
        failures.put(rank)


def collectives(world, seconds):
    import torch.multiprocessing as mp
    context = mp.get_context("spawn")
    failures = context.Queue()
    port = free_port()
    processes = [context.Process(target=rank_main, args=(r, world, port, failures)) for r in range(world)]
    deadline = time.monotonic() + seconds
    for p in processes:
        p.start()
    for p in processes:
        p.join(max(0.0, deadline - time.monotonic()))
    late = [r for r, p in enumerate(processes) if p.is_alive()]
    for p in processes:
        if p.is_alive():
            p.kill()
            p.join(2)
    ok = not late and all(p.exitcode == 0 for p in processes) and failures.empty()
    print(f"world {world}: {'passed' if ok else 'FAILED'} (exit codes {[p.exitcode for p in processes]})"
          + (f"; ranks {late} had not finished after {seconds:g} s and were ended" if late else ""))
    return 0 if ok else 1


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "versions":
        return versions()
    if mode == "bench":
        return bench()
    if mode == "collectives":
        return collectives(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 20.0)
    if mode not in ("dump", "tutti"):
        print(__doc__)
        return 2
    import torch
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
