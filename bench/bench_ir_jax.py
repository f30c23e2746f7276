"""make bench-ir, under jax.jit (the venv): instructions of one XLA FFI handler call under
callgrind, inclusive (the no-op kernel it runs included): dlx's generic handler on 3 and on 7
buffers (the difference / 4 is its cost per buffer), the hand-written C++
XLA_FFI_DEFINE_HANDLER floor on 3, and jax-tvm-ffi's generic handler on 3.

    python bench/bench_ir_jax.py            (runs itself under valgrind --tool=callgrind)

Each jitted function is called CALLS times (its first call compiles, then runs); a handler's
Ir divided by CALLS is per call (the registration's metadata query adds a few Ir once)."""
import os
import re
import subprocess
import sys
import tempfile

CALLS = 300
HANDLERS = {  # row -> callgrind function name (demangled)
    "dlx, 3 buffers": "dlx_xla_handler_cpu",
    "floor (C++ XLA_FFI_DEFINE_HANDLER), 3 buffers": "dlx_bench_floor",
    "jax-tvm-ffi, 3 buffers": "XLA_FFI_Error* jax_tvm_ffi::JAXTVMFFIRegistry::Trampoline<0>(XLA_FFI_CallFrame*)",
}

NOOP7 = r"""
DLX_KERNEL(noop7, "a: f32[n], b: f32[n], c: f32[n], d: f32[n], e: f32[n], f: f32[n] -> f32[n]") {
  DLTensor *a, *out;
  return dlx_arg_tensor(call, 0, &a) ||
         dlx_return_new_tensor(call, a->device, 1, a->shape, a->dtype, &out);
}
"""


def child(folder, which):
    import jax
    import jax.numpy as jnp

    from dlx import bench_jax

    bench_jax.NOOP3 += NOOP7
    found, (x, y) = bench_jax.rows(folder)
    import dlx

    lib = dlx.load(os.path.join(folder, "noop3.so"))
    fns = {"dlx, 3 buffers": found[0][1], "floor (C++ XLA_FFI_DEFINE_HANDLER), 3 buffers": found[1][1]}
    if found[2][1] is not None:
        fns["jax-tvm-ffi, 3 buffers"] = found[2][1]
    fns["dlx, 7 buffers"] = jax.jit(lambda a: lib.noop7(a, a, a, a, a, a))
    fns = {n: f for n, f in fns.items() if (n == "dlx, 7 buffers") == (which == "7")}
    for name, f in fns.items():
        args = (x,) if name == "dlx, 7 buffers" else (x, y)
        for _ in range(CALLS):
            r = f(*args)
        jax.block_until_ready(r)
    print("rows:" + ",".join(fns))


def inclusive(dump, fn):
    """Inclusive Ir of function `fn` in a callgrind dump (callgrind_annotate --inclusive)."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(.*?\)\s+\S*:(.*?)(\s+\[.*\])?$", line)
        if m and m.group(2).strip() == fn:
            return int(m.group(1).replace(",", ""))
    return None


def main():
    if "--child" in sys.argv:
        at = sys.argv.index("--child")
        child(sys.argv[at + 1], sys.argv[at + 2])
        return 0
    try:
        import jax  # noqa: F401
    except ImportError:
        print("jax.jit handler Ir: JAX is not importable by this interpreter (the venv has it)")
        return 0
    ir = {}
    with tempfile.TemporaryDirectory() as tmp:
        for which in ("3", "7"):  # one run each: both rows run the same handler function
            dump = os.path.join(tmp, f"cg.{which}")
            toggles = [f"--toggle-collect={f}" for f in HANDLERS.values()]
            r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={dump}",
                                *toggles, sys.executable, os.path.abspath(__file__), "--child",
                                tmp, which], capture_output=True, text=True)
            if r.returncode != 0:
                print("jax.jit handler Ir: the callgrind run failed\n" + r.stderr[-2000:])
                return 1
            rows = r.stdout.strip().split("rows:")[-1].split(",")
            for name in rows:
                fn = HANDLERS["dlx, 3 buffers" if name == "dlx, 7 buffers" else name]
                total = inclusive(dump, fn)
                ir[name] = total / CALLS if total else float("nan")
    print(f"jax.jit: Ir per XLA FFI handler call, inclusive of the no-op kernel ({CALLS} calls "
          "each, callgrind)")
    for name, v in ir.items():
        print(f"  {name:48s} {v:8.0f}")
    if "dlx, 7 buffers" in ir:
        print(f"  dlx handler per buffer: {(ir['dlx, 7 buffers'] - ir['dlx, 3 buffers']) / 4:.0f} Ir"
              " ((7 buffers - 3 buffers) / 4)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
