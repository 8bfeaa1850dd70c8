"""mirrord: a Kafka-to-Kafka mirroring daemon whose data path runs on Apache Spark."""

__version__ = "0.1.0"
