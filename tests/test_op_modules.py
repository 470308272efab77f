"""Where a site's modulefile goes (provision/operations/modules.py): the first folder under /etc on
the MODULEPATH the node's own login shell gets. Debian's two are read from the real packages in
tests/test_modules_cluster.py; RHEL's cannot run here (no registry for a RHEL-like image), so its
rule is kept as a case citing the package's build: microsoft/azurelinux
66bde0a38b020769f8fcba24fd6348390f17f3b1 SPECS/environment-modules/environment-modules.spec
(Fedora's, imported: "Update to 5.2.0 (from Fedora 38 (license: MIT))"), its %build line
`--with-modulepath=%{_datadir}/Modules/modulefiles:%{_sysconfdir}/modulefiles:%{_datadir}/modulefiles \\`."""

import pytest

from provision.operations import OPERATIONS
from provision.operations.base import FileState, StateKey
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


def _file(text: str) -> FileState:
    import hashlib

    return FileState("f", 0o644, "root", "root", hashlib.sha256(text.encode()).hexdigest(), text.encode())


ANACONDA = [{"prefix": "/opt/anaconda3"}]
DEBIAN = OsRelease("debian", (), "12")


def test_the_modulefile_goes_where_module_looks_and_provision_s_old_ones_go():
    """One task, every file it may touch read in the first round trip: the modulefile in the node's
    folder; provision's own file at /etc/modulefiles (where it wrote before it asked the node)
    removed; an admin's own file of that name left alone."""
    operation = OPERATIONS["conda_modules"]
    args = operation.check_args({"anaconda": ANACONDA, "form": "module"})
    keys = operation.requests(args)
    assert (
        StateKey("file", "/etc/environment-modules/modules/anaconda3") in keys
        and StateKey("file", "/etc/modulefiles/anaconda3") in keys
    )
    current = {
        MODULES: ModuleSystem("environment-modules", ("/etc/environment-modules/modules", "/usr/share/modules/modulefiles")),
        OS: DEBIAN,
        StateKey("file", "/etc/environment-modules/modules"): None,
        StateKey("file", "/etc/modulefiles/anaconda3"): _file("#%Module1.0\n## anaconda3: written by provision setup-cluster\n"),
        StateKey("file", "/etc/lmod/modules/anaconda3"): _file("#%Module1.0\n## the site's own\n"),
    }
    changes = operation.plan(args, current)
    described = [c.describe for c in changes]
    assert described == [
        "remove /etc/modulefiles/anaconda3",
        "create folder /etc/environment-modules/modules",
        "create /etc/environment-modules/modules/anaconda3",
    ], described
    assert b"prepend-path PATH /opt/anaconda3/bin" in changes[-1].content
    # converged: nothing to do
    done = {**current, StateKey("file", "/etc/modulefiles/anaconda3"): None}
    done[StateKey("file", "/etc/environment-modules/modules")] = __import__(
        "provision.operations.base", fromlist=["FileState"]
    ).FileState("d", 0o755)
    done[StateKey("file", "/etc/environment-modules/modules/anaconda3")] = _file(changes[-1].content.decode())
    assert operation.plan(args, done) == []
    # profile: provision's modulefiles removed everywhere, the admin's kept
    profile = operation.check_args({"anaconda": ANACONDA, "form": "profile"})
    assert [c.describe for c in operation.plan(profile, current)] == ["remove /etc/modulefiles/anaconda3"]


def test_a_site_folder_provision_does_not_know_is_named_in_the_refusal():
    import pytest as _pytest

    from provision.operations.base import OperationError

    operation = OPERATIONS["conda_modules"]
    args = operation.check_args({"anaconda": ANACONDA, "form": "module"})
    current = {MODULES: ModuleSystem("lmod", ("/etc/site/modules",)), OS: DEBIAN}
    with _pytest.raises(OperationError, match="set conda_modulefiles: /etc/site/modules"):
        operation.plan(args, current)
    named = operation.check_args({"anaconda": ANACONDA, "form": "module", "folder": "/etc/site/modules"})
    assert StateKey("file", "/etc/site/modules/anaconda3") in operation.requests(named)
    assert [c.describe for c in operation.plan(named, current)][-1] == "create /etc/site/modules/anaconda3"
