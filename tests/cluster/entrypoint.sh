#!/bin/sh
# Test-cluster node start-up. Host keys are made by the test session before the containers
# start (mounted at /cluster/host), so the tests know every key in advance and can check
# them strictly; a node without one generates its own, as a fresh server would.
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
# The MPI user's own key (its public half is in authorized_keys): passwordless SSH between nodes.
if [ -f /cluster/mpi_key ]; then
  install -m 600 -o mpi -g mpi /cluster/mpi_key /home/mpi/.ssh/id_ed25519
fi
# The cluster's own known_hosts (all nodes' keys), so node-to-node SSH is checked too.
if [ -f /cluster/ssh_known_hosts ]; then
  install -m 644 /cluster/ssh_known_hosts /etc/ssh/ssh_known_hosts
fi
exec /usr/sbin/sshd -D -e
