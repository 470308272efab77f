#!/bin/sh
# start-slurm.sh ctl|node: munged with the cluster's key, then slurmctld or slurmd (test set-up,
# run by the test session with docker exec once it has written /cluster/slurm/slurm.conf).
set -e
install -m 400 -o munge -g munge /cluster/slurm/munge.key /etc/munge/munge.key
install -d -m 755 -o munge -g munge /run/munge /var/lib/munge /var/log/munge
runuser -u munge -- /usr/sbin/munged
cp /cluster/slurm/slurm.conf /etc/slurm/slurm.conf
[ ! -f /cluster/slurm/gres.conf ] || cp /cluster/slurm/gres.conf /etc/slurm/gres.conf
install -d -m 755 -o slurm -g slurm /var/log/slurm /var/spool/slurmctld
install -d -m 755 /var/spool/slurmd
case "$1" in
  ctl) slurmctld ;;
  node)
    # The stand-in GPUs' device files (docker's default capabilities allow mknod).
    for i in 0 1; do [ -e /dev/nvidia$i ] || mknod /dev/nvidia$i c 195 $i; done
    slurmd ;;
  *) echo "usage: start-slurm.sh ctl|node" >&2; exit 2 ;;
esac
