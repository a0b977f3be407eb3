"""Null values in gpujoin.Client.aggregate: the masked rows of a numpy masked
array and the NA rows of a pandas Series do not contribute to their group (sum,
count of contributing rows, min/max, mean), in every batch cut. Typed values
carry them in the request's validity bitmap, which a recording stream checks;
the values under a null are extreme so that counting one would show.
"""
import numpy as np
import pytest

import gpujoin

pytestmark = pytest.mark.skipif(
    not gpujoin.client._HAS_TYPED_AGGREGATE,
    reason="proto/ has no AggregateRequest.typed_values (typed aggregation not in this API)")

GROUPS = 4  # group 3 gets only nulls, group 2 no rows
KEYS = np.array([0, 1, 0, 1, 3, 0, 1, 3, 0, 1, 0], np.uint32)
VALUES = np.array([5, -7, 9, 11, 13, -1 << 40, 1 << 40, 8, 2, 4, 1 << 41], np.int64)
NULL = np.array([0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1], bool)


def model(op, values=VALUES, null=NULL):
    """Per group: the exact result over the non-null rows (None for an empty group)."""
    out = []
    for g in range(GROUPS):
        v = [int(x) for x in values[(KEYS == g) & ~null].tolist()]
        if op == "sum":
            out.append(sum(v))
        elif op == "min":
            out.append(min(v) if v else None)
        elif op == "max":
            out.append(max(v) if v else None)
        else:
            out.append(sum(v) / len(v) if v else None)
    return out


def recording(client, monkeypatch):
    """The typed_values.validity bytes of every Aggregate request the client sends."""
    sent = []
    stream = client._stream

    def record(name, requests, finishes=lambda r: True, timeout=None):
        def watched():
            for r in requests:
                if name == "Aggregate":
                    sent.append(bytes(r.typed_values.validity))
                yield r
        return stream(name, watched(), finishes, timeout)

    monkeypatch.setattr(client, "_stream", record)
    return sent


def as_list(values):
    if isinstance(values, np.ma.MaskedArray):
        return [None if m else v for v, m in zip(values.data.tolist(), values.mask.tolist())]
    return values.tolist()


@pytest.mark.parametrize("batch_rows", [3, 8, 100])
@pytest.mark.parametrize("op", ["sum", "min", "max", "mean"])
def test_masked_values_do_not_contribute(client, monkeypatch, op, batch_rows):
    sent = recording(client, monkeypatch)
    values = np.ma.MaskedArray(VALUES, mask=NULL)
    r = client.aggregate(op, KEYS, values, groups=GROUPS, contributing_rows=True,
                         batch_rows=batch_rows)
    np.testing.assert_array_equal(r.contributing_rows,
                                  np.bincount(KEYS[~NULL], minlength=GROUPS))
    want = model(op)
    got = as_list(r.values)
    if op == "mean":
        assert got[:2] == pytest.approx(want[:2]) and np.isnan(got[2]) and np.isnan(got[3])
    else:
        assert got == want  # min/max: the empty and the all-null group are null
    # Every batch with a null carried a bitmap of its rows (others none).
    cuts = range(0, len(KEYS), batch_rows)
    expect = [np.packbits(~NULL[s:s + batch_rows], bitorder="little").tobytes()
              if NULL[s:s + batch_rows].any() else b"" for s in cuts]
    assert sent == expect


def test_nulls_and_the_mask_combine(client):
    mask = np.ones(len(KEYS), bool)
    mask[0] = False  # leaves out 5 of group 0
    values = np.ma.MaskedArray(VALUES, mask=NULL)
    r = client.aggregate("sum", KEYS, values, groups=GROUPS, mask=mask, contributing_rows=True)
    both = NULL | ~mask
    assert r.values.tolist() == model("sum", null=both)
    np.testing.assert_array_equal(r.contributing_rows, np.bincount(KEYS[~both], minlength=GROUPS))


def test_every_value_null(client):
    values = np.ma.MaskedArray(VALUES, mask=np.ones(len(KEYS), bool))
    r = client.aggregate("min", KEYS, values, groups=GROUPS, contributing_rows=True)
    assert as_list(r.values) == [None] * GROUPS
    assert r.contributing_rows.tolist() == [0] * GROUPS
    assert client.aggregate("sum", KEYS, values, groups=GROUPS).values.tolist() == [0] * GROUPS


@pytest.mark.parametrize("dtype", ["Int64", "UInt32", "Float64"])
def test_pandas_na_does_not_contribute(client, monkeypatch, dtype):
    pd = pytest.importorskip("pandas")
    sent = recording(client, monkeypatch)
    base = np.abs(VALUES) if dtype == "UInt32" else VALUES
    base = np.where(NULL, 0, base) if dtype == "UInt32" else base  # 2^40 does not fit uint32
    series = pd.Series(base, dtype=dtype).mask(pd.Series(NULL))
    assert series.isna().sum() == NULL.sum()
    r = client.aggregate("sum", KEYS, series, groups=GROUPS, contributing_rows=True)
    want = model("sum", values=base)
    assert [float(v) for v in r.values.tolist()] == [float(w) for w in want]
    np.testing.assert_array_equal(r.contributing_rows,
                                  np.bincount(KEYS[~NULL], minlength=GROUPS))
    assert sent == [np.packbits(~NULL, bitorder="little").tobytes()]
    m = client.aggregate("max", KEYS, series, groups=GROUPS)
    got = as_list(m.values) if dtype != "Float64" else [
        None if v != v else v for v in m.values.tolist()]
    assert [None if v is None else float(v) for v in got] == \
        [None if w is None else float(w) for w in model("max", values=base)]


def test_a_float_series_nan_is_null(client):
    pd = pytest.importorskip("pandas")
    values = pd.Series(np.where(NULL, np.nan, VALUES.astype(np.float64)))
    r = client.aggregate("mean", KEYS, values, groups=GROUPS)
    want = model("mean")
    assert r.values[:2].tolist() == pytest.approx(want[:2])


def test_float32_nulls_are_masked_out(client, monkeypatch):
    """float32 values have no validity on the wire: their nulls go into the mask."""
    sent = recording(client, monkeypatch)
    values = np.ma.MaskedArray(VALUES.astype(np.float32) / 4, mask=NULL)
    r = client.aggregate("sum", KEYS, values, groups=GROUPS)
    assert r.values.dtype == np.float32
    assert r.values.tolist() == [float(w) / 4 for w in model("sum")]
    assert sent == [b""]
