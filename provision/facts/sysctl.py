"""``sysctl`` KEY: a kernel parameter's live value, read from ``/proc/sys`` (what ``sysctl -n KEY``
prints, without needing procps: minimal images lack it).

The key is sysctl's dotted name (``net.core.rmem_max``); as sysctl.d(5) says, a ``/`` in a key
stands for a ``.`` inside one component (``net.ipv4.conf.eth0/100.rp_filter`` is the interface
``eth0.100``). The value is None when the kernel has no such key; a value of several fields
(``net.ipv4.tcp_rmem``: ``4096	131072	6291456``) is normalised to single spaces, as
``sysctl -p`` compares them.

Example::

    >>> SYSCTL.read("v 4096\\t131072\\t6291456\\n", "net.ipv4.tcp_rmem")
    '4096 131072 6291456'
"""

from __future__ import annotations

import re
import shlex

from provision.errors import ParseError
from provision.facts.registry import Fact
from provision.text import shown_value

KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_:@-]{0,63}(?:[./][A-Za-z0-9_:@-]{1,64}){0,15}")
VALUE_LIMIT = 4096  # characters of a value believed (the longest real ones, core_pattern, are 128)
_VALUE = re.compile(r"[\x20-\x7e\t]{0,4096}")


def check_key(key: object) -> str:
    """A sysctl key safe to name a /proc/sys path (no ``..``, no leading ``/``), else ValueError."""
    if not isinstance(key, str) or not KEY.fullmatch(key):
        raise ValueError(f"sysctl key {shown_value(str(key)[:80])}: give a dotted name such as net.core.rmem_max")
    return key


def proc_path(key: str) -> str:
    """``/proc/sys`` path of ``key``: dots are folders, a ``/`` is a dot inside a name."""
    return "/proc/sys/" + "/".join(part.replace("/", ".") for part in check_key(key).split("."))


def normalise(value: str) -> str:
    """A value as sysctl compares it: fields separated by single spaces."""
    return " ".join(value.split())


def _command(key: str) -> str:
    path = shlex.quote(proc_path(key))
    # "v " first: an empty value (kernel.domainname unset) is still a value, not a missing key.
    return f"if [ -r {path} ] && [ -f {path} ]; then printf 'v '; head -c {VALUE_LIMIT} {path}; else echo absent; fi"


def _parse(key: str, text: str) -> str | None:
    line = text.split("\n", 1)[0]
    if line == "absent":
        return None
    if not line.startswith("v ") or not _VALUE.fullmatch(line[2:]):
        raise ParseError(f"sysctl {key}", f"unexpected output {shown_value(line[:80])}")
    return normalise(line[2:])


SYSCTL = Fact("sysctl", (), _command, "a kernel parameter's live value (/proc/sys)", _parse)
