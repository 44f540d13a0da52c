# gloo from a fresh job's first call, as bench/floors/mpi_cold_calls.c times Open MPI: 4 B
# send/recv round trips between 2 processes (`rtt`) or allreduces of BYTES float32 bytes
# (`allreduce`), timed from the first call after one barrier, the clock read only at the
# given call counts. torch.distributed's gloo always talks TCP (here over loopback), so it
# is the anchor for ranks on one machine and across machines alike.
#
#   /usr/bin/python3 gloo_cold_calls.py rtt 4 1000 3000 10000
#
# Prints {"ms": [the milliseconds from the first call to the end of call COUNT, for each COUNT]}.
import json, socket, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp


def run(rank, port, rtt, elements, counts, q):
    dist.init_process_group('gloo', init_method=f'tcp://127.0.0.1:{port}', rank=rank, world_size=2)
    t = torch.zeros(elements)
    dist.barrier()
    at = []
    started = time.perf_counter()
    call = 0
    for count in counts:
        while call < count:
            call += 1
            if not rtt:
                dist.all_reduce(t)
            elif rank == 0:
                dist.send(t, 1)
                dist.recv(t, 1)
            else:
                dist.recv(t, 0)
                dist.send(t, 0)
        at.append((time.perf_counter() - started) * 1e3)
    dist.barrier()
    if rank == 0:
        q.put(at)
    dist.destroy_process_group()


if __name__ == '__main__':
    if len(sys.argv) < 4:
        sys.exit('usage: gloo_cold_calls.py rtt|allreduce BYTES COUNT...')
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    rtt = sys.argv[1] == 'rtt'
    elements = int(sys.argv[2]) // 4
    counts = sorted(int(c) for c in sys.argv[3:])
    ctx = mp.get_context('spawn')
    q = ctx.Queue()
    ps = [ctx.Process(target=run, args=(r, port, rtt, elements, counts, q)) for r in range(2)]
    for p in ps:
        p.start()
    at = q.get(timeout=600)
    for p in ps:
        p.join()
    print(json.dumps({'ms': at}))
