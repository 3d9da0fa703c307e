"""PyTorch's NCCL process group on the GPU machine, one rank.

  torch_check.py dump   NVIDIA's NCCL (the one PyTorch ships): run an all-reduce so that NCCL
                        writes its topology of this machine to NCCL_TOPO_DUMP_FILE.
  torch_check.py tutti  run with tutti's libnccl.so.2 preloaded: the all-reduce of a CUDA tensor
                        runs through tutti's cuda backend and gives the right values.
  torch_check.py collectives N
                        N rank processes sharing GPU 0 (under CUDA MPS; tutti preloaded by the
                        caller): all_reduce (sum, max, min, avg), all_gather, reduce_scatter,
                        broadcast, all_to_all_single and send/recv of CUDA tensors of several
                        dtypes, each against the values computed on the CPU in float64.
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


DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8]


def inputs(rank, count, dtype):
    """Small integers, exact in every dtype and in their sums for a few ranks."""
    values = (torch.arange(count, dtype=torch.float64) * 7 + rank * 3) % 11
    return values.to(dtype)


def close(got, expected, dtype):
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 0)
    return bool(torch.allclose(got.cpu().double(), expected, rtol=tolerance, atol=tolerance))


def rank_main(rank, world, port, failures):
    os.environ["TUTTI_ALLOW_SHARED_GPU"] = "1"
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", 0))
    wrong = []
    count = 1000 * world + 3 * world
    everyone = [inputs(r, count, torch.float64) for r in range(world)]
    try:
        for dtype in DTYPES:
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


def collectives(world):
    import torch.multiprocessing as mp
    context = mp.get_context("spawn")
    failures = context.Queue()
    port = free_port()
    processes = [context.Process(target=rank_main, args=(r, world, port, failures)) for r in range(world)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(600)
    ok = all(p.exitcode == 0 for p in processes) and failures.empty()
    print(f"world {world}: {'passed' if ok else 'FAILED'} (exit codes {[p.exitcode for p in processes]})")
    return 0 if ok else 1


def main():
    mode = sys.argv[1]
    if mode == "collectives":
        return collectives(int(sys.argv[2]))
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
