"""The setup engine: reads each host's state in one framed round trip, lets the operations
decide, and applies only what differs (batched), hosts in parallel.

Where to look: :mod:`~provision.engine.runner` (plays, hosts, the run), :mod:`~.task` (a task's
life: render -> state needed -> decide -> queue), :mod:`~.statecache` (what is known of a host's
state, and since when), :mod:`~.hostrun` (one host: its pending changes and round trips),
:mod:`~.script` (the script of one round trip)."""
