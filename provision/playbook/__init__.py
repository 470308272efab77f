"""Playbooks: YAML plays of tasks (model), variables, and sandboxed Jinja2 templating."""
