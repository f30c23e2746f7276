"""Kernels across processes (issue 24): pickle size and unpickle time of a library and a
kernel; a Dask map_blocks over 64 chunks with a ~5 ms kernel on 1 and 2 worker processes,
next to the same map in this one process on 1 and 2 threads (goal: 2 workers >= 1.7x 1 worker
on 2 cores; the 2 threads show what the machine's 2 cores give this kernel at that moment, the
ceiling for 2 workers). The input is persisted on the workers first; the map leaves its
results there (the same line also times it with them gathered here). Dask's own cost: the
same map of `block + 0`, and of a sleep as long as the kernel (tasks that use no CPU: the CPU
its processes use then is Dask's). dlx's own part of a task is timed inside a worker: the
task's function with a kernel of 0 rounds.

    PYTHONPATH=build-venv/fixtures .venv/bin/python bench/bench_processes.py

unpickle, new process: the first pickle.loads in a fresh interpreter whose cache holds the
library (load_inline: the warm cache check and load; a file: its sha256, then the load).
unpickle, again: later loads of the same pickle in that process (a lookup and a stat).
Without Dask's distributed installed, the Dask rows say so."""
import argparse
import itertools
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

WORK = r"""
#include <dlx/dlx.h>
/* work(x, out, rounds): out = x, then `rounds` times out = out * 0.999 + x (float32). nogil:
 * a task of milliseconds lets the worker's event loop run meanwhile (Dask's advice). */
DLX_KERNEL(work, "x: f32[n] contig, out: f32[n] mut contig, rounds: int; nogil") {
  DLTensor *x, *out;
  int64_t rounds;
  if (dlx_arg_tensor(call, 0, &x) || dlx_arg_tensor(call, 1, &out) ||
      dlx_arg_int(call, 2, &rounds))
    return -1;
  int64_t n = 1;
  for (int i = 0; i < x->ndim; ++i) n *= x->shape[i];
  const float *xs = (const float *)((const char *)x->data + x->byte_offset);
  float *os = (float *)((char *)out->data + out->byte_offset);
  for (int64_t i = 0; i < n; ++i) os[i] = xs[i];
  for (int64_t r = 0; r < rounds; ++r)
    for (int64_t i = 0; i < n; ++i) os[i] = os[i] * 0.999f + xs[i];
  return 0;
}
"""

CHILD = """
import pickle, sys, time
import dlx  # imported before timing: the row is the unpickle, not the import
data = open(sys.argv[1], 'rb').read()
t0 = time.perf_counter()
obj = pickle.loads(data)
t1 = time.perf_counter()
for _ in range(1000):
    pickle.loads(data)
t2 = time.perf_counter()
print(t1 - t0, (t2 - t1) / 1000)
"""


def _median_call(block, kernel, rounds):
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        work_block(block, kernel, rounds)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def work_block(block, kernel, rounds):
    out = np.empty_like(block)
    kernel(np.ascontiguousarray(block), out, rounds)
    return out


def unpickle_rows(folder, named):
    for what, obj in named:
        data = pickle.dumps(obj)
        path = os.path.join(folder, "obj.pickle")
        with open(path, "wb") as f:
            f.write(data)
        runs = [subprocess.run([sys.executable, "-c", CHILD, path], check=True,
                               capture_output=True, text=True).stdout.split()
                for _ in range(5)]
        first = statistics.median(float(r[0]) for r in runs)
        again = statistics.median(float(r[1]) for r in runs)
        print(f"  {what:<34} {len(data):>5} bytes; unpickle, new process {first * 1e3:7.3f} ms;"
              f" again {again * 1e6:6.2f} us")


def plus_zero(block):
    """The same map with no kernel: what Dask itself costs per map."""
    return block + 0


def sleep_block(block, seconds):
    """The same map with a sleep as long as the kernel: Dask's own cost at this task length,
    with tasks that use no CPU."""
    time.sleep(seconds)
    return np.empty_like(block)


def dask_rows(lib, x, chunks, rounds, turns, kernel_s):
    try:
        import dask.array as da
        import distributed
    except ImportError:
        print("  Dask map_blocks: skipped: dask / distributed not installed here")
        return
    local = np.concatenate([work_block(b, lib.work, rounds) for b in np.split(x, 64)])
    kw = dict(threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
              silence_logs=40)
    # Both clusters at once, timed in turns (this process's 1 and 2 threads, 1 worker, 2
    # workers): the machine's speed drifts more slowly than a turn, so each turn's ratio is a
    # fair one.
    # the second cluster's workers find the first one's dashboard port taken: not a finding
    warnings.filterwarnings("ignore", message="Port .* is already in use")
    with distributed.LocalCluster(n_workers=1, **kw) as c1, distributed.Client(c1) as one, \
            distributed.LocalCluster(n_workers=2, **kw) as c2, distributed.Client(c2) as two:
        arrs = {}
        for name, client in (("1", one), ("2", two)):
            # the input lives on the workers, as a Dask job's data loaded there would: the
            # rows time the map, not shipping the input each time
            arr = client.persist(da.from_array(x, chunks=chunks))
            distributed.wait(arr)
            y = _fresh(arr, work_block, lib.work, rounds)
            np.testing.assert_array_equal(client.compute(y).result(), local)  # warm: loaded
            client.compute(_fresh(arr, plus_zero)).result()
            arrs[name] = (client, arr)
        dlx_part = one.submit(_task_cost, x[:chunks], lib.work).result()
        took = {k: [] for k in ("local", "local2", "1", "2", "gather1", "gather2", "bare1",
                                "bare2", "sleep1", "sleep2")}
        pids = {name: list(client.run(os.getpid).values()) for name, (client, _) in arrs.items()}
        cpu = {"1": [], "2": []}  # CPU seconds per sleep map: this process and the workers
        for _ in range(turns):
            took["local"].append(_in_threads(1, x, lib.work, rounds))
            took["local2"].append(_in_threads(2, x, lib.work, rounds))
            for name, (client, arr) in arrs.items():
                took[name].append(_persisted(client, _fresh(arr, work_block, lib.work, rounds),
                                             distributed))
                took["bare" + name].append(_persisted(client, _fresh(arr, plus_zero),
                                                      distributed))
                c0 = _cpu_seconds(pids[name])
                took["sleep" + name].append(_persisted(client, _fresh(arr, sleep_block, kernel_s),
                                                       distributed))
                cpu[name].append(_cpu_seconds(pids[name]) - c0)
                y = _fresh(arr, work_block, lib.work, rounds)
                t0 = time.perf_counter()
                client.compute(y).result()
                took["gather" + name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in took.items()}

    def ratio(slow, fast):
        return statistics.median(a / b for a, b in zip(took[slow], took[fast]))

    print(f"  the map in this process (no Dask): {med['local'] * 1e3:.0f} ms; on 2 threads "
          f"{med['local2'] * 1e3:.0f} ms: {ratio('local', 'local2'):.2f}x, what this machine's 2 "
          f"cores give this kernel now (the ceiling for 2 workers)")
    for w in ("1", "2"):
        print(f"  Dask, {w} worker process(es): the map {med[w] * 1e3:.0f} ms "
              f"({64 / med[w]:.0f} chunks/s); with its result gathered here "
              f"{med['gather' + w] * 1e3:.0f} ms")
        print(f"      Dask's own cost: the map of `block + 0` {med['bare' + w] * 1e3:.0f} ms; of a "
              f"{kernel_s * 1e3:.1f} ms sleep {med['sleep' + w] * 1e3:.0f} ms, using "
              f"{statistics.median(cpu[w]) / 64 * 1e3:.1f} ms of CPU a task (client, scheduler, "
              f"workers)")
    print(f"  dlx's part of a task, timed in a worker: {dlx_part * 1e6:.1f} us (the task's "
          f"function with a kernel of 0 rounds: its output array, the call, a 64 KiB copy)")
    share = statistics.median((a / b) / (c / d) for a, b, c, d in
                              zip(took["1"], took["2"], took["local"], took["local2"]))
    print(f"  2 workers / 1 worker: the map {ratio('1', '2'):.2f}x (goal >= 1.7x on 2 cores), "
          f"{share:.0%} of the ceiling; with the result gathered "
          f"{ratio('gather1', 'gather2'):.2f}x; the map of the sleep "
          f"{ratio('sleep1', 'sleep2'):.2f}x (medians of {turns} turns)")


def _cpu_seconds(worker_pids):
    """CPU seconds so far of this process (the client and the schedulers' thread) and the
    workers (Linux /proc; their nanny processes, which poll memory, are not counted)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = time.process_time()
    for pid in worker_pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _task_cost(block, kernel):
    """Median seconds of work_block with 0 rounds, run where it is called (a worker)."""
    for _ in range(1000):
        work_block(block, kernel, 0)
    times = []
    for _ in range(21):
        t0 = time.perf_counter()
        for _ in range(100):
            work_block(block, kernel, 0)
        times.append((time.perf_counter() - t0) / 100)
    return statistics.median(times)


def _in_threads(n, x, kernel, rounds):
    """Seconds for the 64 chunks on n threads of this process, no Dask: the kernel is nogil,
    so 2 threads show what the 2 cores give it at this moment (on a shared VM, 1.1-2.2x)."""
    parts = np.array_split(np.arange(64), n)
    blocks = np.split(x, 64)
    errors = []

    def run(part):
        try:
            for i in part:
                work_block(blocks[i], kernel, rounds)
        except BaseException as e:  # noqa: BLE001 - raised in the caller below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(p,)) for p in parts]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return took


_maps = itertools.count()


def _fresh(arr, fn, *args):
    """The map under keys never used before: a map of the same keys could find the last
    timing's results still on the workers (their release is asynchronous)."""
    return arr.map_blocks(fn, *args, dtype=np.float32, name=f"{fn.__name__}-{next(_maps)}")


def _persisted(client, arr, distributed):
    """Seconds for the map with its results left on the workers (as the next step of a Dask
    pipeline would find them); they are let go with `done` on return."""
    t0 = time.perf_counter()
    done = client.persist(arr)
    distributed.wait(done)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dlx-bench-proc-") as cache:
        os.environ["DLX_CACHE_DIR"] = cache
        import dlx

        lib = dlx.load_inline(WORK, name="work")
        build = os.environ.get("DLX_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..",
                                                             "build"))
        so = os.path.join(build, "kernels", "test_kernels.so")
        named = [("load_inline library", lib), ("load_inline kernel", lib.work)]
        if os.path.exists(so):
            files = dlx.load(so)
            named += [("file library (test_kernels.so)", files),
                      ("file kernel", files.echo_int)]
        print(f"pickling ({sys.executable}; load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores):")
        unpickle_rows(cache, named)
        # ~5 ms per chunk: rounds calibrated on this machine
        chunk = 1 << 14
        x = np.random.default_rng(0).standard_normal(64 * chunk).astype(np.float32)
        block = x[:chunk]
        rounds = 16
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:  # warm up: an idle core runs slower a while
            work_block(block, lib.work, rounds)
        for _ in range(8):  # scale the rounds until one chunk takes ~5 ms (median of 5)
            took = _median_call(block, lib.work, rounds)
            if 0.0045 <= took <= 0.0055:
                break
            rounds = max(1, int(rounds * 0.005 / max(took, 1e-6)))
        else:  # not within 10% in 8 tries: the time of the rounds finally chosen
            took = _median_call(block, lib.work, rounds)
        print(f"Dask map_blocks, 64 chunks of {chunk} float32, kernel {took * 1e3:.1f} ms "
              f"per chunk ({rounds} rounds):")
        dask_rows(lib, x, chunk, rounds, args.turns, took)


if __name__ == "__main__":
    main()
