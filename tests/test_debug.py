"""tex.debug: configuration overrides and dumps."""
import tex
from tex import debug


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
