"""Fact kinds about the node's operating system and its package index, each a command and a pure
parser of hostile output (every field checked):

- ``os``: ``/etc/os-release``'s ``ID``, ``ID_LIKE`` and ``VERSION_ID`` (:class:`OsRelease`; all
  empty when the file is missing), parsed strictly: ``KEY=value`` lines, values plain or quoted;
- ``pkgindex``: how old the package manager's index is (:class:`PackageIndex`): apt's
  ``/var/lib/apt/lists`` (the mtime of its ``partial`` folder or of apt's update stamp, which
  ``apt-get update`` touches on every successful run; the list files themselves carry the
  archive's Last-Modified time, not the time of the update), dnf's or yum's ``repomd.xml``;
  ``age`` None when there is no index at all (a Debian container image, a fresh cloud image);
- ``candidate`` NAME: ``installed``, the version apt would install (``apt-cache policy``), None
  when apt knows no candidate (``Package 'x' has no installation candidate``), ``unknown``
  where apt is not the package manager.

The OS family (:func:`os_family`) chooses package names and files that differ between Debian and
RHEL (see :mod:`provision.operations.os_choice`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from provision.errors import ParseError
from provision.facts.registry import Fact
from provision.operations.base import PACKAGE_NAME, quote
from provision.text import shown_value

_OS_KEY = re.compile(r"^[A-Z][A-Z0-9_]{0,63}\Z")
_OS_WORD = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}\Z")  # os-release(5): ID and ID_LIKE words
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+~:_-]{0,127}\Z")
_MAX_OS_LINES = 200
DEBIAN_LIKE = ("debian", "ubuntu")
RHEL_LIKE = ("rhel", "fedora", "centos", "rocky", "almalinux", "ol", "amzn")


@dataclass(frozen=True)
class OsRelease:
    """``/etc/os-release``: ``id`` (``debian``, ``rocky``), ``like`` (``ID_LIKE``'s words, e.g.
    ``("rhel", "centos", "fedora")``) and ``version_id`` (``12``, ``9.4``)."""

    id: str = ""
    like: tuple[str, ...] = ()
    version_id: str = ""


@dataclass(frozen=True)
class PackageIndex:
    """The package index: its ``manager`` (apt, dnf, yum, or empty), its ``age`` in seconds (None:
    no index), and ``refreshed``: this run refreshed it already (a change's predicted effect)."""

    manager: str
    age: int | None
    refreshed: bool = False


def os_family(release: OsRelease | None) -> str:
    """``debian``, ``rhel`` or ``unknown``: from ``ID`` first, then ``ID_LIKE`` in its order."""
    if release is None:
        return "unknown"
    for word in (release.id, *release.like):
        if word in DEBIAN_LIKE:
            return "debian"
        if word in RHEL_LIKE:
            return "rhel"
    return "unknown"


_OS_COMMAND = "cat /etc/os-release 2>/dev/null || cat /usr/lib/os-release 2>/dev/null; true"


def _unquote(key: str, value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        raw = value[1:-1]
        if value[0] == "'":
            if "'" in raw:
                raise ParseError("os", f"unbalanced quotes in {key}")
            return raw
        if '"' in re.sub(r'\\[\\"$`]', "", raw):
            raise ParseError("os", f"unbalanced quotes in {key}")
        return re.sub(r'\\([\\"$`])', r"\1", raw)
    if any(ch in value for ch in "\"'`$\\ \t"):
        raise ParseError("os", f"{key}: a value with spaces or quotes must be quoted")
    return value


def parse_os(text: str) -> OsRelease:
    """The fields of os-release(5) that choose package names; anything malformed is an error."""
    fields: dict[str, str] = {}
    for line in text.splitlines()[:_MAX_OS_LINES]:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not _OS_KEY.match(key) or len(value) > 512:
            raise ParseError("os", f"unexpected /etc/os-release line {shown_value(line[:80])}")
        fields[key] = _unquote(key, value)
    os_id = fields.get("ID", "")
    like = tuple(fields.get("ID_LIKE", "").split())
    for word in (os_id, *like) if os_id else like:
        if not _OS_WORD.match(word):
            raise ParseError("os", f"ID/ID_LIKE word {shown_value(word[:40])} is not a lower-case name")
    version = fields.get("VERSION_ID", "")
    if version and not _VERSION.match(version):
        raise ParseError("os", f"VERSION_ID {shown_value(version[:40])} is not a version")
    return OsRelease(os_id, like, version)


def _pkgindex_command() -> str:
    # The newest of: apt's partial/ (made and emptied by each apt-get update), apt's own update
    # stamp, the lists folder; only where a Packages list exists at all.
    apt = (
        "if ls /var/lib/apt/lists/ 2>/dev/null | grep -q '_Packages'; then "
        "t=$(stat -c %Y /var/lib/apt/lists/partial /var/lib/apt/periodic/update-success-stamp /var/lib/apt/lists "
        "2>/dev/null | sort -n | tail -n 1); echo \"apt $(( $(date +%s) - ${t:-0} ))\"; else echo 'apt none'; fi"
    )

    def repomd(manager: str, pattern: str) -> str:
        return (
            f"f=$(ls -t {pattern} 2>/dev/null | head -n 1); "
            f'if [ -n "$f" ]; then echo "{manager} $(( $(date +%s) - $(stat -c %Y "$f") ))"; else echo \'{manager} none\'; fi'
        )

    return (
        f"if command -v apt-get >/dev/null 2>&1; then {apt}; "
        f"elif command -v dnf >/dev/null 2>&1; then {repomd('dnf', '/var/cache/dnf/*/repodata/repomd.xml /var/cache/libdnf5/*/repodata/repomd.xml')}; "  # noqa: E501 - one shell line
        f"elif command -v yum >/dev/null 2>&1; then {repomd('yum', '/var/cache/yum/*/*/*/repomd.xml')}; "
        "else echo none; fi"
    )


def parse_pkgindex(text: str) -> PackageIndex:
    """``apt 3600`` -> PackageIndex("apt", 3600); ``apt none`` -> no index; ``none``: no manager."""
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    if line == "none":
        return PackageIndex("", None)
    match = re.fullmatch(r"(apt|dnf|yum) (none|-?\d{1,12})", line)
    if not match:
        raise ParseError("pkgindex", f"unexpected output {shown_value(line[:60])}")
    return PackageIndex(match.group(1), None if match.group(2) == "none" else int(match.group(2)))


def _candidate_command(name: str) -> str:
    if not PACKAGE_NAME.match(name):
        raise ValueError(f"package {shown_value(name)}")
    word = quote(name)
    return (
        "if command -v apt-cache >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1; then "
        f"case \"$(dpkg-query -W -f='${{db:Status-Abbrev}}' {word} 2>/dev/null)\" in ii*) echo installed ;; "
        f"*) printf 'c %s\\n' \"$(apt-cache policy {word} 2>/dev/null | sed -n 's/^ *Candidate: *//p' | head -n 1)\" ;; esac; "
        "else echo unknown; fi"
    )


def parse_candidate(name: str, text: str) -> str | None:
    """``installed``, ``unknown``, a version, or None (apt has no candidate for ``name``)."""
    line = text.strip().splitlines()[0].strip() if text.strip() else ""
    if line in ("installed", "unknown"):
        return line
    if line == "c" or line == "c (none)":
        return None
    if line.startswith("c ") and _VERSION.match(line[2:]):
        return line[2:]
    raise ParseError(f"candidate {name}", f"unexpected output {shown_value(line[:60])}")


OS = Fact("os", (), _OS_COMMAND, "/etc/os-release's ID, ID_LIKE and VERSION_ID", parse_os, stable=True)
PKGINDEX = Fact("pkgindex", (), _pkgindex_command(), "how old the package index is", parse_pkgindex)
CANDIDATE = Fact("candidate", (), _candidate_command, "the version the package manager would install", parse_candidate)
