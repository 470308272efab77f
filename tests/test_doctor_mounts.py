"""provision.doctor.mounts: which mount holds a dataset on each node, and doctor --dataset where
the inventory exports the path (issue 26: unmounted clients passed as "same on every node: 0 files")."""

from pathlib import Path

from provision.doctor import alike
from provision.doctor.model import Manifest, Mount, NodeReport
from provision.doctor.mounts import Export, check_exported, holding_mount, mounted_from, parse_mountinfo
from provision.doctor.sources import parse_datasets

REAL = (Path(__file__).parent / "fixtures" / "mountinfo" / "node-container.txt").read_text()
# proc(5) format; a real NFS mount cannot be made on this machine (no kernel NFS, no CAP_SYS_ADMIN).
NFS = "700 571 0:140 / /data/imagenet rw,relatime shared:90 - nfs4 10.0.0.73:/data/imagenet rw,vers=4.2,addr=10.0.0.73\n"
ODD = "701 571 0:141 / /mnt/My\\040Data rw,relatime - nfs 10.0.0.9:/exports/my\\040data rw\n"


def test_real_node_mountinfo_parsed():
    mounts = parse_mountinfo(REAL)
    assert len(mounts) == 28 and mounts[0] == Mount("/", "overlay", "overlay")
    assert holding_mount(mounts, "/data/imagenet") == Mount("/", "overlay", "overlay")  # a local folder
    assert holding_mount(mounts, "/etc/hosts").fstype == "ext4"  # Docker's bind mount of the file
    assert holding_mount(mounts, "/dev/shm/x").source == "shm"


def test_an_nfs_mount_holds_the_dataset_and_escapes_are_read():
    mounts = parse_mountinfo(REAL + NFS + ODD)
    assert holding_mount(mounts, "/data/imagenet/train") == Mount("/data/imagenet", "nfs4", "10.0.0.73:/data/imagenet")
    assert holding_mount(mounts, "/data/imagenetX").point == "/"  # a prefix of the name is not a parent
    assert holding_mount(mounts, "/mnt/My Data/a") == Mount("/mnt/My Data", "nfs", "10.0.0.9:/exports/my data")


def test_parse_datasets_keeps_the_holding_mount():
    text = "".join(f"mountinfo {line}\n" for line in (REAL + NFS).splitlines()) + "dataset /data/imagenet\ncount 0 0\n"
    [manifest] = parse_datasets(text, ("/data/imagenet",))
    assert manifest.exists and manifest.mount == Mount("/data/imagenet", "nfs4", "10.0.0.73:/data/imagenet")


EXPORT = Export("/data/imagenet", "s1", ("10.0.0.73", "s1"))


def test_mounted_from_the_server_or_said_what_instead():
    nfs = Mount("/data/imagenet", "nfs4", "10.0.0.73:/data/imagenet")
    assert mounted_from(nfs, EXPORT, {"10.0.0.73", "s1"}, "/data/imagenet/train") == ""
    assert mounted_from(Mount("/data", "nfs4", "s1:/data"), EXPORT, {"s1"}, "/data/imagenet") == ""  # a parent export
    assert mounted_from(Mount("/", "overlay", "overlay"), EXPORT, {"s1"}, "/data/imagenet") == "a local folder (overlay /)"
    other = mounted_from(Mount("/data/imagenet", "nfs4", "10.9.9.9:/data/imagenet"), EXPORT, {"10.0.0.73"}, "/data/imagenet")
    assert other == "mounted from 10.9.9.9:/data/imagenet, not from s1:/data/imagenet"


def report(host, files, mount):
    manifest = Manifest("/data/imagenet", True, files, files * 10, f"{files:032x}", "", mount)
    return NodeReport(host, facts=None, datasets=(manifest,))


def test_unmounted_clients_are_named_and_the_server_is_not_blamed():
    local = Mount("/", "overlay", "overlay")
    nfs = Mount("/data/imagenet", "nfs4", "10.0.0.73:/data/imagenet")
    reports = [
        report("s1", 5, local),
        report("f1", 0, local),
        report("f2", 0, local),
        report("f4", 0, local),
        report("f3", 5, nfs),
    ]
    before = alike.check_datasets(reports, ("/data/imagenet",))[0]
    assert before.hosts == ("s1", "f3")  # today: the majority's empty folders win and the server is blamed
    [result] = check_exported(reports, ("/data/imagenet",), (EXPORT,), alike.check_datasets)
    assert result.status == "fail" and result.hosts == ("f1", "f2", "f4"), result
    assert result.detail.startswith(
        "not mounted from the NFS server s1 (s1:/data/imagenet) on 3 node(s): f1: a local folder (overlay /); "
        "f2: a local folder (overlay /); f4: a local folder (overlay /). Mount it there: `mount /data/imagenet`"
    )
    [good] = check_exported([reports[0], reports[4]], ("/data/imagenet",), (EXPORT,), alike.check_datasets)
    assert good.status == "pass" and "same on every node: 5 files" in good.detail
    # A path the inventory does not export is compared as before.
    [plain] = check_exported(reports, ("/data/imagenet",), (), alike.check_datasets)
    assert plain == before
