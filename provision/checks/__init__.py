"""Checks made for real after a setup-cluster run: passwordless SSH between every pair,
and what the NFS, Anaconda and Jupyter roles achieved on each node."""
