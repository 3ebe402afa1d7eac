"""Real wheels, written by hand: a wheelhouse for the app-environment tests and bench, with no index.

``make_wheel`` writes a valid ``py3-none-any`` wheel (METADATA, WHEEL, RECORD with hashes) that
pip installs like any other; its module records its own version so a test can see which copy
the app imported.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Sequence
from pathlib import Path


def make_wheel(folder: Path, name: str, version: str, *, module: str | None = None,
               requires: Sequence[str] = (), body: str = "") -> Path:
    """Write ``<name>-<version>-py3-none-any.whl`` into ``folder``; returns its path."""
    dist = name.replace("-", "_")
    module = module or dist.lower()
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}\n{body}",
        f"{info}/METADATA": "Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: besser-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel
