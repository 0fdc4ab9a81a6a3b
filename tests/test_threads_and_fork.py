"""Process-level safety of parallel kernels: TEX_NUM_THREADS is validated and clamped, and a
child forked after the parent ran a parallel loop computes correct results (serially)
instead of hanging in libgomp. Each case runs in a fresh interpreter under a timeout, so a
regression fails instead of hanging the suite."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 90


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with this checkout's tex; kill its whole process group on timeout."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("TEX_NUM_THREADS", "OMP_NUM_THREADS")}
    environ.update(env, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                            env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"timed out after {TIMEOUT} s (hang):\n{code}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


PARALLEL_KERNEL = """
    import os, numpy as np, tex
    A = tex.placeholder((64, 32), "float32", name="A")
    B = tex.compute((64, 32), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = tex.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    f = tex.build(s, [A, B])
    assert "GOMP_parallel" in f.get_source("ll")
    a = np.arange(64 * 32, dtype="float32").reshape(64, 32)
"""


BAD_THREADS = ["abc", "0", "-3", "", "2.5"]


def test_bad_tex_num_threads_is_a_clear_error_at_import() -> None:
    """Each bad value makes the import of tex.debug (and so of tex) raise, naming it."""
    r = _run(f"""
    import importlib, os
    import tex.debug
    for value in {BAD_THREADS!r}:
        os.environ["TEX_NUM_THREADS"] = value
        try:
            importlib.reload(tex.debug)
        except ValueError as e:
            print(e)
        else:
            print("accepted", repr(value))
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(BAD_THREADS)
    for value, line in zip(BAD_THREADS, lines):
        assert line.startswith(f"TEX_NUM_THREADS={value!r} is not a positive integer"), line
    r = _run("import tex", TEX_NUM_THREADS="abc")
    assert r.returncode != 0 and "ValueError: TEX_NUM_THREADS='abc'" in r.stderr, r.stderr


def test_huge_tex_num_threads_is_clamped_and_computes() -> None:
    """100000 used to segfault and 40000 made libgomp exit the process."""
    r = _run(PARALLEL_KERNEL + """
    import tex.debug
    assert tex.debug.current().num_threads == tex.debug.max_threads(), tex.debug.current()
    b = np.zeros_like(a); f(a, b)
    assert (b == a * 2 + 1).all()
    print("ok")
    """, TEX_NUM_THREADS="100000")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert "using" in r.stderr and "the most tex allows" in r.stderr  # the clamp warns


def test_huge_omp_num_threads_is_clamped_too() -> None:
    """Without TEX_NUM_THREADS the OpenMP default applies: OMP_NUM_THREADS=100000 made
    libgomp segfault in the first parallel loop."""
    r = _run(PARALLEL_KERNEL + """
    import tex.debug
    assert tex.debug.current().num_threads == tex.debug.max_threads(), tex.debug.current()
    b = np.zeros_like(a); f(a, b)
    assert (b == a * 2 + 1).all()
    print("ok")
    """, OMP_NUM_THREADS="100000")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_config_num_threads_is_clamped() -> None:
    import tex

    with pytest.warns(RuntimeWarning, match="the most tex allows"):
        with tex.debug.config(num_threads=10**6) as c:
            assert c.num_threads == tex.debug.max_threads()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
@pytest.mark.parametrize("threads", ["2", None])
def test_forked_child_after_a_parallel_kernel_computes_correctly(threads: str | None) -> None:
    """The parent runs a parallel kernel (libgomp's pool starts), forks; the child runs the
    same function and a new build, and must get the right numbers without hanging."""
    r = _run(PARALLEL_KERNEL + """
    b = np.zeros_like(a); f(a, b); assert (b == a * 2 + 1).all()
    pid = os.fork()
    if pid == 0:
        ok = True
        for k in range(3):
            c = np.zeros_like(a); f(a + k, c); ok &= bool((c == (a + k) * 2 + 1).all())
        C = tex.compute((64, 32), lambda i, j: A[i, j] - 1.0, name="C")
        s2 = tex.create_schedule(C.op); s2[C].parallel(C.op.axis[0])
        g = tex.build(s2, [A, C]); d = np.zeros_like(a); g(a, d)
        ok &= bool((d == a - 1).all())
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    b = np.zeros_like(a); f(a, b); assert (b == a * 2 + 1).all()  # the parent is unaffected
    print("ok")
    """, **({"TEX_NUM_THREADS": threads} if threads else {}))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_forked_child_runs_functions_found_by_their_schedules_key() -> None:
    """A second build of a schedule is not lowered (the front cache); the serial variant a
    forked child needs is then lowered from the schedule, which must be unchanged: a
    schedule changed since its build raises, naming the function."""
    r = _run(PARALLEL_KERNEL + """
    from tex.debug import timings
    with timings() as tm:
        f2 = tex.build(s, [A, B])
        s3 = tex.create_schedule(B.op); s3[B].parallel(B.op.axis[0])
        f3 = tex.build(s3, [A, B], name="changed")
        f4 = tex.build(s3, [A, B], name="changed")
    assert tm.seconds("lower") > 0 and sum(n == "lower" for n, _, _ in tm.rows) == 1
    s3[B].split(B.op.axis[1], factor=8)  # after the build
    b = np.zeros_like(a); f2(a, b); assert (b == a * 2 + 1).all()
    pid = os.fork()
    if pid == 0:
        c = np.zeros_like(a); f2(a, c); ok = bool((c == a * 2 + 1).all())
        try:
            f4(a, c)
            ok = False
        except RuntimeError as e:
            ok &= "changed: its schedule was changed after it was built" in str(e)
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    print("ok")
    """, TEX_NUM_THREADS="2")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_child_forked_before_any_parallel_run_keeps_parallel_loops() -> None:
    r = _run(PARALLEL_KERNEL + """
    from tex.runtime import openmp
    pid = os.fork()
    if pid == 0:
        b = np.zeros_like(a); f(a, b)
        os._exit(0 if openmp.parallel_allowed() and (b == a * 2 + 1).all() else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    print("ok")
    """, TEX_NUM_THREADS="2")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


WAIT_REPORT = """
    import os, sys
    {before}
    import tex
    from tex.runtime import openmp
    assert openmp.load_openmp() is not None
    print("policy", openmp.wait_policy(), os.environ.get("GOMP_SPINCOUNT"), flush=True)
"""


def test_libgomp_waits_briefly_unless_the_environment_says_otherwise() -> None:
    """libgomp reports (OMP_DISPLAY_ENV=verbose, at its initialization) the spin count it
    took: tex's DEFAULT_SPINCOUNT when the environment sets neither GOMP_SPINCOUNT nor
    OMP_WAIT_POLICY, and the environment left as it was; an explicit OMP_WAIT_POLICY is
    libgomp's to apply (passive: 0 spins); a libgomp another library loaded before tex keeps
    what it was given then. The three cases run at once, each in a fresh interpreter."""
    from tex.runtime.openmp import DEFAULT_SPINCOUNT

    preload = ("import ctypes; os.environ['GOMP_SPINCOUNT'] = '5'; "
               "ctypes.CDLL('libgomp.so.1'); del os.environ['GOMP_SPINCOUNT']")
    cases = {"default": ("", {}, "tex", str(DEFAULT_SPINCOUNT)),
             "user": ("", {"OMP_WAIT_POLICY": "passive"}, "environment", "0"),
             "preloaded": (preload, {}, "preloaded", "5")}
    procs = {}
    for name, (before, env, _, _) in cases.items():
        environ = {k: v for k, v in os.environ.items()
                   if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "TEX_NUM_THREADS")}
        environ.update(env, OMP_DISPLAY_ENV="verbose", PYTHONPATH=str(ROOT))
        code = textwrap.dedent(WAIT_REPORT).replace("{before}", before)
        procs[name] = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=environ,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, (name, err)
        _, _, policy, spins = cases[name]
        assert f"policy {policy} None" in out, (name, out)  # the environment is unchanged
        assert f"GOMP_SPINCOUNT = '{spins}'" in err, (name, err)
