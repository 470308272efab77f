#!/bin/sh
# Test-cluster node set-up under systemd (provision-test-node.service, before ssh.service): what
# the sshd image's entrypoint.sh does, without starting sshd (systemd starts ssh.service).
# Host keys are made by the test session (mounted at /cluster/host) so the tests check them
# strictly; a node without one generates its own, as a fresh server would.
set -e
if [ -f /cluster/host/ssh_host_ed25519_key ]; then
  install -m 600 /cluster/host/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key
  install -m 644 /cluster/host/ssh_host_ed25519_key.pub /etc/ssh/ssh_host_ed25519_key.pub
  echo 'HostKey /etc/ssh/ssh_host_ed25519_key' >/etc/ssh/sshd_config.d/hostkey.conf
else
  ssh-keygen -A >/dev/null
fi
if [ -f /cluster/authorized_keys ]; then
  install -m 600 -o mpi -g mpi /cluster/authorized_keys /home/mpi/.ssh/authorized_keys
fi
if [ -f /cluster/mpi_key ]; then
  install -m 600 -o mpi -g mpi /cluster/mpi_key /home/mpi/.ssh/id_ed25519
fi
if [ -f /cluster/ssh_known_hosts ]; then
  install -m 644 /cluster/ssh_known_hosts /etc/ssh/ssh_known_hosts
fi
# A node given the TEST STAND-IN nvidia-smi (tests/cluster/slurm/standins/nvidia-smi, mounted by
# the compose file) gets the device files its two GPUs would have (NVIDIA's major 195, minors 0
# and 1; docker's default capabilities allow mknod), so slurmd finds its gres File=/dev/nvidia[0-1].
# Nothing can open them (docker's device cgroup): they exist only to be found.
if [ -x /usr/local/bin/nvidia-smi ]; then
  for i in 0 1; do [ -e /dev/nvidia$i ] || mknod -m 666 /dev/nvidia$i c 195 $i; done
fi
