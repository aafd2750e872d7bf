"""The layers of the project's tests, and the guard that keeps the unit layer honest.

Every test has exactly one layer, a marker registered in pyproject.toml:

- unit: pure code and in-process fakes: no process, no connection except to the loopback (an
  in-process fake), so no nats-server, no driver, no Spark, no Docker, no browser;
- integration: real processes: nats-server, driver processes, the CLI and bin scripts, Spark;
- container: the Docker engine;
- browser: the real browser.

A test's layer is the highest of what it uses: the layers NEEDS gives its fixtures (the whole
chain it requests), its module and the test function itself, and a layer marker written on it;
with none of these, unit. A written marker below what the test uses is an error, so is a test of
the unit layer that starts a process or connects beyond the loopback (the guard below), so that
the classification cannot rot silently. pytest loads this module from tests/conftest.py.
"""

from __future__ import annotations

import _posixsubprocess
import ipaddress
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# From what a test needs least to most: a test that uses two takes the later one.
LAYERS = ("unit", "integration", "container", "browser")

# What puts a test above the unit layer, keyed as a node id without the directory and without
# parameters: a fixture ("file::fixture", where it is defined; a test counts every fixture it
# requests, directly or through another), a module ("file") where nearly every test starts
# processes, or one test ("file::test") that starts them itself where its module mixes layers.
# A test left out that starts a process fails in the unit layer (the guard), naming this table.
NEEDS: dict[str, str] = {
    # The Docker engine.
    "conftest.py::docker_engine": "container",
    # A nats-server (or a stand-in started as a process) per module or per test.
    "conftest.py::plain": "integration",
    "test_client_jetstream.py::server": "integration",
    "test_deviants.py::plain": "integration",
    "test_deviants.py::transparent": "integration",
    "test_differential.py::nats": "integration",
    "test_jetstream_names.py::target": "integration",
    "test_server_observed.py::two_runs": "integration",
    "test_stan_server.py": "integration",
    "test_suites.py": "integration",
    "test_streaming_clients.py::server": "integration",
    "test_targets.py::foreign_server": "integration",
    "test_tls_url.py::tls_server": "integration",
    "test_transports.py": "integration",
    "test_transport_cases.py": "integration",
    "test_wire.py::nats_server": "integration",
    "test_described_server.py": "integration",
    "test_runtime.py": "integration",
    # Driver processes: the bundled libraries' and fakes written as programs.
    "test_client_vectors.py::nats_py_rows": "integration",
    "test_client_transports.py::nats_py": "integration",
    "test_client_transport_cases.py::library": "integration",
    "test_driver_answers.py::fake_client": "integration",
    "test_driver_deadlines.py::fake": "integration",
    "test_driver_releases.py::built": "integration",
    "test_drivers.py": "integration",
    "test_driver_transports.py": "integration",
    "test_fake_server.py::client_runs": "integration",
    "test_frame_layouts_control.py::ws_client": "integration",
    "test_frame_layouts_live.py": "integration",
    "test_interop.py::build_problems": "integration",
    "test_interop.py::server_url": "integration",
    "test_interop.py::transport_rows": "integration",
    "test_interop.py::crossing_rows": "integration",
    "test_streaming_clients.py::client": "integration",
    "test_supplied_bounds.py::program": "integration",
    # Spark (a JVM), and Spark Connect's server.
    "test_report_connect.py::connect_url": "integration",
    "test_report_incremental.py::spark": "integration",
    "test_report_noise.py::spark": "integration",
    "test_report_pipeline.py::spark": "integration",
    "test_report_robustness.py::spark": "integration",
    "test_report_transports.py": "integration",
    # The command line, the bin scripts and pytest run as processes.
    "test_bin_scripts.py": "integration",
    "test_cli_run.py": "integration",
    "test_implementers.py": "integration",
    "test_plugin.py": "integration",
    # The real browser.
    "test_report_browser.py": "browser",
    # Tests that start processes themselves in modules of mostly unit tests.
    "test_checkouts.py::test_a_driver_builds_against_a_checkout_and_again_when_it_changes": (
        "integration"
    ),
    "test_client_jetstream.py::test_the_path_deletes_what_it_created": "integration",
    "test_client_releases.py::test_run_refuses_a_series_a_library_does_not_have": "integration",
    "test_client_releases.py::test_run_takes_a_series_as_one_target_per_release": "integration",
    "test_client_vectors.py::test_every_library_gets_a_row_per_client_vector": "integration",
    "test_client_vectors.py::test_two_runs_observe_the_same": "integration",
    "test_deviants.py::test_the_module_prints_the_catalog": "integration",
    "test_gate.py::test_an_unusable_baseline_file_is_exit_2_naming_the_file_and_the_problem": (
        "integration"
    ),
    "test_levels.py::test_vectors_check_refuses_a_case_above_its_statements": "integration",
    "test_packaging.py::test_a_project_with_its_own_generic_packages_keeps_working_with_the_plugin": (  # noqa: E501
        "integration"
    ),
    "test_packaging.py::test_the_wheel_installs_only_names_of_its_own": "integration",
    "test_plug_in.py::test_a_client_case_failing_once_is_run_again_and_reported_flaky": (
        "integration"
    ),
    "test_plug_in.py::test_a_driver_program_runs_the_vectors_like_a_bundled_library": (
        "integration"
    ),
    "test_plug_in.py::test_a_driver_program_takes_its_library_from_hello": "integration",
    "test_plug_in.py::test_a_driver_program_that_does_not_answer_hello_stops_the_run": (
        "integration"
    ),
    "test_plug_in.py::test_an_executable_path_with_spaces_is_one_program": "integration",
    "test_plug_in.py::test_an_outside_drivers_dir_extends_the_registry": "integration",
    "test_plug_in.py::test_nats_py_builds_against_a_checkout_and_again_when_it_changes": (
        "integration"
    ),
    "test_plug_in.py::test_the_run_takes_a_drivers_dir_option": "integration",
    "test_plug_in.py::test_the_run_takes_drivers_dirs_from_the_environment": "integration",
    "test_requirements.py::test_a_case_naming_no_requirements_cites_what_its_quote_cites": (
        "integration"
    ),
    "test_requirements.py::test_check_fails_a_case_that_cites_nothing_its_quote_cites": (
        "integration"
    ),
    "test_requirements.py::test_check_fails_a_citation_that_does_not_exist": "integration",
    "test_robustness.py::test_a_broken_greeting_is_a_verdict_not_a_crash": "integration",
    "test_robustness.py::test_a_server_that_exits_during_a_case_fails_it_as_robustness": (
        "integration"
    ),
    "test_robustness.py::test_a_server_that_stops_answering_fails_as_robustness": "integration",
    "test_selection.py::test_a_printed_row_id_runs_its_case_through_the_command": "integration",
    "test_smoke.py::test_smoke_passes_for_nats_py": "integration",
    "test_streaming_clients.py::test_the_python_client_finding_is_still_a_row": "integration",
    "test_targets.py::test_a_killed_harness_leaves_no_server": "integration",
    "test_targets.py::test_a_remote_docker_engine_is_refused": "integration",
    "test_targets.py::test_a_server_never_ready_is_stopped_and_a_target_error": "integration",
    "test_targets.py::test_a_server_outlives_the_thread_that_asked_for_it": "integration",
    "test_targets.py::test_a_server_that_exits_at_start_is_a_target_error_with_its_log": (
        "integration"
    ),
    "test_targets.py::test_a_release_before_the_wheels_is_built_from_the_module_proxy_once": (
        "integration"
    ),
    "test_targets.py::test_a_version_that_does_not_exist_gives_pips_reason": "integration",
    "test_targets.py::test_any_credentials_reach_the_server_unchanged": "integration",
    "test_targets.py::test_cleanup_spares_live_runs_and_reused_pids": "integration",
    "test_targets.py::test_close_stops_every_server_and_removes_its_files": "integration",
    "test_targets.py::test_ctrl_c_stops_the_harness_servers": "integration",
    "test_targets.py::test_default_target_serves_on_loopback_with_its_version": "integration",
    "test_targets.py::test_each_config_gets_its_own_configured_server": "integration",
    "test_targets.py::test_exec_target_rejects_what_is_not_a_server": "integration",
    "test_targets.py::test_exec_target_runs_any_binary_and_reads_its_version": "integration",
    "test_targets.py::test_launched_server_applies_jetstream_and_authorization": "integration",
    "test_targets.py::test_pinned_wheel_is_downloaded_once_and_runs_that_version": "integration",
    "test_targets.py::test_unknown_config_key_is_a_target_error_at_server": "integration",
    "test_targets.py::test_url_target_with_nothing_listening_is_a_target_error": "integration",
    "test_vector_formats.py::test_vectors_check_passes_older_files_with_notes": "integration",
    "test_vector_limits.py::test_check_reports_every_problem_of_every_file": "integration",
    "test_vector_limits.py::test_dry_run_over_files_with_problems_exits_2_and_names_them": (
        "integration"
    ),
    "test_vector_limits.py::test_run_over_files_with_problems_runs_the_rest_then_exits_2": (
        "integration"
    ),
    "test_vectors.py::test_a_broken_case_loses_only_itself": "integration",
    "test_vectors.py::test_a_quote_matches_its_document_whatever_its_whitespace": "integration",
    "test_vectors.py::test_broken_case_is_named_by_file_case_and_field": "integration",
    "test_vectors.py::test_check_passes_good_file_and_prints_counts": "integration",
    "test_vectors.py::test_duplicate_ids_across_files_are_reported": "integration",
    "test_vectors.py::test_invalid_json_names_file_and_line": "integration",
    "test_vectors.py::test_missing_directory_is_a_usage_error": "integration",
    "test_vectors.py::test_wire_script_is_checked_against_the_server_model": "integration",
    "test_library_registry.py::test_an_outside_library_json_takes_every_field_a_bundled_one_has": (
        "integration"
    ),
    "test_target_kinds.py::test_a_registered_kind_is_parsed_opened_and_named": "integration",
    "test_target_kinds.py::test_open_target_refuses_and_closes_a_target_without_wire_servers": (
        "integration"
    ),
    "test_target_kinds.py::test_open_target_returns_the_wire_target_interface_for_each_local_kind": (  # noqa: E501
        "integration"
    ),
    "test_vector_aliases.py::test_vectors_check_refuses_a_taken_former_id": "integration",
}

# Fixtures that open the client target their parameter names: a container: one needs the
# engine (the others are driver processes, as NEEDS says).
BY_PARAMETER = frozenset({"test_drivers.py::client"})

LAYER_KEY = pytest.StashKey[dict[str, str]]()


class LayerError(Exception):
    """A test's layer cannot be told: a written marker below what the test uses, or two."""


def layer_of(written: list[str], needs: list[str]) -> str:
    """The one layer of a test from its written layer markers and the layers NEEDS gives it."""
    if len(set(written)) > 1:
        raise LayerError(f"two layer markers: {sorted(set(written))}")
    layer = max([*written, *needs, LAYERS[0]], key=LAYERS.index)
    if written and written[0] != layer:
        raise LayerError(f"marked {written[0]} but it uses what needs {layer}")
    return layer


def _key(nodeid: str) -> str:
    """A node id without its directory and parameters: 'test_x.py::test_y'."""
    path, _, rest = nodeid.partition("::")
    name = Path(path).name
    return f"{name}::{rest.partition('[')[0]}" if rest else name


def _fixture_keys(item: pytest.Function) -> list[str]:
    """'file::fixture' for each fixture the test requests, directly or through another one."""
    keys = []
    for name in item.fixturenames:
        definitions = item._fixtureinfo.name2fixturedefs.get(name)
        if definitions:  # a parameter of the test itself has none
            code = getattr(definitions[-1].func, "__code__", None)
            if code is not None:
                keys.append(f"{Path(code.co_filename).name}::{name}")
    return keys


def needs_of(item: pytest.Function) -> list[str]:
    """The layers NEEDS gives an item (its fixtures', its module's and its own), and container
    where a BY_PARAMETER fixture opens a container: target."""
    fixtures = _fixture_keys(item)
    keys = [*fixtures, _key(item.nodeid.partition("::")[0]), _key(item.nodeid)]
    needs = [NEEDS[key] for key in keys if key in NEEDS]
    params = getattr(item, "callspec", None)
    for key in BY_PARAMETER.intersection(fixtures):
        value = params.params.get(key.partition("::")[2]) if params else None
        if isinstance(value, str) and value.startswith("container:"):
            needs.append("container")
    return needs


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give each test function its layer marker before -m deselects by it. (The conformance
    cases the nats_conformance plugin adds are not functions of this suite and keep none.)"""
    layers: dict[str, str] = {}
    problems = []
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        written = [mark.name for mark in item.iter_markers() if mark.name in LAYERS]
        try:
            layers[item.nodeid] = layer_of(written, needs_of(item))
        except LayerError as exc:
            problems.append(f"{item.nodeid}: {exc}")
            continue
        if not written:
            item.add_marker(layers[item.nodeid])
    if problems:
        raise pytest.UsageError("tests without one layer:\n" + "\n".join(problems))
    config.stash[LAYER_KEY] = layers


def _loopback(address: Any) -> bool:
    """Whether a socket address is on the loopback (an in-process fake's)."""
    if not isinstance(address, tuple):  # a Unix socket's path: another process's (Docker's)
        return False
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name to resolve: beyond the loopback
        return False


@contextmanager
def unit_guard(nodeid: str) -> Iterator[list[str]]:
    """While it is open, starting a process or connecting beyond the loopback fails the test (a
    pytest failure, which `except Exception` does not catch); it yields what was refused, so that
    a test that catches even that still fails. Threads that were running before, those of
    fixtures of other layers, go on unhindered."""
    refused: list[str] = []
    others = {thread.ident for thread in threading.enumerate()} - {threading.get_ident()}

    def refusing(original: Callable[..., Any], what: Callable[..., str | None]) -> Any:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() not in others and (said := what(*args)) is not None:
                refused.append(said)
                pytest.fail(
                    f"{nodeid} is in the unit layer but {said}: give it its layer (an entry in "
                    "tests/layer_marks.py NEEDS for its fixture, module or itself, or "
                    "@pytest.mark.<layer> on it)"
                )
            return original(*args, **kwargs)

        return guarded

    def starts(name: str) -> Callable[..., str]:
        return lambda *_: f"started a process ({name})"

    def connects(sock: socket.socket, address: Any, *_: Any) -> str | None:
        return None if _loopback(address) else f"connected to {address!r}"

    with pytest.MonkeyPatch.context() as patch:
        # Every way Python starts a program: subprocess, asyncio and os.popen go through
        # Popen._execute_child, multiprocessing through os.fork or _posixsubprocess.fork_exec.
        for owner, name in [
            (subprocess.Popen, "_execute_child"),
            (_posixsubprocess, "fork_exec"),
            *((os, name) for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system")),
        ]:
            where = f"{owner.__name__}.{name}"
            patch.setattr(owner, name, refusing(getattr(owner, name), starts(where)))
        for name in ("connect", "connect_ex"):
            patch.setattr(socket.socket, name, refusing(getattr(socket.socket, name), connects))
        yield refused


@contextmanager
def _guarded(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("unit") is None or not isinstance(item, pytest.Function):
        yield
        return
    with unit_guard(item.nodeid) as refused:
        yield
    if refused:
        pytest.fail(f"{item.nodeid} is in the unit layer but {refused[0]}", pytrace=False)


# Setup and call: a unit test's own fixtures start under the guard. Not teardown: there the
# fixtures a module shares with tests of other layers may stop.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)
