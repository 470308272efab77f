"""The inventory: hosts, groups, racks, variables (model), host patterns, Ansible import."""
