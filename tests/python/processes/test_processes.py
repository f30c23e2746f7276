"""Kernels beyond one process (issue 24): multiprocessing (spawn, forkserver, fork, and
fork while other threads are inside dlx), ProcessPoolExecutor, torch.multiprocessing.spawn,
torch.distributed (4 ranks, gloo, loopback; a registered operator inside 2 DDP ranks'
training steps), and the shared cache under many processes (8 first loads at once compile
once; a builder killed mid-build blocks nobody). Every process a test starts is ended by it;
every wait is bounded. Dask: test_dask.py."""
import concurrent.futures
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from conftest import BUILD, PYPATH

import dlx
import proc_tasks

WAIT = 180  # seconds: the bound on any one wait below (a hang fails, it does not stall CI)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("DLX_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(autouse=True)
def child_env(monkeypatch):
    """Spawned and forkserver children import dlx and proc_tasks as this process does."""
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here, PYPATH]))


def wrapper(tmp_path, before="", name="cc-wrap"):
    """A C compiler that logs each run to <tmp>/<name>.log and runs `before` (shell) when
    compiling (-c) before it execs cc."""
    log = tmp_path / f"{name}.log"
    w = tmp_path / name
    w.write_text("#!/bin/sh\n"
                 f'echo "$*" >> "{log}"\n'
                 f'case " $* " in *" -c "*) {before} ;; esac\n'
                 'exec cc "$@"\n')
    w.chmod(0o755)
    return w, log


def compiles(log):
    return sum(1 for line in log.read_text().splitlines() if " -c " in f" {line} ") \
        if log.exists() else 0


def wait_for(path, proc=None):
    deadline = time.monotonic() + WAIT
    while not os.path.exists(path):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process ended ({proc.returncode}) before {path} appeared:\n"
                                 f"{proc.stdout.read() if proc.stdout else ''}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def kill_group_of(pid_file):
    """End a compiler wrapper and what it started (its own process group, dlx_compile.c)."""
    try:
        pid = int(open(pid_file).read().split()[0])
        os.killpg(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


def python(code, env=None, **kw):
    full = dict(os.environ, DLX_BUILD_DIR=str(BUILD))
    full.update(env or {})
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def finish(proc):
    try:
        out, _ = proc.communicate(timeout=WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"hung:\n{out}")
    return proc.returncode, out


def data(n=4096, seed=0):
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def expected(x, a=1.0):
    return x * x + np.float32(a)


# ---- multiprocessing, ProcessPoolExecutor --------------------------------------------

@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_multiprocessing_pool_runs_kernels_sent_as_tasks(method, cache):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    inline = dlx.load_inline(proc_tasks.POLY, name="poly")
    lib = dlx.load(BUILD / "kernels" / "test_kernels.so")
    chunks = [data(1000, seed) for seed in range(6)]
    with multiprocessing.get_context(method).Pool(2) as pool:
        got = pool.starmap_async(proc_tasks.apply, [(inline.poly, c, 0.5) for c in chunks])
        ints = pool.starmap_async(proc_tasks.call, [(lib.echo_int, i) for i in range(4)])
        libs = pool.starmap_async(proc_tasks.call, [(getattr, inline, "kernels")])
        got, ints, libs = got.get(WAIT), ints.get(WAIT), libs.get(WAIT)
    for c, g in zip(chunks, got):
        np.testing.assert_array_equal(g, expected(c, 0.5))
    assert ints == [0, 1, 2, 3] and libs == [("poly",)]


def test_process_pool_executor(cache):
    inline = dlx.load_inline(proc_tasks.POLY, name="poly")
    x = data()
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
        results = list(ex.map(proc_tasks.apply, [inline.poly] * 4, np.split(x, 4), [2.0] * 4,
                              timeout=WAIT))
        pids = {f.result(WAIT)[0] for f in [ex.submit(proc_tasks.pid_and_call, inline.poly,
                                                          x, np.empty_like(x), 0.0)
                                                for _ in range(4)]}
    np.testing.assert_array_equal(np.concatenate(results), expected(x, 2.0))
    assert os.getpid() not in pids


# ---- fork while other threads are inside dlx -------------------------------------------

def _fork_child_load(q):
    try:
        lib = dlx.load_inline(proc_tasks.POLY, name="poly")
        q.put(proc_tasks.apply(lib.poly, np.arange(4, dtype=np.float32)).tolist())
    except BaseException as e:  # reported, not hung
        q.put(repr(e))


def test_fork_while_a_thread_builds(tmp_path, cache, monkeypatch):
    """A thread holds the build lock (its compiler runs) when the main thread forks: the
    children wait for that build, which the parent finishes, then load it."""
    import threading

    marker = tmp_path / "compiling"
    cc, log = wrapper(tmp_path, before=f'touch "{marker}"; sleep 2')
    monkeypatch.setenv("CC", str(cc))
    built = []
    t = threading.Thread(target=lambda: built.append(dlx.load_inline(proc_tasks.POLY,
                                                                      name="poly")))
    t.start()
    wait_for(marker)
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_fork_child_load, args=(q,)) for _ in range(2)]
    for p in procs:
        p.start()
    try:
        results = [q.get(timeout=WAIT) for _ in procs]
    finally:
        for p in procs:
            p.join(WAIT)
            if p.is_alive():
                p.kill()
                p.join()
        t.join(WAIT)
    assert results == [[1.0, 2.0, 5.0, 10.0]] * 2
    assert built and compiles(log) == 1  # the parent's thread built it; the children loaded it


TORCH_FORK = r"""
import multiprocessing as mp, os, sys, threading, time
import torch, dlx, dlx.torch
marker = sys.argv[1]
def builder():
    try:
        dlx.torch.install(prefer="addon")
    except Exception as e:
        print("parent thread:", type(e).__name__, flush=True)
t = threading.Thread(target=builder)
t.start()
while not os.path.exists(marker):  # the addon's compiler runs: install() holds its lock
    time.sleep(0.01)
def child(q):
    try:
        dlx.torch.install(prefer="addon")
        q.put("installed")
    except Exception as e:
        q.put("raised " + type(e).__name__)
ctx = mp.get_context("fork")
q = ctx.Queue()
p = ctx.Process(target=child, args=(q,))
p.start()
p.join(120)
hung = p.is_alive()
if hung:
    p.kill()
    p.join()
t.join()
print("child:", "hung" if hung else q.get(timeout=10), flush=True)
"""


def test_fork_while_a_thread_installs_the_torch_addon(tmp_path, cache):
    pytest.importorskip("torch", reason="torch is not installed in this interpreter")
    marker = tmp_path / "compiling"
    cxx = tmp_path / "cxx-slow"
    # the addon's compiler: says it runs, takes a while, fails (nothing else is needed)
    cxx.write_text(f'#!/bin/sh\ntouch "{marker}"\necho $$ >> "{tmp_path}/pids"\nsleep 2\nexit 1\n')
    cxx.chmod(0o755)
    script = tmp_path / "torch_fork.py"
    script.write_text(TORCH_FORK)
    proc = subprocess.Popen([sys.executable, str(script), str(marker)],
                            env=dict(os.environ, CXX=str(cxx), DLX_BUILD_DIR=str(BUILD)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rc, out = finish(proc)
    assert rc == 0, out
    # the child was not stuck on the lock its parent's thread held when it forked
    assert "child: raised" in out or "child: installed" in out, out


HOLDER = r"""
import os, sys, threading, time
import dlx, proc_tasks
ready = sys.argv[1]
threading.Thread(target=lambda: dlx.load_inline(proc_tasks.POLY, name="poly"), daemon=True).start()
while not os.path.exists(ready):  # the compiler runs: this process holds the build lock
    time.sleep(0.01)
pid = os.fork()  # multiprocessing's "fork" does this; the child lives on
if pid == 0:
    time.sleep(600)
    os._exit(0)
with open(ready + ".tmp", "w") as f:
    f.write(str(pid))
os.rename(ready + ".tmp", ready + ".child")  # whole or not at all
time.sleep(600)
"""

NEXT = r"""
import dlx, proc_tasks, numpy as np
lib = dlx.load_inline(proc_tasks.POLY, name="poly", verbose=True)
print("result", proc_tasks.apply(lib.poly, np.arange(3, dtype=np.float32)).tolist())
"""


@pytest.mark.parametrize("fork_first", [False, True], ids=["killed", "forked-then-killed"])
def test_builder_killed_mid_build_blocks_nobody(tmp_path, cache, fork_first):
    """A builder SIGKILLed while its compiler runs leaves a lock that dies with it (also when
    it forked a child first, which never knew it held one) and a temp file that fools no
    one: the next process builds at once, without waiting for anybody."""
    marker, pids = tmp_path / "compiling", tmp_path / "pids"
    cc, log = wrapper(tmp_path, before=f'echo $$ >> "{pids}"; touch "{marker}"; sleep 600')
    script = HOLDER if fork_first else HOLDER.replace("pid = os.fork()", "pid = 0 and os.fork()"
                                                      ).replace("if pid == 0:", "if False:")
    holder = python(script.replace("sys.argv[1]", repr(str(marker))), env={"CC": str(cc)})
    try:
        wait_for(marker, holder)
        if fork_first:
            wait_for(f"{marker}.child", holder)
        holder.send_signal(signal.SIGKILL)
        holder.wait(WAIT)
        nxt = python(NEXT, env={"DLX_BUILD_TIMEOUT": str(WAIT)})
        rc, out = finish(nxt)
    finally:
        holder.kill()
        holder.wait()
        kill_group_of(pids)
        if fork_first and os.path.exists(f"{marker}.child"):  # the holder's child, too
            try:
                os.kill(int(open(f"{marker}.child").read()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert rc == 0, out
    assert "result [1.0, 2.0, 5.0]" in out
    assert "waiting for another build" not in out, out  # the lock was free at once


# ---- the shared cache: many first loads at once ----------------------------------------

FIRST_LOAD = r"""
import os, sys, time
go = sys.argv[1]
import dlx, proc_tasks, numpy as np
while not os.path.exists(go):
    time.sleep(0.005)
lib = dlx.load_inline(proc_tasks.POLY, name="poly")
print("result", proc_tasks.apply(lib.poly, np.arange(3, dtype=np.float32)).tolist(), flush=True)
"""


def test_eight_processes_first_load_compile_once(tmp_path, cache):
    cc, log = wrapper(tmp_path)
    go = tmp_path / "go"
    procs = [python(FIRST_LOAD.replace("sys.argv[1]", repr(str(go))), env={"CC": str(cc)})
             for _ in range(8)]
    try:
        time.sleep(0.5)  # let them start; the go file releases them together
        go.touch()
        outs = [finish(p) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert all(rc == 0 and "result [1.0, 2.0, 5.0]" in out for rc, out in outs), outs
    assert compiles(log) == 1


# ---- torch.multiprocessing.spawn and torch.distributed ---------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torch_spawn(fn, args, nprocs):
    import torch.multiprocessing as tmp

    ctx = tmp.spawn(fn, args=args, nprocs=nprocs, join=False)
    deadline = time.monotonic() + WAIT
    try:
        while not ctx.join(timeout=1):
            assert time.monotonic() < deadline, "torch.multiprocessing.spawn workers hung"
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
            p.join()


# The session's cache (conftest), not a fresh one: torch tensors reaching a kernel need the
# torch addon (torch < 2.10), which the session builds once.
def test_torch_multiprocessing_spawn(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed in this interpreter")
    inline = dlx.load_inline(proc_tasks.POLY, name="poly")
    x = data(4000)
    run_torch_spawn(proc_tasks.torch_spawn_worker, (inline.poly, x, str(tmp_path)), 2)
    got = np.concatenate([np.load(tmp_path / f"rank{r}.npy") for r in range(2)])
    np.testing.assert_array_equal(got, expected(x, 3.0))


def test_torch_distributed_four_ranks_all_reduce(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch", reason="torch is not installed in this interpreter")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    inline = dlx.load_inline(proc_tasks.POLY, name="poly")
    x = data(4 * 1000)
    run_torch_spawn(proc_tasks.torch_distributed_worker,
                    (inline.poly, x, 4, free_port(), str(tmp_path)), 4)
    got = np.load(tmp_path / "all_reduced.npy")
    single = proc_tasks.apply(inline.poly, x)  # the same kernel, one process
    np.testing.assert_array_equal(got, single)
    assert float(got.sum()) == pytest.approx(float(torch.from_numpy(single).sum()), rel=1e-5)


def test_registered_op_inside_ddp_training_steps(tmp_path, monkeypatch):
    """2 gloo ranks train a DistributedDataParallel module whose forward calls a dlx kernel
    registered with dlx.torch.register (its backward another dlx kernel, register_autograd):
    the parameters equal one process's training on the whole batch."""
    torch = pytest.importorskip("torch", reason="torch is not installed in this interpreter")
    import torch.distributed as dist

    import dlx.torch

    version = tuple(int("".join(c for c in p if c.isdigit()) or 0)
                    for p in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 5):
        pytest.skip(f"dlx.torch.register needs torch 2.5 or newer, this is {torch.__version__}")
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("this torch has no gloo backend")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    lib = dlx.load_inline(proc_tasks.SQUARE, name="ddp_square")
    dlx.torch.ensure_addon(dlx.torch.backend())  # built once here, not by every rank at once
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 6))
    y = rng.standard_normal((16, 1))
    run_torch_spawn(proc_tasks.ddp_worker, (lib, x, y, 2, free_port(), str(tmp_path)), 2)
    run_torch_spawn(proc_tasks.single_worker, (lib, x, y, str(tmp_path)), 1)
    ddp, single = np.load(tmp_path / "ddp.npz"), np.load(tmp_path / "single.npz")
    torch_only = np.load(tmp_path / "torch_only.npz")
    assert str(ddp["implementation"]) == "addon"  # the C++ boxed kernel ran in the ranks
    initial = proc_tasks.square_params(proc_tasks.square_model())
    assert set(single.files) == set(initial) == set(ddp.files) - {"implementation"}
    for name in initial:
        assert not np.allclose(single[name], initial[name]), f"{name} did not train"
        np.testing.assert_allclose(ddp[name], single[name], rtol=1e-10, atol=1e-12,
                                   err_msg=name)
        # and the operator's forward and backward train as torch's own x * x does
        np.testing.assert_allclose(single[name], torch_only[name], rtol=1e-10, atol=1e-12,
                                   err_msg=name)
