"""Settings: mirrord.conf, the two .properties files, the replication policy, transforms, a flow derived from them."""
