"""The client library registry is data: every driver directory's library.json validates against
schemas/library.schema.json, the registry read from them is the table the suite had in code, and
an outside drivers directory declares its libraries in the same format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from nats_conformance.harness.clients import driver_builds, registry, streaming_clients
from nats_conformance.harness.clients.client_specs import accepted_forms, expand_series
from nats_conformance.harness.clients.driver_images import RECIPES
from nats_conformance.harness.clients.registry import (
    DRIVERS_DIR,
    LIBRARIES,
    SCHEMA_PATH,
    STREAMING_LIBRARIES,
    ClientError,
    extend_registry,
)

SCHEMA = json.loads(SCHEMA_PATH.read_text("utf-8"))
STAN = "nats-conformance-stan-driver"
DEBIAN_NATS_GO = "/usr/share/gocode/src/github.com/nats-io/nats.go"
# The registry as it was written in harness/clients/targets.py (now client_targets.py) and
# streaming_clients.py before it became data:
# name -> (registry, tools, files, shares, from_source, releases, container).
TABLE = {
    "nats-py": ("PyPI nats-py", ("python3",), (), (), True,
                ("2.0.0", "2.4.0", "2.7.2", "2.10.0", "2.16.0"), "python-venv"),
    "nats.js": ("npm nats (v2)", ("node", "npm"), (), (), True,
                ("2.9.0", "2.13.0", "2.18.0", "2.22.0", "2.29.3"), None),
    "nats.js-v3": ("npm @nats-io/transport-node (v3)", ("node", "npm"), (), ("nats.js",), True,
                   (), None),
    "nats.go": ("Go module proxy; ==1.22.1 is Debian's golang-github-nats-io-go-nats-dev",
                ("go",), (), (), True, ("1.22.1", "1.28.0", "1.37.0", "1.44.0", "1.55.0"),
                "static-binary"),
    "nats.c": ("Debian libnats-dev", ("gcc", "pkg-config"), ("/usr/include/nats/nats.h",), (),
               False, (), None),
    "async-nats": ("crates.io async-nats", ("cargo",), (), (), True, (), None),
    "jnats": ("Maven Central io.nats:jnats", ("java", "mvn"), (), (), True, (), None),
}  # fmt: skip
STREAMING_TABLE = {
    "node-nats-streaming": ("npm node-nats-streaming", ("node", "npm"), (), (), True, (), None),
    "stan.go": ("Go module proxy github.com/nats-io/stan.go", ("go",), (), ("nats.go",), True,
                (), None),
    "java-nats-streaming": ("Maven Central io.nats:java-nats-streaming", ("java", "mvn"), (),
                            ("jnats",), True, (), None),
}  # fmt: skip


def facts(library: registry.Library) -> tuple[object, ...]:
    return (
        library.registry,
        library.tools,
        library.files,
        library.shares,
        library.from_source,
        library.releases,
        library.container,
    )


@pytest.fixture
def restored() -> Iterator[None]:
    """The registry as it was after the test, whatever it added."""
    saved = [(table, dict(table)) for table in (LIBRARIES, STREAMING_LIBRARIES)]
    yield
    for table, entries in saved:
        table.clear()
        table.update(entries)


def test_the_schema_is_valid_and_its_container_recipes_are_the_harness_recipes() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["container"]["enum"] == list(RECIPES)


@pytest.mark.parametrize("folder", sorted(p for p in DRIVERS_DIR.iterdir() if p.is_dir()))
def test_every_driver_directory_has_a_library_json_that_validates(folder: Path) -> None:
    assert (folder / "build.sh").is_file()
    jsonschema.validate(json.loads((folder / "library.json").read_text("utf-8")), SCHEMA)


def test_the_registry_read_from_the_files_is_the_table_the_code_held() -> None:
    # Each library the table held, as it held it (a library added since is not in the table).
    assert {name: facts(LIBRARIES[name]) for name in TABLE} == TABLE
    assert {name: facts(STREAMING_LIBRARIES[name]) for name in STREAMING_TABLE} == STREAMING_TABLE
    assert all(lib.protocol == "nats-conformance-driver" for lib in LIBRARIES.values())
    assert all(lib.protocol == STAN for lib in STREAMING_LIBRARIES.values())
    assert all(
        lib.root == DRIVERS_DIR for lib in [*LIBRARIES.values(), *STREAMING_LIBRARIES.values()]
    )
    assert LIBRARIES["nats.go"].system_releases == (("1.22.1", Path(DEBIAN_NATS_GO)),)
    assert not any(lib.system_releases for name, lib in LIBRARIES.items() if name != "nats.go")


def test_the_streaming_clients_parse_from_the_same_registry() -> None:
    client = streaming_clients.parse_spec("client:stan.go==0.10.4")
    assert client is not None and client.library is STREAMING_LIBRARIES["stan.go"]
    assert streaming_clients.parse_spec("client:nats.go") is None  # a NATS client's spec


def outside(root: Path, name: str, entry: object) -> Path:
    folder = root / "drivers" / name
    folder.mkdir(parents=True)
    (folder / "build.sh").write_text("PINNED_VERSION=1.2.0\n")
    (folder / "library.json").write_text(json.dumps(entry))
    return folder.parent


@pytest.mark.usefixtures("restored")
def test_an_outside_library_json_takes_every_field_a_bundled_one_has(tmp_path: Path) -> None:
    entry = {"registry": "acme", "tools": ["sh"], "source": True, "container": "static-binary",
             "releases": ["1.0.0", "1.2.0"],
             "system_releases": {"1.0.0": str(tmp_path)}}  # fmt: skip
    drivers = outside(tmp_path, "acme-nats", entry)
    assert extend_registry([drivers]) == ["acme-nats"]
    acme = LIBRARIES["acme-nats"]
    assert (acme.root, acme.container, acme.from_source) == (drivers, "static-binary", True)
    assert expand_series(["container:client:acme-nats==*"]) == [
        "container:client:acme-nats==1.0.0",
        "container:client:acme-nats==1.2.0",
    ]
    assert ("client:acme-nats==1.0.0", "1.0.0") in registry.available_clients()
    assert "in containers: nats-py, nats.go, acme-nats" in accepted_forms()


@pytest.mark.usefixtures("restored")
def test_an_outside_streaming_library_joins_the_streaming_clients(tmp_path: Path) -> None:
    drivers = outside(tmp_path, "acme-stan", {"registry": "acme", "protocol": STAN})
    assert extend_registry([drivers]) == ["acme-stan"]
    assert "acme-stan" in STREAMING_LIBRARIES and "acme-stan" not in LIBRARIES
    client = streaming_clients.parse_spec("client:acme-stan")
    assert client is not None and client.version == "1.2.0"  # the pin in its build.sh


@pytest.mark.parametrize(
    ("entry", "where"),
    [
        ({"registry": "x", "contianer": "static-binary"}, "'contianer' was unexpected"),
        ({"registry": "x", "container": "alpine"}, "['container']: 'alpine' is not one of"),
        ({"registry": "x", "releases": ["1.0", "1.0"]}, "['releases']: ['1.0', '1.0'] has non-"),
        ({"registry": "x", "protocol": "nats-conformance-driver/2"}, "['protocol']"),
    ],
)
@pytest.mark.usefixtures("restored")
def test_a_library_json_off_the_schema_says_where(
    tmp_path: Path, entry: object, where: str
) -> None:
    with pytest.raises(ClientError) as raised:
        extend_registry([outside(tmp_path, "acme-nats", entry)])
    assert where in str(raised.value) and "schemas/library.schema.json" in str(raised.value)


def test_the_registry_entry_is_not_part_of_the_build_hash(tmp_path: Path) -> None:
    drivers = outside(tmp_path, "acme-nats", {"registry": "acme"})
    before = registry.read_library(drivers / "acme-nats")
    hashed = driver_builds._source_hash(before, None, None)
    (drivers / "acme-nats" / "library.json").write_text('{"registry": "acme", "tools": ["go"]}')
    assert (
        driver_builds._source_hash(registry.read_library(drivers / "acme-nats"), None, None)
        == hashed
    )
    (drivers / "acme-nats" / "build.sh").write_text("PINNED_VERSION=1.3.0\n")
    assert driver_builds._source_hash(before, None, None) != hashed
