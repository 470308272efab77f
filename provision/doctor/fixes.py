"""What to do about a check that warns or fails: one line per check, for the people reading the
report (``doctor --json``'s ``fix``, the HTML page's last column). The check's own detail names
the hosts and the figures; this says where to look and which command repairs it.

>>> fix_for("perf nodes", "fail")[:48]
'Install iperf3 on the named nodes (Debian/Ubuntu'
>>> fix_for("time", "pass") is None
True
"""

from __future__ import annotations

from provision.doctor.model import PASS

# check name (or the first words of one: "dataset /data", "perf tcp eth0") -> what to do
FIXES = {
    "reach + job user": "Make the node answer SSH from here (provision probe HOST says why it does not) and create the job "
    "user with one uid:gid on every node: provision setup-cluster --tags users.",
    "pairwise ssh": "Give the job user passwordless SSH between every pair of nodes, host keys known: provision "
    "setup-cluster --tags ssh, then run doctor again.",
    "software": "Install the same versions on every node (the detail names the minority); Anaconda: provision "
    "setup-cluster --tags anaconda.",
    "hardware": "Check the named node's hardware against the others (a GPU that fell off the bus, memory not seated, SMT "
    "or cores switched off in the firmware); leave it out of the job until it matches.",
    "dataset": "Sync the dataset from a node that has it right (rsync -a), or mount it from the NFS server on the named "
    "nodes: provision setup-cluster --tags nfs.",
    "limits": "Set the limit on the named nodes as the detail says (/etc/security/limits.d/), with UsePAM yes in sshd_config "
    "so SSH sessions get it; then log in again.",
    "names": "Make every node resolve every node's inventory name to the same address (/etc/hosts from the inventory, or "
    "DNS), and not its own name to 127.0.1.1.",
    "network": "Give every node an IPv4 address in one subnet on the job's interface, with the same MTU everywhere.",
    "rdma": "Bring the named ports up (cable, switch port, subnet manager: opensm or the switch's), or leave the node out "
    "of an RDMA job.",
    "fabric": "Cable and configure each rail alike on every node (the same device:port on the same fabric, the same rate "
    "and MTU).",
    "time": "Run chrony or another NTP client on every node (chronyc tracking shows the offset).",
    "gpu health": "Drain the node (provision doctor --drain) and read nvidia-smi -q there: ECC errors and pending page "
    "retirement or row remapping need a GPU reset or a reboot; Xid lines: NVIDIA's Xid table.",
    "perf tcp": "A bad node: its link speed (ethtool IFACE), cable, switch port and what else runs there; a bad link: the "
    "cable or switch path between the two. provision launch --pick-healthy --perf leaves them out of a job.",
    "perf rdma": "Install perftest on the named nodes (apt-get install perftest; dnf install perftest); a bad node or link "
    "on a rail: its port rate (ibstat), cable and switch port.",
    "perf nccl": "Run the all-reduce by hand with NCCL_DEBUG=INFO from the first node to see which transport and NIC NCCL "
    "chose; build nccl-tests with MPI=1 where all_reduce_perf is missing.",
    "perf nodes": "Install iperf3 on the named nodes (Debian/Ubuntu: apt-get install iperf3; RHEL/Rocky: dnf install "
    "iperf3) and give each an IPv4 address on the job's interface.",
}


def fix_for(name: str, status: str) -> str | None:
    """What to do about check ``name`` (None when it passes, or for a check this table does not know):
    the longest name in :data:`FIXES` that is ``name`` or its first words."""
    if status == PASS:
        return None
    known = [key for key in FIXES if name == key or name.startswith(key + " ")]
    return FIXES[max(known, key=len)] if known else None
