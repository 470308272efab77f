#!/bin/sh
# Each container gets its own host keys at start, as a freshly installed server would.
set -e
ssh-keygen -A >/dev/null
if [ -f /cluster/authorized_keys ]; then
  install -m 600 -o mpi -g mpi /cluster/authorized_keys /home/mpi/.ssh/authorized_keys
fi
exec /usr/sbin/sshd -D -e
