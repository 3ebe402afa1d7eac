"""The environment a sandboxed command gets: an allowlist, with anything secret-like removed.

One function (``scrub_environment``) builds it for every tier, session and one-off, so a
provider key in the server's environment never reaches a command or a build backend it
starts. Names are judged by ``kernel_ext.secrets.is_secret_name`` (the project's single
definition) plus two shell-specific rules: session-like names, and URLs carrying credentials.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kernel_ext.secrets import is_secret_name

ALLOWED_NAMES = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "LANG", "LANGUAGE",
        "TMPDIR", "TMP", "TEMP", "COLUMNS", "NO_COLOR", "FORCE_COLOR", "CI",
        "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONUTF8",
        "PYTHONHASHSEED", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST",
        "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_FIND_LINKS", "PIP_NO_INDEX",
        "PIP_DEFAULT_TIMEOUT", "NODE_ENV", "NPM_CONFIG_REGISTRY",
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
    }
)
ALLOWED_PREFIXES = ("LC_",)
# Trust-store locations: kept only when the value is an existing path (never inline material).
CA_BUNDLE_NAMES = frozenset(
    {"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT"}
)
_EXTRA_SECRET_PIECES = ("SESSION", "CERT", "API_")
_URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s@]+@")


@dataclass(frozen=True)
class ScrubbedEnvironment:
    """The environment to pass, and what was held back (names only, never values)."""

    env: dict[str, str]
    secrets_removed: int
    removed_names: tuple[str, ...]


def looks_secret(name: str, value: str = "") -> bool:
    """Secret by name (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH, ...) or by a credentialed URL."""
    if name in CA_BUNDLE_NAMES:
        return not os.path.exists(value)
    upper = name.upper()
    return is_secret_name(name) or any(piece in upper for piece in _EXTRA_SECRET_PIECES) or bool(
        _URL_CREDENTIALS.search(value)
    )


def split_secrets(variables: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``(kept, removed names)``: host-provided variables minus anything secret-like."""
    kept: dict[str, str] = {}
    removed: list[str] = []
    for name, value in variables.items():
        if looks_secret(name, value):
            removed.append(name)
        else:
            kept[name] = value
    return kept, removed


def user_site(home: str) -> str:
    """Where ``pip install --prefix $HOME/.local`` puts packages for this interpreter."""
    return os.path.join(home, ".local", "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")


def scrub_environment(
    source: Mapping[str, str] | None = None,
    *,
    home: str,
    tmpdir: str,
    extra: Mapping[str, str] | None = None,
    path_first: Iterable[str] = (),
) -> ScrubbedEnvironment:
    """Allowlisted variables of ``source`` minus secrets, with the run's HOME, temp dir and PATH.

    ``PATH`` starts with the run's ``~/.local/bin`` and the server interpreter's ``bin``
    (so ``python`` is the interpreter the server runs under), then the host ``PATH``'s
    absolute entries. ``extra`` (host-provided) passes the same secret filter.
    """
    source = os.environ if source is None else source
    env: dict[str, str] = {}
    removed: list[str] = []
    secrets = 0
    for name, value in source.items():
        allowed = name in ALLOWED_NAMES or name in CA_BUNDLE_NAMES or name.startswith(ALLOWED_PREFIXES)
        if looks_secret(name, value):
            secrets += 1
            removed.append(name)
        elif allowed:
            env[name] = value
    kept, dropped = split_secrets(extra or {})
    env.update(kept)
    secrets += len(dropped)
    removed.extend(dropped)
    env["PATH"] = _path(env.get("PATH", os.defpath), home, path_first)
    env["HOME"] = home
    for name in ("TMPDIR", "TMP", "TEMP"):
        env[name] = tmpdir
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONUSERBASE"] = os.path.join(home, ".local")
    env["PYTHONPATH"] = user_site(home)
    env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return ScrubbedEnvironment(env, secrets, tuple(sorted(removed)))


def _path(host_path: str, home: str, first: Iterable[str]) -> str:
    entries = [*first, os.path.join(home, ".local", "bin"), os.path.dirname(sys.executable), *host_path.split(os.pathsep)]
    seen: list[str] = []
    for entry in entries:
        if entry and os.path.isabs(entry) and entry not in seen:
            seen.append(entry)
    return os.pathsep.join(seen)
