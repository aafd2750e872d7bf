"""Stop and remove what killed runs left: processes (with their groups), run directories and
containers. Every entry point that starts something calls this first."""

from __future__ import annotations

from pathlib import Path

from . import containers, processes
from .state import DEFAULT_STATE_DIR


def cleanup_leftovers(state_dir: Path | None = None) -> list[str]:
    """Stop the servers and containers of runs whose process is gone; say what was removed."""
    removed = processes.stop_leftover_processes(state_dir or DEFAULT_STATE_DIR)
    return removed + containers.remove_leftover_containers()
