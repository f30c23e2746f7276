"""make bench-ir, under jax.jit (the venv): instructions of one XLA FFI handler call under
callgrind, inclusive (the no-op kernel it runs included): dlx's generic handler on 3 and on 7
buffers (the difference / 4 is its cost per buffer), the hand-written C++
XLA_FFI_DEFINE_HANDLER floor on 3, and jax-tvm-ffi's generic handler on 3.

    python bench/bench_ir_jax.py            (runs itself under valgrind --tool=callgrind)

The child imports JAX and compiles every jitted function with instrumentation off (fast),
then turns it on (callgrind_control -i on) and calls each function CALLS times, dumping the
counters after the 3-buffer rows and after the 7-buffer row; a handler's inclusive Ir in a
dump divided by CALLS is per call."""
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
    "dlx, 7 buffers": "dlx_xla_handler_cpu",
}

NOOP7 = r"""
DLX_KERNEL(noop7, "a: f32[n], b: f32[n], c: f32[n], d: f32[n], e: f32[n], f: f32[n] -> f32[n]") {
  DLTensor *a, *out;
  return dlx_arg_tensor(call, 0, &a) ||
         dlx_return_new_tensor(call, a->device, 1, a->shape, a->dtype, &out);
}
"""


def control(*args):
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True,
                   capture_output=True)


def child(folder):
    import jax

    import dlx
    from dlx.bench import jax as bench_jax

    bench_jax.NOOP3 += NOOP7
    found, (x, y) = bench_jax.rows(folder)
    lib = dlx.load(os.path.join(folder, "noop3.so"))
    three = {n: f for n, f in zip(HANDLERS, (found[0][1], found[1][1], found[2][1])) if f}
    seven = jax.jit(lambda a: lib.noop7(a, a, a, a, a, a))
    for f in three.values():  # compile and warm, uninstrumented
        jax.block_until_ready(f(x, y))
    jax.block_until_ready(seven(x))
    control("-i", "on")
    for f in three.values():
        for _ in range(CALLS):
            r = f(x, y)
        jax.block_until_ready(r)
    control("-d", "three")
    for _ in range(CALLS):
        r = seven(x)
    jax.block_until_ready(r)
    control("-d", "seven")
    print("rows:" + "|".join(list(three) + ["dlx, 7 buffers"]))


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
        child(sys.argv[sys.argv.index("--child") + 1])
        return 0
    try:
        import jax  # noqa: F401
    except ImportError:
        print("jax.jit handler Ir: JAX is not importable by this interpreter (the venv has it)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg")
        toggles = [f"--toggle-collect={f}" for f in set(HANDLERS.values())]
        r = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                            f"--callgrind-out-file={out}", *toggles, sys.executable,
                            os.path.abspath(__file__), "--child", tmp],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("jax.jit handler Ir: the callgrind run failed\n" + r.stderr[-2000:])
            return 1
        rows = r.stdout.strip().split("rows:")[-1].split("|")
        ir = {}
        for name in rows:
            dump = out + (".2" if name == "dlx, 7 buffers" else ".1")
            total = inclusive(dump, HANDLERS[name])
            ir[name] = total / CALLS if total else float("nan")
    print(f"jax.jit: Ir per XLA FFI handler call, inclusive of the no-op kernel ({CALLS} calls "
          "each, callgrind)")
    for name, v in ir.items():
        print(f"  {name:48s} {v:8.0f}")
    if "dlx, 7 buffers" in ir:
        print(f"  dlx handler per buffer: {(ir['dlx, 7 buffers'] - ir['dlx, 3 buffers']) / 4:.0f}"
              " Ir ((7 buffers - 3 buffers) / 4)")
    # issue 22's goals, printed as bench_ir.py prints its budgets (reported, not enforced:
    # the floor goal is not met yet and bench-ir's exit status is for the call path's budgets)
    dlx3 = ir.get("dlx, 3 buffers", float("nan"))
    floor = ir.get("floor (C++ XLA_FFI_DEFINE_HANDLER), 3 buffers", float("nan"))
    tvm = ir.get("jax-tvm-ffi, 3 buffers", float("nan"))
    print("budgets (issue 22, 3 buffers):")
    print(f"  dlx <= 1.1x the floor: {dlx3:.0f} vs {1.1 * floor:.0f} "
          f"({dlx3 / floor:.2f}x): {'met' if dlx3 <= 1.1 * floor else 'not met'}")
    print(f"  dlx < jax-tvm-ffi: {dlx3:.0f} vs {tvm:.0f}: {'met' if dlx3 < tvm else 'not met'}")
    # issue 33's goal (reported likewise; docs/design.md, "Cost", says where the rest goes)
    print(f"  dlx <= 1.5x the floor (issue 33): {dlx3:.0f} vs {1.5 * floor:.0f}: "
          f"{'met' if dlx3 <= 1.5 * floor else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
