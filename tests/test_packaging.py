"""The installed distribution claims names of its own only: its wheel holds nothing but
``nats_conformance/`` and its metadata, and a user's project with its own ``harness``,
``reports``, ``conformance`` or ``vectors`` package keeps working with the plugin loaded."""

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from source_tree import ROOT, suite_source

GENERIC = ("harness", "reports", "conformance", "vectors")


def test_the_wheel_installs_only_names_of_its_own(tmp_path: Path) -> None:
    source = suite_source(tmp_path / "source")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(tmp_path / "dist"), str(source)],
        check=True, capture_output=True, cwd=tmp_path,
    )  # fmt: skip
    [wheel] = (tmp_path / "dist").glob("nats_conformance-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"nats_conformance"}
    for part in GENERIC:  # every part and its data is inside, under the distribution's name
        assert f"nats_conformance/{part}/__init__.py" in names
    # Every module, a folder pyproject.toml's package list forgot included (an editable install
    # of a clone would still find it).
    drivers = ROOT / "harness" / "drivers"
    modules = {
        f"nats_conformance/{path.relative_to(ROOT).as_posix()}"
        for part in GENERIC
        for path in (ROOT / part).rglob("*.py")
        if not path.is_relative_to(drivers)
    }
    assert modules - set(names) == set()
    # Data beside the code that reads it, where the repository keeps it.
    assert "nats_conformance/schemas/vector.schema.json" in names
    assert "nats_conformance/schemas/baseline.schema.json" in names
    assert "nats_conformance/baselines/baseline.json" in names
    assert "nats_conformance/harness/drivers/nats.go/main.go" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "nats_conformance.harness.plugin" in text and "nats_conformance.harness.cli:main" in text


def test_a_project_with_its_own_generic_packages_keeps_working_with_the_plugin(
    tmp_path: Path,
) -> None:
    for part in GENERIC:
        (tmp_path / part).mkdir()
        (tmp_path / part / "__init__.py").write_text(f"OWNER = 'the user {part}'\n")
    (tmp_path / "test_mine.py").write_text(
        "import harness, reports, conformance, vectors\n"
        "import nats_conformance.harness.plugin as plugin\n\n"
        "def test_mine(pytestconfig):\n"
        "    assert pytestconfig.pluginmanager.is_registered(plugin)\n"
        "    for m in (harness, reports, conformance, vectors):\n"
        "        assert m.OWNER == 'the user ' + m.__name__\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mine.py"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_plugins_extra_brings_pytest_and_the_docs_say_how_to_install_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    plugin = project["entry-points"]["pytest11"]["nats_conformance"]
    assert plugin == "nats_conformance.harness.plugin"
    assert any(dep.startswith("pytest") for dep in project["optional-dependencies"]["pytest"])
    assert not any(dep.startswith("pytest") for dep in project["dependencies"])  # the command
    running = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")  # the plugin's page
    assert 'pip install "nats-conformance[pytest] @ SOURCE"' in running
