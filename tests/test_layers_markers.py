"""The layers of the tests: every collected test has exactly one layer marker, the table that
gives them names only what exists, and the unit layer's guard fails a test that starts a process
or connects beyond the loopback (pytester runs a tiny suite with the same plugin)."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from layer_marks import LAYER_KEY, LAYERS, NEEDS, LayerError, layer_of

TESTS = Path(__file__).resolve().parent


def test_every_collected_test_has_exactly_one_layer_marker(request: pytest.FixtureRequest) -> None:
    assigned = request.config.stash[LAYER_KEY]
    functions = [item for item in request.session.items if isinstance(item, pytest.Function)]
    assert request.node in functions
    for item in functions:
        marks = [mark.name for mark in item.iter_markers() if mark.name in LAYERS]
        assert marks == [assigned[item.nodeid]], item.nodeid


def test_the_layers_are_the_registered_markers_and_markers_are_strict(
    pytestconfig: pytest.Config,
) -> None:
    registered = {line.partition(":")[0] for line in pytestconfig.getini("markers")}
    assert set(LAYERS) <= registered
    assert pytestconfig.getini("strict_markers") is True


@cache
def _defined(path: Path) -> set[str]:
    """The names of the functions (tests and fixtures) a test module defines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_entry_of_the_table_names_what_exists() -> None:
    """A renamed module, test or fixture would leave an entry behind that gives nothing."""
    for key, layer in NEEDS.items():
        assert layer in LAYERS[1:], key
        file, _, name = key.partition("::")
        assert (TESTS / file).is_file(), key
        assert not name or name in _defined(TESTS / file), key


@given(needs=st.lists(st.sampled_from(LAYERS)))
def test_with_no_marker_the_layer_is_the_highest_need_or_unit(needs: list[str]) -> None:
    layer = layer_of([], needs)
    assert all(LAYERS.index(need) <= LAYERS.index(layer) for need in needs)
    assert layer in needs or (layer == "unit" and not needs)


def test_a_written_marker_stands_unless_it_is_below_a_need_or_two_disagree() -> None:
    assert layer_of(["browser"], ["integration"]) == "browser"
    assert layer_of(["integration"], ["integration"]) == "integration"
    with pytest.raises(LayerError, match="marked unit but it uses what needs container"):
        layer_of(["unit"], ["integration", "container"])
    with pytest.raises(LayerError, match="two layer markers"):
        layer_of(["unit", "integration"], [])


SUITE = """
import socket
import subprocess
import threading
import time

import pytest


def test_starts_a_process():
    subprocess.run(["true"], check=True)


def test_starts_one_and_hides_the_refusal():
    try:
        subprocess.run(["true"], check=True)
    except BaseException:
        pass


def test_connects_to_another_process_s_unix_socket(tmp_path):
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(tmp_path / "docker.sock"))


@pytest.fixture
def started():
    return subprocess.run(["true"], check=True)


def test_gets_a_process_from_a_fixture(started):
    pass


def test_talks_to_an_in_process_listener():
    with socket.create_server(("127.0.0.1", 0)) as server:
        socket.create_connection(server.getsockname()).close()


GO = threading.Event()
DONE = []


def later():
    GO.wait(10)
    DONE.append(subprocess.run(["true"], check=True).returncode)


@pytest.mark.integration
def test_starts_a_process_in_its_layer():
    subprocess.run(["true"], check=True)
    threading.Thread(target=later, daemon=True).start()


def test_lets_a_thread_of_another_layer_start_its_process():
    GO.set()
    for _ in range(1000):
        if DONE:
            break
        time.sleep(0.01)
    assert DONE == [0]
"""


@pytest.fixture
def suite(pytester: pytest.Pytester, pytestconfig: pytest.Config) -> pytest.Pytester:
    """A directory with the plugin, the project's layer markers (strict) and SUITE."""
    markers = [line for line in pytestconfig.getini("markers") if line.split(":")[0] in LAYERS]
    pytester.makeini(
        "[pytest]\naddopts = --strict-markers\nmarkers =\n    " + "\n    ".join(markers)
    )
    pytester.makeconftest('pytest_plugins = ["layer_marks"]')
    pytester.makepyfile(test_suite=SUITE)
    return pytester


# It starts processes itself (the suite's integration test), so it cannot be of the unit layer:
# there, the guard of this very test would refuse the suite's processes whatever the suite's did.
@pytest.mark.integration
def test_the_unit_guard_fails_a_unit_test_that_starts_a_process_or_connects_out(
    suite: pytest.Pytester,
) -> None:
    result = suite.runpytest_inprocess("-p", "no:cacheprovider", "-n", "0", "-rA")
    result.assert_outcomes(passed=3, failed=3, errors=1)
    lines = result.stdout.lines
    for name, what in [
        ("test_starts_a_process", "started a process (Popen._execute_child)"),
        ("test_starts_one_and_hides_the_refusal", "started a process (Popen._execute_child)"),
        ("test_connects_to_another_process_s_unix_socket", "connected to '"),
        ("test_gets_a_process_from_a_fixture", "started a process (Popen._execute_child)"),
    ]:
        said = f"test_suite.py::{name} is in the unit layer but {what}"
        assert any(said in line for line in lines), (name, lines)
    assert any(line.startswith("PASSED test_suite.py::test_talks_to") for line in lines)
    assert "PASSED test_suite.py::test_starts_a_process_in_its_layer" in lines
    assert "PASSED test_suite.py::test_lets_a_thread_of_another_layer_start_its_process" in lines


def test_a_test_marked_below_what_it_uses_stops_the_collection(suite: pytest.Pytester) -> None:
    """The layer a fixture of NEEDS gives wins over a written marker only by stopping the run."""
    suite.makeconftest(
        'import pytest\npytest_plugins = ["layer_marks"]\n\n\n'
        "@pytest.fixture\ndef plain():\n    return None\n"
    )
    suite.makepyfile(
        test_marked="import pytest\n\n\n@pytest.mark.unit\ndef test_x(plain):\n    pass\n"
    )
    result = suite.runpytest_inprocess("-p", "no:cacheprovider", "-n", "0", "test_marked.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_marked.py::test_x: marked unit but it uses what needs integration*"]
    )


def test_a_layer_selects_the_tests_that_use_what_it_needs(suite: pytest.Pytester) -> None:
    result = suite.runpytest_inprocess(
        "-p", "no:cacheprovider", "-n", "0", "--collect-only", "-q", "-m", "integration"
    )
    assert [line for line in result.stdout.lines if "::" in line] == [
        "test_suite.py::test_starts_a_process_in_its_layer"
    ]
