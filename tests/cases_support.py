"""The data files of fact and operation cases (``tests/facts/<fact>/*.json``,
``tests/operations/<operation>/*.json``): a file holds one case or a list of them."""

from __future__ import annotations

import json
from pathlib import Path


def cases(folder: Path) -> list[tuple[str, dict]]:
    """``[(id, case)]`` of every JSON file below ``folder`` (a file: one case or a list)."""
    found = []
    for path in sorted(folder.glob("*/*.json")):
        loaded = json.loads(path.read_text())
        for number, case in enumerate(loaded if isinstance(loaded, list) else [loaded]):
            found.append(
                (f"{path.parent.name}/{path.stem}#{number}:{case.get('case', '')}", {**case, "folder": path.parent.name})
            )
    return found
