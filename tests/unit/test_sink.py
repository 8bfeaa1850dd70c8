import pyarrow as pa

from mirrord.sink import _headers, _runs


def test_a_task_writes_the_partitions_coalesced_into_it_one_run_each_in_order():
    batch = pa.RecordBatch.from_pydict({"topic": ["a", "a", "b", "b", "b", "c"], "partition": [0, 0, 0, 0, 1, 0],
                                        "offset": [5, 6, 0, 1, 7, 3]})
    assert [(t, p, r.column("offset").to_pylist()) for t, p, r in _runs(batch)] == [
        ("a", 0, [5, 6]), ("b", 0, [0, 1]), ("b", 1, [7]), ("c", 0, [3])]


def test_headers_keep_order_repeats_and_null_values():
    kv = pa.struct([("key", pa.string()), ("value", pa.binary())])
    column = pa.array([None, [], [{"key": "h", "value": b"1"}, {"key": "h", "value": None}]], pa.list_(kv))
    assert _headers(column) == [None, None, [("h", b"1"), ("h", None)]]
    assert _headers(pa.array([None, []], pa.list_(kv))) == [None, None]
