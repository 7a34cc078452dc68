"""How the suite runs: tests' files in RAM when /dev/shm has room, the slowest files started first, and the system
tests in a run of their own."""

from pathlib import Path

from .conftest import SLOWEST_FIRST, SYSTEM_TESTS, temp_root_for_tests


def test_tmp_path_is_under_the_chosen_test_folder(tmp_path):
    root = temp_root_for_tests()
    if root is None:  # no usable tmpfs, or CITEGATE_TEST_TMP="": the system's temp folder
        return
    assert tmp_path.resolve().is_relative_to(root.resolve())


def test_a_small_or_missing_ram_folder_is_not_used(monkeypatch, tmp_path):
    import tests.conftest as conftest

    monkeypatch.delenv(conftest.TEST_TMP_ENV, raising=False)
    monkeypatch.setattr(conftest, "RAM_FOLDER", tmp_path / "missing")
    assert conftest.temp_root_for_tests() is None
    monkeypatch.setattr(conftest, "RAM_FOLDER", tmp_path)
    monkeypatch.setattr(conftest, "RAM_FOLDER_MIN_FREE", 1 << 60)
    assert conftest.temp_root_for_tests() is None
    monkeypatch.setenv(conftest.TEST_TMP_ENV, str(tmp_path / "chosen"))
    assert conftest.temp_root_for_tests() == tmp_path / "chosen"
    monkeypatch.setenv(conftest.TEST_TMP_ENV, "")
    assert conftest.temp_root_for_tests() is None


def test_the_slowest_files_are_collected_first_and_exist(request):
    here = Path(__file__).parent
    assert [name for name in SLOWEST_FIRST if not (here / name).is_file()] == []
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    ranks = [rank.get(item.path.name, len(rank)) for item in request.session.items]
    assert ranks == sorted(ranks)


def test_make_test_leaves_out_the_system_tests_and_ci_runs_them(request):
    here = Path(__file__).parent
    assert sorted(name for name in SYSTEM_TESTS if not (here / name).is_file()) == []
    marked = {item.path.name for item in request.session.items if item.get_closest_marker("system")}
    assert marked <= SYSTEM_TESTS  # and every collected test of those files carries the marker:
    assert [
        item.nodeid
        for item in request.session.items
        if item.path.name in SYSTEM_TESTS and not item.get_closest_marker("system")
    ] == []
    makefile = (here.parent / "Makefile").read_text()
    test_target = makefile.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    system_target = makefile.split("\ntest-system: ", 1)[1].split("\n\n", 1)[0]
    assert '-m "not system"' in test_target and "-m system" in system_target
    ci = [line for line in (here.parent / ".ci" / "run").read_text().splitlines() if line.startswith("make ")]
    assert ci == ["make test", "make test-system"]
