"""A conformance checker for DLPack exchange tables (`__dlpack_c_exchange_api__`).

    python -m dlx check TARGET [--device DEV]... [--json]
    dlx.check.run(TARGET, devices=()) -> Report

TARGET is `module:Type` (`numpy:ndarray`, `torch:Tensor`) or a Python file defining TYPE
and optionally make(shape, dtype) and other hooks (docs/check.md). The table is found the
way dlx's consumer finds it, and every check is a named PASS/FAIL/SKIP line with a reason.

Nothing foreign runs in this process: the checks call the table in child processes of the
same interpreter (`python -m dlx.check --child CONFIG`), every malformed import in a child
of its own, so a table that crashes is a FAIL with the signal, and the checker goes on.
"""
import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

STATUSES = ("PASS", "FAIL", "SKIP")
DEVICE_NAMES = {"cpu": 1, "cuda": 2, "rocm": 10, "npu": 12, "ext_dev": 12, "extdev": 12}
USAGE = """usage: python -m dlx check TARGET [--device DEV]... [--select PREFIX]... [--json]
                           [--timeout S] [--import-timeout S]
  TARGET        module:Type (numpy:ndarray, torch:Tensor) or a Python file defining TYPE
                (and make(shape, dtype) for a framework dlx does not know)
  --device DEV  also check streams on DEV: cpu, cuda:N, rocm:N, npu:N or TYPE:ID (DLPack
                device type numbers); default: the devices the framework reports
  --select PREFIX  run only the checks whose names start with PREFIX (export., streams.)
  --json        print one JSON object instead of lines
  --timeout S   seconds each checker process may run (default 600)
  --import-timeout S  seconds importing TARGET may take (default 120): past it, a FAIL
exit status: 0 nothing failed, 1 a check failed, 2 usage error, or TARGET could not be
imported"""
INT32_MAX = 2**31 - 1  # DLDevice's device_type and device_id are 32-bit
IMPORT_CHECK = "target.import"


class UsageError(ValueError):
    """The target or an option cannot be used (exit status 2)."""


class TargetImportError(UsageError):
    """Importing the target raised (exit status 2, one line: not a mistake in the usage)."""


class Check:
    __slots__ = ("name", "status", "reason")

    def __init__(self, name, status, reason):
        self.name, self.status, self.reason = name, status, reason

    def __repr__(self):
        return f"Check({self.name!r}, {self.status!r}, {self.reason!r})"


class Report:
    """The checks of one target, in order. `report[name]` is one Check."""

    def __init__(self, target, checks):
        self.target = target
        self.checks = list(checks)

    def __getitem__(self, name):
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def __iter__(self):
        return iter(self.checks)

    def status(self):
        """{name: status}."""
        return {c.name: c.status for c in self.checks}

    @property
    def source(self):
        """Where the table was found (the reason of find.table), or None."""
        try:
            c = self["find.table"]
        except KeyError:
            return None
        return c.reason if c.status == "PASS" else None

    @property
    def failed(self):
        return [c for c in self.checks if c.status == "FAIL"]

    @property
    def ok(self):
        return not self.failed

    @property
    def exit_code(self):
        """0 nothing failed, 1 a check failed, 2 the target's import did not finish."""
        if any(c.name == IMPORT_CHECK for c in self.failed):
            return 2
        return 0 if self.ok else 1

    def counts(self):
        return {s: sum(c.status == s for c in self.checks) for s in STATUSES}

    def to_dict(self):
        return {"target": self.target, "table": self.source, "ok": self.ok,
                "counts": self.counts(),
                "checks": [{"name": c.name, "status": c.status, "reason": c.reason}
                           for c in self.checks]}

    def text(self):
        width = max((len(c.name) for c in self.checks), default=10)
        lines = [f"dlx check {self.target}", f"table: {self.source or 'none usable'}"]
        lines += [f"{c.status}  {c.name:<{width}}  {c.reason}" for c in self.checks]
        n = self.counts()
        lines.append(f"{n['PASS']} passed, {n['FAIL']} failed, {n['SKIP']} skipped")
        return "\n".join(lines)

    __str__ = text


# ---- targets and devices ---------------------------------------------------------

def parse_device(text):
    """'cuda:0', 'npu', 'cpu', '2:0', (2, 0) -> (device_type, device_id). A malformed tuple
    is a TypeError; a value DLPack's DLDevice cannot hold a UsageError (a ValueError)."""
    if isinstance(text, (tuple, list)):
        if len(text) != 2 or not all(isinstance(x, int) and not isinstance(x, bool)
                                     for x in text):
            raise TypeError(f"device {text!r}: expected (device_type, device_id), two ints, "
                            "or a str such as 'cuda:0'")
        dev_type, dev_id = text
    elif isinstance(text, str):
        kind, _, index = text.partition(":")
        try:
            dev_type = DEVICE_NAMES[kind.lower()] if not kind.isdigit() else int(kind)
            dev_id = int(index) if index else 0
        except (KeyError, ValueError):
            raise UsageError(f"bad device {text!r}: use cpu, cuda:N, rocm:N, npu:N or "
                             "TYPE:ID") from None
    else:
        raise TypeError(f"device {text!r}: expected a str such as 'cuda:0' or a "
                        f"(device_type, device_id) tuple, not {type(text).__name__}")
    if not 0 < dev_type <= INT32_MAX or not 0 <= dev_id <= INT32_MAX:
        raise UsageError(f"bad device {text!r}: the device type must be in 1..{INT32_MAX} "
                         f"and the id in 0..{INT32_MAX} (DLPack's DLDevice)")
    return (dev_type, dev_id)


def target_spec(target):
    """The string a child process can load `target` from (a type is named by module and
    qualified name, and must be reachable that way)."""
    if isinstance(target, type):
        spec = f"{target.__module__}:{target.__qualname__}"
        try:
            found = resolve(spec)[0]
        except Exception:  # noqa: BLE001
            found = None
        if found is not target:
            raise UsageError(f"{target!r} cannot be found again as {spec}: give the checker "
                             "a module:Type or a file that defines TYPE")
        return spec
    spec = os.fspath(target)
    if _is_file_spec(spec):
        if not os.path.isfile(spec):
            raise UsageError(f"no such file: {spec}")
        return os.path.abspath(spec)
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise UsageError(f"target {spec!r}: expected module:Type or a path to a .py file")
    # Only the top-level name: finding "pkg.mod" would import pkg in this process, where
    # nothing foreign runs (a package that hangs or raises is the child's, under a timeout).
    top = module.partition(".")[0]
    try:
        found = importlib.util.find_spec(top) if top else None
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise UsageError(f"target {spec!r}: no module named {top or module!r}")
    return spec


def _is_file_spec(spec):
    return spec.endswith(".py") or os.sep in spec.split(":")[0]


def resolve(spec):
    """(type, module-of-hooks or None) for a target spec."""
    if _is_file_spec(spec):
        name = "_dlx_check_target"
        loader = importlib.util.spec_from_file_location(name, spec)
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        sys.path.insert(0, os.path.dirname(spec))
        loader.loader.exec_module(module)
        type_ = getattr(module, "TYPE", None)
        if not isinstance(type_, type):
            raise UsageError(f"{spec} defines no TYPE (the tensor type to check)")
        return type_, module
    module_name, _, qual = spec.partition(":")
    obj = importlib.import_module(module_name)
    for part in qual.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise UsageError(f"target {spec!r}: {module_name} has no {qual}")
    if not isinstance(obj, type):
        raise UsageError(f"target {spec!r} is a {type(obj).__name__}, not a type")
    return obj, None


# ---- the parent: children, crashes, the report ------------------------------------

def _child_env():
    # the folder dlx is in (this file is dlx/check/__init__.py)
    paths = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
    paths += [p or os.getcwd() for p in sys.path]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("PYTHONFAULTHANDLER", "1")  # a crash leaves its stack on stderr
    return env


def _describe_exit(rc, stderr):
    if rc is None:
        how = "hung (killed after the timeout)"
    elif rc < 0:
        try:
            how = f"crashed the process with {signal.Signals(-rc).name}"
        except ValueError:
            how = f"killed the process with signal {-rc}"
    else:
        how = f"ended the process with exit status {rc}"
    tail = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    tail = [ln for ln in tail if not ln.startswith(("File ", "Current thread", "Thread 0x",
                                                    "Extension modules"))]
    return how + (f" ({tail[0][:200]})" if tail else "")


class _Child:
    """One child process running checks; its results arrive as JSON lines in a file."""

    def __init__(self, config, timeout):
        fd, self.path = tempfile.mkstemp(prefix="dlx-check-", suffix=".jsonl")
        os.close(fd)
        self.err = tempfile.TemporaryFile("w+", errors="replace")
        self.deadline = time.monotonic() + timeout
        self.p = subprocess.Popen(
            [sys.executable, "-m", "dlx.check", "--child", json.dumps(dict(config, results=self.path))],
            env=_child_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.err)

    def events(self):
        with open(self.path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]

    def wait_for(self, key, seconds=None):
        """Until an event with `key` arrived (True) or the child ended or `seconds` (else
        its whole time) passed (False)."""
        deadline = self.deadline if seconds is None else min(self.deadline,
                                                              time.monotonic() + seconds)
        while time.monotonic() < deadline:
            if any(key in e for e in self.events()):
                return True
            if self.p.poll() is not None:
                return any(key in e for e in self.events())
            time.sleep(0.02)
        return False

    def finish(self):
        """(events, exit status or None when it hung, stderr)."""
        try:
            rc = self.p.wait(timeout=max(self.deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            rc = None
        events = self.events()
        os.unlink(self.path)
        self.err.seek(0)
        stderr = self.err.read()
        self.err.close()
        return events, rc, stderr


def _collect(events, results, order):
    """Fold a child's events into results; returns (name begun but not finished, usage)."""
    current, usage = None, None
    for ev in events:
        if "usage" in ev:
            usage = ev["usage"]
        elif "names" in ev:
            order[:] = ev["names"]
        elif "begin" in ev:
            current = ev["begin"]
        elif "name" in ev:
            results[ev["name"]] = Check(ev["name"], ev["status"], ev["reason"])
            current = None
    return current, usage


def _seconds(value, what):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number of seconds, got {value!r}") from None
    if not 0 < v < float("inf"):
        raise UsageError(f"{what} must be a positive number of seconds, got {value!r}")
    return v


def run(target, devices=(), timeout=600, select=None, import_timeout=120):
    """Check the exchange table of `target` (module:Type, a file, or an importable type).
    `devices`: also check streams there ('cuda:0', (2, 0)); `select`: name prefixes of the
    checks to run (the find./header. checks always run); `timeout`: seconds each checker
    process may run; `import_timeout`: seconds importing the target may take (past it, the
    report is the one FAIL `target.import`, exit code 2). Returns a Report; raises
    UsageError when the target or a device cannot be used (TargetImportError when importing
    the target raised), TypeError for a device that is neither a str nor two ints."""
    from . import _cases as cases

    timeout = _seconds(timeout, "timeout")
    import_timeout = min(_seconds(import_timeout, "import_timeout"), timeout)
    if devices is None:
        devices = ()
    if isinstance(devices, str) or (isinstance(devices, tuple) and devices
                                    and isinstance(devices[0], int)):
        devices = (devices,)  # one device: 'cuda:0' or (2, 0)
    try:
        devices = list(devices)
    except TypeError:
        raise TypeError(f"devices must be a list of devices ('cuda:0', (2, 0)), not "
                        f"{type(devices).__name__}") from None
    spec = target_spec(target)
    devs = [parse_device(d) for d in devices]
    select = list(select) if select is not None else None
    base = {"target": spec, "devices": devs, "select": select}
    preamble = [n for n, _ in cases.PREAMBLE]
    malformed = [f"import.malformed.{c}" for c in cases.MALFORMED
                 if select is None or f"import.malformed.{c}".startswith(tuple(select))]
    results, order, isolated, done = {}, [], [], set(malformed)
    config = dict(base, skip=sorted(done))
    for attempt in range(64):  # the main child, restarted past each check that crashed it
        child = _Child(config, timeout)
        if (attempt == 0 and not child.wait_for("imported", import_timeout)
                and child.p.poll() is None):
            child.p.kill()
            child.finish()
            return Report(spec, [Check(IMPORT_CHECK, "FAIL",
                                       f"importing {spec} did not finish within "
                                       f"{import_timeout:g} s (the process was killed; "
                                       "--import-timeout sets the limit)")])
        if not isolated and malformed and child.wait_for("names"):
            # The table was found and read: each malformed import gets a child of its own.
            isolated = [(n, _Child(dict(base, only=[n], quiet=preamble), timeout))
                        for n in malformed]
        events, rc, stderr = child.finish()
        current, usage = _collect(events, results, order)
        if usage:
            for _, c in isolated:
                c.finish()
            raise (TargetImportError if usage.startswith("cannot load target") else UsageError)(usage)
        done |= set(results)
        if rc == 0:
            break
        if current is None:
            results["checker.child"] = Check(
                "checker.child", "FAIL",
                "the checker's child " + _describe_exit(rc, stderr) + " outside any check")
            break
        results[current] = Check(current, "FAIL", _describe_exit(rc, stderr))
        done.add(current)
        if current in preamble:
            break  # nothing can run past a table that cannot even be read
        config = dict(base, skip=sorted(done), quiet=[n for n in preamble if n in done])
    isolated = [(n, c.finish()) for n, c in isolated]
    for name, (events, rc, stderr) in isolated:
        current, usage = _collect(events, results, [])
        if usage:
            raise UsageError(usage)
        if name not in results and "find.table" in results:
            results[name] = Check(name, "FAIL", _describe_exit(rc, stderr))
    names = preamble + [n for n in order if n not in preamble]
    names += [n for n in results if n not in names]
    checks = [results[n] for n in names if n in results]
    if order:  # whatever a crash in the preamble kept from running
        checks += [Check(n, "SKIP", "not run: the checker's child stopped before it")
                   for n in names if n not in results]
    return Report(spec, checks)


# ---- the child ------------------------------------------------------------------

def _child(config):
    from . import _cases as cases
    from . import _frameworks as fw

    out = open(config["results"], "a", buffering=1)

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    try:
        type_, module = resolve(config["target"])
    except UsageError as e:
        emit({"usage": str(e)})
        return 0
    except BaseException as e:  # noqa: BLE001 - importing the target failed (SystemExit too)
        first = str(e).strip().splitlines()[:1]
        emit({"usage": f"cannot load target {config['target']}: {type(e).__name__}"
                       + (f": {first[0]}" if first else "")})
        return 0
    emit({"imported": True})
    devices = [tuple(d) for d in config.get("devices", ())]
    adapter = fw.for_type(type_, module, devices)
    ctx = cases.Context(type_, adapter, module)
    skip, quiet, only = set(config.get("skip", ())), set(config.get("quiet", ())), config.get("only")
    select = tuple(config.get("select") or ())

    def do(name, fn):
        if name in quiet:
            cases.run_one(ctx, fn)
        elif select and not name.startswith(select) and name not in preamble:
            pass
        elif name not in skip and (only is None or name in only):
            emit({"begin": name})
            start = time.monotonic()
            status, reason = cases.run_one(ctx, fn)
            emit({"name": name, "status": status, "reason": reason,
                  "seconds": round(time.monotonic() - start, 3)})

    preamble = {name for name, _ in cases.PREAMBLE}
    for name, fn in cases.PREAMBLE:
        do(name, fn)
    if ctx.api is not None and type(adapter) is fw.Framework:
        adapter.make = _import_maker(ctx)
    cases.prepare_variants(ctx)
    listed = cases.checks(ctx)
    emit({"names": [n for n, _ in listed if not select or n.startswith(select)]})
    for name, fn in listed:
        do(name, fn)
    return 0


def _import_maker(ctx):
    """make(shape, dtype) for a type the checker knows nothing about: checker-owned memory
    imported through the table under test."""
    from . import _cases as cases
    from . import _frameworks as fw

    def make(shape, dtype):
        if not ctx.api.managed_tensor_to_py_object_no_sync:
            raise NotImplementedError("no import function to make tensors with")
        p = cases.Producer(dtype=fw.DTYPES[dtype], shape=tuple(shape))
        return cases._import(ctx.api, p.pointer())

    return make


# ---- command line ---------------------------------------------------------------

def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"] and len(argv) == 2:
        return _child(json.loads(argv[1]))
    target, devices, select, as_json = None, [], None, False
    times = {}
    it = iter(argv)
    try:
        for arg in it:
            if arg == "--json":
                as_json = True
            elif arg in ("--timeout", "--import-timeout"):
                times[arg[2:].replace("-", "_")] = next(it)
            elif arg.startswith(("--timeout=", "--import-timeout=")):
                key, value = arg[2:].split("=", 1)
                times[key.replace("-", "_")] = value
            elif arg == "--device":
                devices.append(next(it))
            elif arg.startswith("--device="):
                devices.append(arg.split("=", 1)[1])
            elif arg == "--select":
                select = (select or []) + [next(it)]
            elif arg in ("-h", "--help"):
                print(USAGE)
                return 0
            elif arg.startswith("-") or target is not None:
                raise UsageError(f"unexpected argument {arg!r}")
            else:
                target = arg
        if target is None:
            raise UsageError("no TARGET given")
        report = run(target, devices, select=select, **times)
    except StopIteration:
        print(f"python -m dlx check: error: {arg} needs a value\n{USAGE}", file=sys.stderr)
        return 2
    except TargetImportError as e:
        print(f"python -m dlx check: error: {e}", file=sys.stderr)
        return 2
    except UsageError as e:
        print(f"python -m dlx check: error: {e}\n{USAGE}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=1) if as_json else report.text())
    return report.exit_code
