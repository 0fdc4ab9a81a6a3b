"""tex.debug: configuration overrides and dumps."""
import tex
from tex import debug
from tex.topi import sum as topi_sum


def test_config_override_is_scoped(capsys):
    assert not debug.should_dump("lower")
    with debug.config(dump="lower,codegen"):
        assert debug.should_dump("lower") and debug.should_dump("codegen")
        assert not debug.should_dump("other")
        debug.dump("lower", "for i in [0, 4): ...")
    assert not debug.should_dump("lower")
    err = capsys.readouterr().err
    assert err == "=== lower ===\nfor i in [0, 4): ...\n"


def test_dump_all_and_dir(tmp_path):
    with debug.config(dump="all", dump_dir=str(tmp_path)):
        debug.dump("anything", tex.var("i") + 1)
    assert (tmp_path / "anything.txt").read_text() == "=== anything ===\ni + 1\n"


def test_internal_error_says_bug():
    err = debug.InternalError("broken invariant", ir="x + 1")
    assert "bug in tex" in str(err) and "x + 1" in str(err)


def test_timings_table_names_every_compile_phase():
    A = tex.placeholder((16,), name="A")
    B = tex.compute((16,), lambda i: A[i] * 2.0, name="B")
    tex.runtime.clear_cache()
    with debug.timings() as t:
        g = tex.differentiate(topi_sum(B), [A])
        tex.build([B, *g], name="timed_build")
    names = [name for name, _, _ in t.rows]
    for phase in ("differentiate", "auto_schedule", "build", "lower", "lower.simplify",
                  "legalize", "llvm.emit", "llvm.opt"):
        assert phase in names, phase
    # codegen runs unless the disk cache already held the kernel
    assert "llvm.codegen" in names or "build.disk_load" in names
    depth = {name: d for name, d, _ in t.rows}
    assert depth["build"] == 0 and depth["lower"] == 1 and depth["lower.simplify"] == 2
    assert all(s >= 0 for _, _, s in t.rows)
    assert t.seconds("build") >= t.seconds("llvm.opt") > 0
    assert t.totals()["lower"] == t.seconds("lower")
    text = t.table()
    assert text.splitlines()[0].startswith("phase") and "\n    lower.simplify " in text


def test_timed_prints_at_debug_1_and_is_silent_otherwise(capsys):
    with debug.timed("quiet"):
        pass
    assert capsys.readouterr().err == ""
    with debug.config(debug=1):
        with debug.timed("outer"):
            with debug.timed("inner"):
                pass
    err = capsys.readouterr().err
    assert err.startswith("tex: compile time\nphase")
    assert "\nouter " in err and "\n  inner " in err


def test_timed_as_decorator_records_each_call():
    @debug.timed("twice")
    def f(x):
        return x + 1

    with debug.timings() as t:
        assert f(1) == 2 and f(2) == 3
    assert [name for name, _, _ in t.rows] == ["twice", "twice"]


def test_table_merges_runs_of_one_phase():
    """Runs of a phase in a row at one depth (a print per emitted function) are one line
    with their count; runs apart, or at another depth, stay lines of their own."""
    t = debug.Timings(rows=[("emit", 0, 1.0), ("print", 1, 0.25), ("print", 1, 0.5),
                            ("print", 1, 0.25), ("fork", 1, 0.125), ("print", 1, 0.5),
                            ("print", 0, 2.0)])
    lines = t.table().splitlines()[1:]
    assert [line.split()[0] for line in lines] == ["emit", "print", "fork", "print", "print"]
    assert lines[1].split() == ["print", "(x3)", "1.000"]
    assert lines[3].split() == ["print", "0.500"] and lines[3].startswith("  print")
    assert lines[4].split() == ["print", "2.000"] and lines[4].startswith("print")
