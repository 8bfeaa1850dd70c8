"""The supervisor: the daemon's states, its query on the active host, cluster health, side jobs, reloads, systemd."""
