"""Kafka administration: topics, configs, offsets and groups through confluent-kafka, and its logging."""
