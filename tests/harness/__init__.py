"""Real Apache Kafka brokers and helpers for the tests, the demo and the benchmarks."""
