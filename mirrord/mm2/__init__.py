"""MirrorMaker 2's periodic jobs and formats: offset syncs, translation, checkpoints, heartbeats, ACLs, configs."""
