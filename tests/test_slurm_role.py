"""The Slurm role's settings and files (provision/templating/slurm_role.py): the two forms of the
inventory's `slurm:`, the checks made before any host is touched, the slurm.conf and cgroup.conf
the role writes, and its packages on a RHEL node (planned from the shipped playbook's own tasks)."""

import json

import pytest

from plan_support import minsky
from provision import __version__
from provision.operations import OPERATIONS
from provision.operations.base import StateKey
from provision.operations.os_state import OsRelease, PackageIndex
from provision.operations.platform import OS
from provision.plans.gres import plan_gres
from provision.playbook.model import load_playbook
from provision.resources import resource_dir
from provision.templating import TemplateError, render_template, render_value, template_loader
from provision.templating.slurm_role import slurm_files

# -- the admin's Slurm: node lines and gres.conf (the form before issue 36) ------------------


def _facts_folder(tmp_path, *names):

    folder = tmp_path / "facts"
    folder.mkdir()
    for name in names:
        (folder / f"{name}.json").write_text(json.dumps(minsky(name).to_dict()))
    return folder


def test_slurm_files_are_the_gres_plan_of_every_node_the_setting_names(tmp_path):

    folder = _facts_folder(tmp_path, "node01", "node02")
    groups = {"all": ["ctl", "node01", "node02"], "gpu": ["node02", "node01"]}
    got = render_value("{{ s | slurm_files(groups, d, '.') }}", {"s": {"nodes": "gpu"}, "groups": groups, "d": str(folder)})
    plan = plan_gres([minsky("node01"), minsky("node02")], __version__)
    assert got["gres_conf"] == plan.gres_conf and got["node_lines"] == plan.slurm_conf
    assert "NodeName=node[01-02] Name=gpu" in got["gres_conf"] and got["node_lines"].startswith("GresTypes=gpu\n")
    assert (got["conf"], got["gres"], got["nodes"]) == ("/etc/slurm/slurm.conf", "/etc/slurm/gres.conf", ["node01", "node02"])


def test_slurm_files_refuse_a_node_without_facts_naming_it_and_what_to_run(tmp_path):
    folder = _facts_folder(tmp_path, "node01")
    groups = {"all": ["ctl", "node01"]}
    with pytest.raises(TemplateError, match=r"no facts for host ctl: looked for .*/ctl\.json \(run `provision probe ctl"):
        slurm_files({}, groups, str(folder))  # nodes: all, and ctl was never probed


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"nodez": "gpu"}, "unknown key nodez"),
        ({"conf": "etc/slurm.conf"}, "conf must be an absolute path"),
        ({"nodes": "rack9"}, "'rack9' is no group or host"),
        ({"nodes": []}, "nodes must be a group or host name"),
        ("yes", "must be a mapping"),
    ],
)
def test_slurm_files_refuse_bad_settings(tmp_path, settings, message):
    folder = _facts_folder(tmp_path, "node01")
    with pytest.raises(TemplateError, match=message):
        slurm_files(settings, {"all": ["node01"]}, str(folder))


def test_slurm_files_read_facts_again_when_a_probe_rewrote_them(tmp_path):
    folder = _facts_folder(tmp_path, "node01")
    first = slurm_files({"facts_dir": "facts"}, {"all": ["node01"]}, None, str(tmp_path))["gres_conf"]
    (folder / "node01.json.tmp").write_text(json.dumps(minsky("node01", gpus=2).to_dict()))
    (folder / "node01.json.tmp").replace(folder / "node01.json")  # as write_atomic saves them
    second = slurm_files({"facts_dir": "facts"}, {"all": ["node01"]}, None, str(tmp_path))["gres_conf"]
    assert first.count("Name=gpu") == 4 and second.count("Name=gpu") == 2


# -- Slurm from zero: slurm.controller ---------------------------------------------------------
GROUPS = {"all": ["head", "node01", "node02", "login"], "gpu": ["node01", "node02"], "heads": ["head", "login"]}


def test_from_zero_the_controller_and_the_nodes_get_slurm_and_nothing_else_does(tmp_path):
    folder = _facts_folder(tmp_path, "node01", "node02")
    got = slurm_files({"controller": "head", "nodes": "gpu"}, GROUPS, str(folder), ".", "node01")
    assert (got["controller"], got["slurmctld_host"], got["install"], got["owns_conf"]) == ("head", "head", True, True)
    assert got["targets"] == ["head", "node01", "node02"] and got["nodes"] == ["node01", "node02"]
    assert (got["cluster_name"], got["partition"], got["cgroup"], got["conf_owner"]) == (
        "cluster", "batch", "/etc/slurm/cgroup.conf", "provision",
    )  # fmt: skip
    admin = slurm_files({"controller": "head.example.org", "nodes": "gpu", "conf_owner": "admin"}, {
        **GROUPS, "all": ["head.example.org", "node01", "node02"]}, str(folder), ".", "node01")  # fmt: skip
    assert (admin["owns_conf"], admin["install"], admin["slurmctld_host"]) == (False, True, "head")
    today = slurm_files({"nodes": "gpu"}, GROUPS, str(folder), ".", "node01")  # no controller: the admin's Slurm
    assert (today["install"], today["owns_conf"], today["controller"]) == (False, False, None)
    assert today["targets"] == GROUPS["all"]  # every host of the run gets the files, as before


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"controller": "ctl9", "nodes": "gpu"}, "slurm: controller: 'ctl9' is no group or host of the inventory"),
        ({"controller": ["head", "login"], "nodes": "gpu"}, r"slurm: controller names 2 hosts \(head, login\): give one"),
        ({"controller": "heads", "nodes": "gpu"}, r"slurm: controller names 2 hosts \(head, login\): give one"),
        ({"controller": [], "nodes": "gpu"}, "slurm: controller must be a group or host name"),
        ({"nodes": "gpu", "conf_owner": "provision"}, "conf_owner provision needs slurm.controller"),
        ({"controller": "head", "nodes": "gpu", "conf_owner": "me"}, "conf_owner 'me': provision .* or admin"),
        ({"controller": "head", "nodes": "gpu", "cluster_name": "GPU"}, "cluster_name 'GPU': 1-40 lower-case letters"),
        ({"controller": "head", "nodes": "gpu", "partition": "default"}, "partition 'default': one word .* not DEFAULT or ALL"),
        ({"controller": "head", "nodes": "gpu", "partition": "a b"}, "partition 'a b'"),
        ({"controller": "head", "nodes": "gpu", "munge_key": ""}, "munge_key must be a file on the controller"),
        ({"controller": "head", "nodes": "gpu", "cgroup": "cgroup.conf"}, "cgroup must be an absolute path"),
        # HealthCheckProgram= in the slurm.conf every node reads: one word, never a line of its own
        ({"controller": "head", "nodes": "gpu", "health_check": "/sbin/x\nSlurmdUser=mpi"}, r"health_check.*./sbin/x\\x0aSlurm"),
        ({"controller": "head", "nodes": "gpu", "health_check": "/sbin/node check"}, "health_check must be an absolute path"),
        ({"controller": "head", "nodes": "gpu", "health_check": "provision-node-check"}, "health_check must be an absolute path"),
        ({"nodes": "gpu", "health_check": ["/sbin/check"]}, "health_check must be an absolute path"),
        ({"controller": "head", "nodes": "gpu", "health_check": "/c", "health_check_interval": 0}, "interval 0: .* 1 to 65535"),
        ({"controller": "head", "nodes": "gpu", "health_check": "/c", "health_check_interval": "5m"}, "interval '5m': seconds"),
        (
            {"controller": "head", "nodes": "gpu", "health_check": "/c", "health_check_prolog": "yes"},
            "prolog must be true or false",
        ),
        ({"controller": "head", "nodes": "gpu", "health_check_prolog": True}, "health_check_prolog without health_check"),
        (
            {"controller": "head", "nodes": "gpu", "conf_owner": "admin", "health_check": "/c", "health_check_interval": 60},
            r"health_check_interval set lines of the slurm.conf provision writes; .* HealthCheckInterval=",
        ),
        ({"controller": "head", "nodes": ["node01", "node02", "login"]}, r"no facts for host login: .*provision probe login"),
    ],
)
def test_bad_slurm_settings_are_one_line_naming_them(tmp_path, settings, message):
    folder = _facts_folder(tmp_path, "node01", "node02")
    with pytest.raises(TemplateError, match=message) as refused:
        slurm_files(settings, GROUPS, str(folder), ".", "node01")
    assert "\n" not in str(refused.value)


def _render(name: str, slurm: dict, folder, host: str = "node01") -> str:
    context = {
        "slurm": slurm,
        "groups": GROUPS,
        "provision_facts_dir": str(folder),
        "inventory_dir": ".",
        "inventory_hostname": host,
    }
    return render_template(template_loader([]), name, context)


def test_slurm_conf_written_whole_names_the_controller_the_plugins_the_nodes_and_a_partition(tmp_path):
    folder = _facts_folder(tmp_path, "node01", "node02")
    slurm = {"controller": "head", "nodes": "gpu", "cluster_name": "gpucluster", "partition": "gpu"}
    conf = _render("slurm.conf.j2", slurm, folder)
    settings = dict(
        line.split("=", 1) for line in conf.splitlines() if line and not line.startswith(("#", "NodeName", "Partition"))
    )
    assert settings["ClusterName"] == "gpucluster" and settings["SlurmctldHost"] == "head"
    assert (settings["AuthType"], settings["CredType"]) == ("auth/munge", "cred/munge")
    # slurm.conf(5) of 22.05: "It is recommended to stack task/affinity,task/cgroup together"
    assert (settings["ProctrackType"], settings["TaskPlugin"]) == ("proctrack/cgroup", "task/affinity,task/cgroup")
    assert settings["GresTypes"] == "gpu" and settings["SelectType"] == "select/cons_tres"
    node_lines = plan_gres([minsky("node01"), minsky("node02")], __version__).slurm_conf
    assert node_lines in conf and conf.endswith(
        node_lines + "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
    )
    assert _render("slurm.conf.j2", slurm, folder, "head") == conf  # one file on every host
    assert "HealthCheck" not in conf and "Prolog" not in conf  # no node check asked for
    cgroup = _render("cgroup.conf.j2", slurm, folder)
    assert [line for line in cgroup.splitlines() if not line.startswith("#")] == [
        "ConstrainCores=yes", "ConstrainRAMSpace=yes", "ConstrainDevices=yes",
    ]  # fmt: skip


def test_slurm_conf_names_the_node_check_when_asked_its_interval_and_as_the_prolog_when_asked(tmp_path):
    folder = _facts_folder(tmp_path, "node01", "node02")
    slurm = {"controller": "head", "nodes": "gpu", "health_check": "/usr/local/sbin/provision-node-check"}

    def settings(conf: str) -> list[str]:
        return [line for line in conf.splitlines() if line.startswith(("HealthCheck", "Prolog"))]

    assert settings(_render("slurm.conf.j2", slurm, folder)) == [
        "HealthCheckProgram=/usr/local/sbin/provision-node-check",
        "HealthCheckInterval=300",
        "HealthCheckNodeState=ANY",  # a drained node is checked too: else it could never be resumed
    ]
    slurm.update(health_check_interval=3600, health_check_prolog=True)
    assert settings(_render("slurm.conf.j2", slurm, folder)) == [
        "HealthCheckProgram=/usr/local/sbin/provision-node-check",
        "HealthCheckInterval=3600",
        "HealthCheckNodeState=ANY",
        "Prolog=/usr/local/sbin/provision-node-check",
    ]


ROCKY = OsRelease("rocky", ("rhel", "centos", "fedora"), "9.4")
DEBIAN = OsRelease("debian", (), "12")


def _package_tasks() -> dict[str, dict]:
    plays = load_playbook(resource_dir("playbooks") / "slurm.yml")
    return {task.name: task.args for play in plays for task in play.tasks if task.op == "package"}


@pytest.mark.parametrize(
    ("release", "manager", "controller", "node"),
    [
        # RHEL: slurm (the client commands), slurm-slurmctld, slurm-slurmd and munge, with dnf: the
        # subpackages of SchedMD's own spec (SchedMD/slurm d525b6872a10, slurm-22-05-8-1, slurm.spec:1
        # "Name:		slurm", :224 "%package slurmctld", :233 "%package slurmd"): what `rpmbuild -ta` makes
        # of Slurm's tarball; EPEL's packages are taken to use the same names (not checked here)
        (ROCKY, "dnf", "dnf install -y -q munge slurm slurm-slurmctld", "dnf install -y -q munge slurm slurm-slurmd dbus"),
        (
            DEBIAN,
            "apt",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends munge slurmctld slurm-client",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends munge slurmd slurm-client dbus",
        ),
    ],
)
def test_the_roles_packages_per_os_family(release, manager, controller, node):
    tasks = _package_tasks()
    operation = OPERATIONS["package"]
    commands = []
    for name in ("Slurm controller's packages (munge, slurmctld)", "Slurm compute node's packages (munge, slurmd)"):
        args = operation.check_args(tasks[name])
        facts = {**dict.fromkeys(operation.requests(args)), StateKey("pkgmgr"): manager, OS: release}
        facts[StateKey("pkgindex")] = PackageIndex(manager, 60)
        facts.update({StateKey("candidate", n): "1" for n in ("munge", "slurm", "slurmctld", "slurmd", "slurm-client", "dbus")})
        facts.update({StateKey("candidate", n): "1" for n in ("slurm-slurmctld", "slurm-slurmd")})
        (change,) = operation.decide(args, facts)
        commands.append(change.command)
    assert commands == [controller, node]
