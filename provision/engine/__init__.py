"""The setup engine: reads each host's state in one framed round trip, lets the operations
decide, and applies only what differs (batched), hosts in parallel."""
