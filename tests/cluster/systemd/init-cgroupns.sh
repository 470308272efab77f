#!/bin/sh
# PID 1 of the systemd test nodes (compose.yml's command): systemd in a cgroup namespace of its
# own. This host runs cgroup v1 (hybrid) and Docker gives a v1 container the HOST's cgroup
# namespace: the bind-mounted /sys/fs/cgroup shows the host's hierarchy roots, so slurmd's
# cgroup/v1 plugin would make /slurm_<node> at the host's roots (Slurm 22.05
# src/common/cgroup.c: cgroup_prepend "/slurm_%n"), shared by every container of that node name
# and left behind. Here PID 1 enters a new cgroup namespace (rooted at the container's own cgroup)
# and mounts the same hierarchies again, as that namespace sees them; then it becomes systemd.
# On a cgroup v2 host the same steps mount the one unified hierarchy. Needs SYS_ADMIN (to mount).
set -e
if [ "$1" != in-namespace ]; then exec unshare --cgroup /bin/sh "$0" in-namespace; fi
# (mount point, type, super options) of each cgroup file system under /sys/fs/cgroup, as Docker mounted them
mounts=$(awk '$5 ~ "^/sys/fs/cgroup" { split($0, half, " - "); split(half[2], f, " "); if (f[1] ~ /^cgroup2?$/) print $5, f[1], f[3] }' /proc/self/mountinfo)
umount -R /sys/fs/cgroup
if [ "$(echo "$mounts" | awk '{print $1}')" = /sys/fs/cgroup ]; then  # cgroup v2 only: one hierarchy at the top
  mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup
else
  mount -t tmpfs -o mode=755,nosuid,nodev,noexec tmpfs /sys/fs/cgroup
  echo "$mounts" | while read -r dir type options; do
    mkdir -p "$dir"
    if [ "$type" = cgroup2 ]; then
      mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$dir"
    else  # the controllers (or name=systemd) of this hierarchy, without the read-write flag
      mount -t cgroup -o "nosuid,nodev,noexec,$(echo "$options" | sed 's/^r[ow],//')" cgroup "$dir"
    fi
  done
fi
exec /sbin/init
