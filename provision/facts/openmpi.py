"""Parser for the ``openmpi`` capture: package lists and ``ompi_info --parsable`` lines.

The capture holds sections headed ``# dpkg-query``, ``# rpm`` and ``# ompi_info``; ``dpkg -l``
lines (``ii  name  version  arch  description``) are read too, as people paste them.
"""

from __future__ import annotations

import re

from provision.errors import ParseError
from provision.facts.model import NO_OPENMPI, OpenMPI
from provision.facts.registry import Fact
from provision.text import shown_value

SOURCE = Fact(
    "openmpi",
    (),
    # ompi_info on PATH is authoritative (version, CUDA support); only without it are the package
    # managers asked. built_with_cuda_support is a compile-time constant of OpenMPI's core
    # (OPAL_CUDA_SUPPORT), so ompi_info need not load its ~120 components (a component path that
    # is not a folder: none load; ~4 ms instead of ~250 ms). Level 4 holds it and the version at a
    # quarter of --all's size; the lines are kept whole (a grep would cost one more process).
    "echo '# ompi_info'; "
    "command -v ompi_info >/dev/null 2>&1 && "
    "OMPI_MCA_mca_base_component_path=/dev/null ompi_info --parsable --all --level 4 2>/dev/null || { "
    "echo '# dpkg-query'; "
    "if command -v dpkg-query >/dev/null 2>&1; then "
    "dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' '*openmpi*' 2>/dev/null; fi; "
    "echo '# rpm'; "
    "if command -v rpm >/dev/null 2>&1; then rpm -qa --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n' '*openmpi*' 2>/dev/null; fi; "
    "}; true",
    "installed OpenMPI packages, version, CUDA support",
)

_VERSION_KEY = "ompi:version:full"
_CUDA_KEY = "_built_with_cuda_support:value"  # mpi_... (v4) or its opal_... original
_VERSION_LINE, _CUDA_LINE = _VERSION_KEY + ":", _CUDA_KEY + ":"  # what a line holding either key holds
_SECTION = re.compile(r"^#\s*(dpkg-query|rpm|ompi_info)\s*\Z")
_UPSTREAM = re.compile(r"^(?:\d+:)?(\d+(?:\.\d+)+)")  # strip epoch and packaging revision


def _upstream_version(package_version: str) -> str | None:
    match = _UPSTREAM.match(package_version)
    return match.group(1) if match else None


def _carries_openmpi(name: str) -> bool:
    # The runtime or library package, not docs or -dev alone.
    return "openmpi" in name and not name.endswith(("-doc", "-doc-cuda"))


@SOURCE.parses
def parse_openmpi(text: str) -> OpenMPI:
    """Parse the ``openmpi`` capture into :class:`OpenMPI` (version None when nothing is installed)."""
    section = "dpkg-query"
    packages: dict[str, str] = {}  # name -> upstream version
    package_source = None
    ompi_version = None
    cuda: bool | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        # ompi_info's ~900 lines per node: substring tests skip a line that holds neither key nor a
        # section header, as the full handling below would (a third of probe's parsing time).
        if section == "ompi_info" and "#" not in raw and _VERSION_LINE not in raw and _CUDA_LINE not in raw:
            continue
        line = raw.strip()
        if not line:
            continue
        if match := _SECTION.match(line):
            section = match.group(1)
            continue
        if section == "ompi_info":
            key, _, value = line.rpartition(":")
            if key == _VERSION_KEY:
                ompi_version = value
            elif key.endswith(_CUDA_KEY):
                cuda = value == "true"
            continue
        fields = line.split()
        if "\t" in raw and section == "dpkg-query":
            # ${Package}\t${Version}\t${db:Status-Abbrev}: keep installed ones only
            columns = [column.strip() for column in raw.split("\t")]
            if len(columns) < 3:
                raise ParseError(SOURCE.name, f"expected package, version, status: {shown_value(line[:60])}", number)
            if not columns[2].startswith(("ii", "hi")):
                continue
            name, version, source = columns[0], columns[1], "dpkg-query"
        elif fields[0] in ("ii", "hi") and len(fields) >= 3:  # dpkg -l
            name, version, source = fields[1].split(":")[0], fields[2], "dpkg -l"
        elif section == "rpm" and len(fields) == 2:
            name, version, source = fields[0], fields[1], "rpm"
        else:
            raise ParseError(SOURCE.name, f"unexpected line in {section} section: {shown_value(line[:60])}", number)
        if not _carries_openmpi(name):
            continue
        upstream = _upstream_version(version)
        if upstream is None:
            raise ParseError(SOURCE.name, f"package {name}: bad version {shown_value(version)}", number)
        packages[name] = upstream
        package_source = source
    if cuda is None and packages:
        # IBM's and others' CUDA builds say so in the package name (openmpi-bin-cuda).
        cuda = True if any("cuda" in name for name in packages) else None
    if ompi_version:
        return OpenMPI(ompi_version, tuple(sorted(packages)), cuda, "ompi_info")
    if packages:
        versions = sorted(set(packages.values()))
        return OpenMPI(versions[-1], tuple(sorted(packages)), cuda, package_source or "packages")
    return NO_OPENMPI
