"""The running kernel's release (``uname -r``): kept by probe, compared across nodes by doctor.

Nodes of one job should run one kernel: the NVIDIA driver, the RDMA stack (MOFED's modules) and
the file systems are built for it, and a node left on the old kernel after a rolling update is the
one that behaves differently. A difference is a warning in doctor's software check, not a failure:
jobs often run across kernels, and doctor says which node is the odd one.

Example::

    >>> parse_release("5.15.0-105-generic\\n")
    '5.15.0-105-generic'
"""

from __future__ import annotations

import re

from provision.errors import ParseError
from provision.facts.registry import Fact
from provision.text import shown_value

RELEASE = Fact(
    "uname-r",
    (),
    # The kernel's own copy of utsname's release (what uname -r prints), read by the shell: no
    # process on Linux (every node runs the probe at once, issue 37); uname -r where it is absent.
    'if read -r r 2>/dev/null </proc/sys/kernel/osrelease; then echo "$r"; else uname -r; fi',
    "the running kernel's release",
    column="kernel",
    compared="software",
    differ="warn",
    stable=True,  # a setup-cluster run installs kernels, it never boots one
)

# utsname's release field holds at most 64 characters (__NEW_UTS_LEN); it starts with the version.
_RELEASE = re.compile(r"[0-9][A-Za-z0-9._+~-]{0,63}")


@RELEASE.parses
def parse_release(text: str) -> str:
    """``uname -r``'s one word, e.g. ``6.1.0-18-amd64``; ParseError on anything else."""
    release = text.strip()
    if not _RELEASE.fullmatch(release):
        raise ParseError(RELEASE.name, f"not a kernel release: {shown_value(release[:80])}", 1)
    return release
