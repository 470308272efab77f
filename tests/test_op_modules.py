"""Where a site's modulefile goes (provision/operations/modules.py): the first folder under /etc on
the MODULEPATH the node's own login shell gets. Debian's two are read from the real packages in
tests/test_modules_cluster.py; RHEL's cannot run here (no registry for a RHEL-like image), so its
rule is kept as a case citing the package's build: microsoft/azurelinux
66bde0a38b020769f8fcba24fd6348390f17f3b1 SPECS/environment-modules/environment-modules.spec
(Fedora's, imported: "Update to 5.2.0 (from Fedora 38 (license: MIT))"), its %build line
`--with-modulepath=%{_datadir}/Modules/modulefiles:%{_sysconfdir}/modulefiles:%{_datadir}/modulefiles \\`."""

import pytest

from provision.operations import OPERATIONS
from provision.operations.base import StateKey
from provision.operations.modules import MODULES, ModuleSystem, site_folder
from provision.operations.os_state import OsRelease
from provision.operations.platform import OS

RHEL_SPEC_MODULEPATH = "/usr/share/Modules/modulefiles:/etc/modulefiles:/usr/share/modulefiles"  # %{_datadir}=/usr/share


@pytest.mark.parametrize(
    "system,family,folder",
    [
        (ModuleSystem("environment-modules", tuple(RHEL_SPEC_MODULEPATH.split(":"))), "rhel", "/etc/modulefiles"),
        (
            ModuleSystem(
                "environment-modules",
                (
                    "/etc/environment-modules/modules",
                    "/usr/share/modules/$MODULE_VERSION/modulefiles",
                    "/usr/share/modules/modulefiles",
                ),
            ),
            "debian",
            "/etc/environment-modules/modules",
        ),
        (ModuleSystem("lmod", ("/etc/lmod/modules", "/usr/share/lmod/lmod/modulefiles/")), "debian", "/etc/lmod/modules"),
        (ModuleSystem("lmod", ("/opt/site/modulefiles/", "/usr/share/lmod/lmod/modulefiles")), "debian", "/opt/site/modulefiles"),
        # no module command yet: what the family's environment-modules package gives (--check predicts it)
        (ModuleSystem("none", ()), "debian", "/etc/environment-modules/modules"),
        (ModuleSystem("none", ()), "rhel", "/etc/modulefiles"),
        (None, "unknown", "/etc/modulefiles"),
    ],
)
def test_the_site_folder_is_where_the_node_s_module_command_looks(system, family, folder):
    assert site_folder(system, family) == folder


def test_the_operation_registers_kind_and_folder_and_changes_nothing():
    operation = OPERATIONS["module_system"]
    current = {MODULES: ModuleSystem("lmod", ("/etc/lmod/modules",)), OS: OsRelease("debian", (), "12")}
    assert operation.plan({}, current) == [] and set(operation.requests({})) == {MODULES, StateKey("os")}
    assert operation.result({}, current) == {"kind": "lmod", "folder": "/etc/lmod/modules"}
