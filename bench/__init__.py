"""Benchmark harness: mirrord against MirrorMaker 2, MirrorMaker 1, kcat and the brokers' own limit."""
