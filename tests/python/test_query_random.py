"""Query streams with random plans against gpujoind, each answer checked with
the pure-Python reference of docs/api.md (query_model.py).

Each seed builds one to three indexes (uint32 and uint64 words, a STRING key
schema, an (INT64, STRING) composite; lowest_row or keep_all; payload of every
payload type with nulls), sends a few plans (lookups of every join kind, some
keyed by an earlier lookup's payload, filters, an aggregate with or without
group_by, projections and limits, steps after the aggregate) over batches with
nulls, duplicates, missing keys, negative and out-of-range integers and strings
that differ in one byte, and compares rows, order, nulls, types, every step's
rows_in/rows_out and the versions each lookup reports.

GPUJOIN_QUERY_SEEDS (default 60, about 5 s) sets how many seeds run, GPUJOIN_QUERY_SEED
the first one; a failure names its seed and plan, and reruns alone with
    GPUJOIN_QUERY_SEED=17 GPUJOIN_QUERY_SEEDS=1 /usr/bin/python3 tests/python/run_package_tests.py \
        --gpujoind build/bin/gpujoind --stubs-dir build/python -k random_plans
($GPUJOIN_TEST_BACKEND=cuda runs it on the CUDA backend.)
"""
import math
import os
import random
import re

import grpc

import pytest
from google.protobuf import text_format

from gpujoin._proto import pb

import query_model as qm
from query_columns import FLOAT_TYPES, INT_TYPES, encode, f32, kind_of, type_name
from conftest import Router
from query_support import Connection, Interactive, batch_columns, start

SEEDS = int(os.environ.get("GPUJOIN_QUERY_SEEDS", "60"))
FIRST_SEED = int(os.environ.get("GPUJOIN_QUERY_SEED", "1"))
T = pb  # ColumnType values are module constants of pb

STRINGS = [b"", b"a", b"A", b"ab1", b"ab2", b"ab", b"o'k", "\u00e9".encode(), "\u00e8".encode(),
           b"sku-10", b"sku-11", b"x" * 20, b"a b"]
WORD_KEYS = list(range(12))
U32_BIG = [2**31 + 7, 2**32 - 2]
U64_BIG = [2**32 - 1, 2**32 + 3, 2**63 + 1, 2**64 - 2]
SIGNED_ODD = [-1, -2, -2**31, -2**63, 2**32 + 3, 2**32 + 5]
COMPOSITE_T = [0, 1, -1, 7, 2**62, -2**63]


@pytest.fixture(scope="module")
def conn(pytestconfig):
    server = start(pytestconfig, "--max-aggregate-groups=100000")
    c = Connection(server.address)
    yield c
    c.close()
    assert server.stop() == 0, "".join(server.log)


# ----------------------------------------------------------------- values


def fits(t, v):
    _, lo, hi = INT_TYPES[t]
    return lo <= v <= hi


def int_value(rng, t, key_like=False):
    """An integer of column type t: often a word key, sometimes a missing key,
    a big one, a negative or out-of-range one (clipped to what t holds)."""
    pools = [WORD_KEYS, [12, 13, 40, 99], U32_BIG, U64_BIG, SIGNED_ODD, COMPOSITE_T]
    weights = [6, 2, 1, 1, 1, 1] if key_like else [4, 2, 1, 1, 2, 1]
    for _ in range(20):
        v = rng.choice(rng.choices(pools, weights)[0])
        if fits(t, v):
            return v
    return rng.randrange(0, 12)


def float_value(rng, t):
    r = rng.random()
    if r < 0.05:
        v = rng.choice([math.nan, math.inf, -math.inf, -0.0])
    elif r < 0.1:
        v = rng.choice([0.1, 1e6 + 0.5, -2.5e5])
    else:
        v = rng.randrange(-800, 800) / 8
    return f32(v) if t == T.COLUMN_TYPE_FLOAT32 else v


def value(rng, t, null_rate=0.15, key_like=False):
    if rng.random() < null_rate:
        return None
    if t in INT_TYPES:
        return int_value(rng, t, key_like)
    if t in FLOAT_TYPES:
        return float_value(rng, t)
    if t == T.COLUMN_TYPE_BOOL:
        return rng.random() < 0.5
    return rng.choice(STRINGS)


# ----------------------------------------------------------------- indexes

PAYLOAD_TYPES = [("pi32", T.COLUMN_TYPE_INT32), ("pi64", T.COLUMN_TYPE_INT64),
                 ("pu32", T.COLUMN_TYPE_UINT32), ("pu64", T.COLUMN_TYPE_UINT64),
                 ("pf32", T.COLUMN_TYPE_FLOAT32), ("pf64", T.COLUMN_TYPE_FLOAT64),
                 ("pb", T.COLUMN_TYPE_BOOL), ("ps", T.COLUMN_TYPE_STRING),
                 ("fk", T.COLUMN_TYPE_INT64)]
INDEX_KINDS = ["u32", "u64", "str", "comp"]


def build_key(rng, kind):
    """A build row's key and the key the model keeps it under (None: invalid)."""
    if kind == "u32":
        k = rng.choice(WORD_KEYS + U32_BIG) if rng.random() > 0.05 else 2**32 - 1
        return k, (None if k == 2**32 - 1 else k)
    if kind == "u64":
        k = rng.choice(WORD_KEYS + U64_BIG) if rng.random() > 0.05 else 2**64 - 1
        return k, (None if k == 2**64 - 1 else k)
    if kind == "str":
        k = (None if rng.random() < 0.05 else rng.choice(STRINGS),)
        return k, (None if k[0] is None else k)
    k = (None if rng.random() < 0.05 else rng.choice(COMPOSITE_T),
         None if rng.random() < 0.05 else rng.choice(STRINGS[:6]))
    return k, (None if None in k else k)


def make_index(conn, rng, name, kind):
    keep_all = rng.random() < 0.5
    payload_spec = rng.sample(PAYLOAD_TYPES, rng.randint(0, len(PAYLOAD_TYPES)))
    if "fk" not in dict(payload_spec) and rng.random() < 0.5:
        payload_spec.append(("fk", T.COLUMN_TYPE_INT64))
    n = rng.randint(0, 30)
    sent, kept = zip(*[build_key(rng, kind) for _ in range(n)]) if n else ((), ())
    payload = [(pn, pt, [value(rng, pt, key_like=pn == "fk") for _ in range(n)])
               for pn, pt in payload_spec]
    key_type = {"u32": pb.KEY_TYPE_UINT32, "u64": pb.KEY_TYPE_UINT64}.get(kind, pb.KEY_TYPE_COLUMNS)
    key_columns = {"str": [("sku", T.COLUMN_TYPE_STRING)],
                   "comp": [("tenant", T.COLUMN_TYPE_INT64), ("sku", T.COLUMN_TYPE_STRING)]}.get(kind, [])
    info = conn.build(name, key_type, list(sent), payload, keep_all, key_columns,
                      chunks=rng.randint(1, 3))
    ix = qm.Index(name, key_type, payload_spec, keep_all, key_columns)
    ix.build(kept, [{pn: pv[i] for pn, _, pv in payload} for i in range(n)], info.version)
    assert info.mutation_sequence == 0
    return ix


# ----------------------------------------------------------------- inputs

INPUT_COLUMNS = [("k32", T.COLUMN_TYPE_UINT32), ("k64", T.COLUMN_TYPE_UINT64),
                 ("ki32", T.COLUMN_TYPE_INT32), ("ki64", T.COLUMN_TYPE_INT64),
                 ("s", T.COLUMN_TYPE_STRING), ("t", T.COLUMN_TYPE_INT64),
                 ("f32", T.COLUMN_TYPE_FLOAT32), ("f64", T.COLUMN_TYPE_FLOAT64),
                 ("b", T.COLUMN_TYPE_BOOL), ("g", T.COLUMN_TYPE_INT32),
                 ("sp-ace", T.COLUMN_TYPE_STRING)]


def make_schema(rng):
    cols = [c for c in INPUT_COLUMNS if rng.random() < 0.85]
    rng.shuffle(cols)
    return cols or INPUT_COLUMNS[:1]


def make_batch(rng, schema, rows):
    cols = []
    for name, t in schema:
        if name == "g":
            cols.append([None if rng.random() < 0.1 else rng.randrange(-2, 3) for _ in range(rows)])
        elif name == "t":
            cols.append([None if rng.random() < 0.1 else rng.choice(COMPOSITE_T)
                         for _ in range(rows)])
        else:
            cols.append([value(rng, t, key_like=True) for _ in range(rows)])
    return cols


# ----------------------------------------------------------------- plans


def literal(rng, kind, sample=None):
    """A literal of `kind`, often a value from the data (`sample`), or one
    byte away from it."""
    if kind == "bool":
        v = rng.random() < 0.5
        return qm.Lit("bool", v, rng.choice(["true", "TRUE", "True"] if v else ["false", "FALSE"]))
    if kind == "string":
        v = sample if isinstance(sample, bytes) and rng.random() < 0.6 else rng.choice(STRINGS)
        return qm.Lit("string", v, qm.string_text(v))
    if kind == "int" or rng.random() < 0.3:
        if isinstance(sample, int) and not isinstance(sample, bool) and rng.random() < 0.6:
            v = sample + rng.choice([-1, 0, 0, 1])
        else:
            v = rng.choice(WORD_KEYS + [-1, -5, 2**32 - 1, 2**64 - 1, -2**63, 2**63 - 1])
        v = max(-2**63, min(2**64 - 1, v))
        return qm.Lit("int", v, str(v))
    if isinstance(sample, float) and math.isfinite(sample) and rng.random() < 0.5:
        v = sample
    else:
        v = rng.randrange(-800, 800) / 8 + rng.choice([0, 0.0625])
    text = repr(float(v))
    assert "e" not in text and "n" not in text, text
    return qm.Lit("float", float(v), text)


def make_expr(rng, cols, sample, depth=0):
    r = rng.random()
    if depth < 2 and r < 0.35:
        a, b = make_expr(rng, cols, sample, depth + 1), make_expr(rng, cols, sample, depth + 1)
        return (qm.And if rng.random() < 0.5 else qm.Or)(a, b)
    if depth < 3 and r < 0.45:
        return qm.Not(make_expr(rng, cols, sample, depth + 1))
    name, t = rng.choice(cols)
    kind = kind_of(t)
    s = sample(name)
    r = rng.random()
    if r < 0.15:
        return qm.IsNull(name, rng.random() < 0.5)
    if r < 0.35:
        return qm.In(name, rng.random() < 0.4, [literal(rng, kind, s) for _ in range(rng.randint(1, 4))])
    ops = ["=", "==", "!=", "<>"] if kind == "bool" else ["=", "==", "!=", "<>", "<", "<=", ">", ">="]
    return qm.Cmp(name, rng.choice(ops), literal(rng, kind, s))


class PlanMaker:
    """Random valid plans over a schema and live indexes; keeps the filter
    trees beside the plan (position -> tree)."""

    def __init__(self, rng, schema, indexes, samples):
        self.rng, self.indexes, self.samples = rng, indexes, samples
        self.cols = list(schema)
        self.steps, self.filters = [], {}
        self.lookups = 0
        # Float sums and means are compared within a tolerance, so no filter
        # may test them (a row near the literal could go either way).
        self.approx = set()

    def names(self):
        return {n for n, _ in self.cols}

    def sample(self, name):
        # A lookup's payload column is named prefix + its name in the index.
        pool = self.samples.get(name) or next(
            (v for k, v in self.samples.items() if name.endswith(k)), None)
        return self.rng.choice(pool) if pool else None

    def lookup(self):
        rng = self.rng
        options = []
        for ix in self.indexes:
            if ix.key_type == pb.KEY_TYPE_COLUMNS:
                per = [[n for n, t in self.cols if t == kt] for _, kt in ix.key_columns]
                if all(per):
                    options.append((ix, [rng.choice(p) for p in per]))
            else:
                ints = [n for n, t in self.cols if t in INT_TYPES]
                if ints:
                    options.append((ix, [rng.choice(ints)]))
        if not options:
            return False
        ix, key = rng.choice(options)
        i = len(self.steps)
        select = rng.sample([n for n, _ in ix.payload], rng.randint(0, len(ix.payload)))
        prefix = rng.choice([f"l{i}_", f"l{i}.", f"x-{i}-", f"{i}q"])
        found = "" if f"{ix.name}.found" not in self.names() and rng.random() < 0.6 else f"found-{i}"
        kind = rng.choice([0, pb.JOIN_KIND_INNER, pb.JOIN_KIND_LEFT_OUTER, pb.JOIN_KIND_LEFT_SEMI,
                           pb.JOIN_KIND_LEFT_ANTI])
        step = pb.LookupStep(index=ix.name, key=key, select=select, prefix=prefix, kind=kind,
                             found_column=found)
        self.steps.append(pb.PlanStep(lookup=step))
        payload = dict(ix.payload)
        self.cols += [(prefix + n, payload[n]) for n in select]
        self.cols.append((found or f"{ix.name}.found", T.COLUMN_TYPE_BOOL))
        self.lookups += 1
        return True

    def filter(self):
        cols = [(n, t) for n, t in self.cols if n not in self.approx]
        if not cols:
            return False
        e = make_expr(self.rng, cols, self.sample)
        self.filters[len(self.steps)] = e
        self.steps.append(pb.PlanStep(filter=pb.FilterStep(where=qm.render(e, self.rng))))
        return True

    def project(self):
        rng = self.rng
        if not self.cols:
            return False
        keep = rng.sample(self.cols, rng.randint(1, len(self.cols)))
        if rng.random() < 0.15:
            keep.append(rng.choice(keep))  # a column twice, under another name
        out, used = [], set()
        for j, (n, t) in enumerate(keep):
            new = n if n not in used and rng.random() < 0.6 else f"r{len(self.steps)}_{j}"
            used.add(new)
            out.append((n, new, t))
        self.steps.append(pb.PlanStep(project=pb.ProjectStep(columns=[
            pb.ProjectColumn(column=n, name="" if new == n and rng.random() < 0.5 else new)
            for n, new, _ in out])))
        self.cols = [(new, t) for _, new, t in out]
        self.approx = {new for n, new, _ in out if n in self.approx}
        return True

    def limit(self):
        rows = self.rng.choice([0, 1, 2, 3, 5, 8, 20, 1000])
        self.steps.append(pb.PlanStep(limit=pb.LimitStep(rows=rows)))
        return True

    def aggregate(self):
        rng = self.rng
        groupable = [n for n, t in self.cols if t in INT_TYPES or t in
                     (T.COLUMN_TYPE_BOOL, T.COLUMN_TYPE_STRING)]
        group_by = rng.sample(groupable, min(len(groupable), rng.choice([0, 1, 1, 2])))
        numeric = [n for n, t in self.cols if t in INT_TYPES or t in FLOAT_TYPES]
        types = dict(self.cols)
        measures, used = [], set(group_by)
        for j in range(rng.randint(1, 4)):
            op = rng.choice(list(qm.OP_NAMES))
            if op == pb.AGGREGATE_OP_COUNT:
                column = rng.choice([""] + [n for n, _ in self.cols]) if self.cols else ""
            elif numeric:
                column = rng.choice(numeric)
            else:
                op, column = pb.AGGREGATE_OP_COUNT, ""
            m = pb.Measure(op=op, column=column)
            if qm.measure_name(m) in used or rng.random() < 0.2:
                m.name = f"m{j}"
            used.add(qm.measure_name(m))
            measures.append(m)
        self.steps.append(pb.PlanStep(aggregate=pb.AggregateStep(group_by=group_by,
                                                                 measures=measures)))
        self.cols = [(g, types[g]) for g in group_by] + \
            [(qm.measure_name(m), qm.measure_type(m, types.get(m.column))) for m in measures]
        self.approx = {qm.measure_name(m) for m in measures if m.op == pb.AGGREGATE_OP_MEAN or (
            m.op == pb.AGGREGATE_OP_SUM and types[m.column] in FLOAT_TYPES)}
        return True


def make_plan(rng, schema, indexes, samples):
    p = PlanMaker(rng, schema, indexes, samples)
    want_lookups = rng.randint(1, 3) if indexes else 0
    aggregate = rng.random() < 0.45
    ops = ["lookup"] * want_lookups + rng.choices(["filter", "filter", "project", "limit"],
                                                  k=rng.randint(0, 3))
    rng.shuffle(ops)
    # A projection before the last lookup could drop its key columns: keep it later.
    for op in ops:
        getattr(p, op)()
    if aggregate:
        p.aggregate()
        for op in rng.choices(["filter", "project", "limit", "lookup"], k=rng.randint(0, 2)):
            getattr(p, op)()
    if not p.steps:  # a plan has at least one step
        p.limit()
    return pb.Plan(steps=p.steps), p.filters


# ----------------------------------------------------------------- checks


def check_stats(got_steps, want, context, required):
    """Each StepStatistics the server sent is the reference's; the steps in
    `required` must be there."""
    by_step = {}
    for s in got_steps:
        assert s.step not in by_step, f"{context}: step {s.step} reported twice"
        by_step[s.step] = s
    for w in want:
        s = by_step.get(w.step)
        if s is None:
            assert w.step not in required, f"{context}: no statistics for step {w.step} ({w.kind})"
            continue
        where = f"{context}: step {w.step} ({w.kind})"
        assert s.kind == w.kind, f"{where}: kind {s.kind!r}"
        assert s.rows_in == w.rows_in, f"{where}: rows_in {s.rows_in}, want {w.rows_in}"
        if w.rows_out is not None:
            assert s.rows_out == w.rows_out, f"{where}: rows_out {s.rows_out}, want {w.rows_out}"
        if w.kind == "lookup":
            assert s.index == w.index, f"{where}: index {s.index!r}"
            assert (s.index_version, s.mutation_sequence) == (w.index_version, w.mutation_sequence), \
                f"{where}: version {s.index_version}/{s.mutation_sequence}, " \
                f"want {w.index_version}/{w.mutation_sequence}"
            assert (s.statistics.found, s.statistics.missing) == (w.found, w.missing), \
                f"{where}: found/missing {s.statistics.found}/{s.statistics.missing}, " \
                f"want {w.found}/{w.missing}"


def check_rows(answer, want, context):
    assert answer.error is None, f"{context}: {answer.describe()}"
    assert answer.names == want.names, f"{context}: columns {answer.names}, want {want.names}"
    assert answer.types == want.types, \
        f"{context}: types {[type_name(t) for t in answer.types]}, " \
        f"want {[type_name(t) for t in want.types]}"
    assert answer.rows == want.rows, \
        f"{context}: {answer.rows} rows, want {want.rows}\n got: {answer.describe()}\n" \
        f"want: {list(zip(want.names, want.columns))}"
    for name, got, exp in zip(want.names, answer.columns, want.columns):
        for r, (g, w) in enumerate(zip(got, exp)):
            assert qm.matches_value(w, g), \
                f"{context}: column {name!r} row {r}: got {g!r}, want {w!r}\n" \
                f" got: {answer.describe()}\nwant: {list(zip(want.names, want.columns))}"


def check_groups(answer, stream, schema, context, flush_batch_stats=None):
    """An answer with the groups so far: the aggregate's statistics count the
    stream's rows in and its groups out, the later steps' the groups. A
    flush's answer (`flush_batch_stats`: its batch's statistics) also
    reports the steps before the aggregate for its batch."""
    names, types = [n for n, _ in schema], [t for _, t in schema]
    try:
        want, stats = stream.groups_answer(names, types)
    except qm.Overflow as e:
        assert answer.error is not None and answer.error.code == 11, \
            f"{context}: an integer sum ({e.measure}) leaves 64 bits, want OUT_OF_RANGE; " \
            f"{answer.describe()}"
        assert e.measure in answer.error.message, f"{context}: {answer.error.message!r}"
        return
    check_rows(answer, want, context)
    agg = stream.agg
    if flush_batch_stats is None:
        check_stats(answer.steps, stats, context, required=set(range(agg, len(stream.steps))))
        return
    # A flush ran its batch through the steps before the aggregate; from the
    # aggregate on, the statistics count the whole stream (docs/api.md, Aggregate).
    want_stats = [st for st in flush_batch_stats if st.step < agg] + stats
    check_stats(answer.steps, want_stats, context, required=set(range(len(stream.steps))))


def run_plan(conn, rng, indexes, schema, plan, filters):
    stream = qm.Stream(plan, filters, {ix.name: ix for ix in indexes},
                       [n for n, _ in schema], [t for _, t in schema])
    names, types = [n for n, _ in schema], [t for _, t in schema]
    requests, batches = [], []
    for j in range(rng.randint(1, 4)):
        rows = rng.choice([0, 1, 2, 5, 9, 16])
        cols = make_batch(rng, schema, rows)
        flush = stream.agg is not None and rng.random() < 0.3
        req = pb.QueryRequest(batch_id=1000 + j, columns=batch_columns(names, types, cols),
                              flush=flush)
        if j == 0:
            req.plan.CopyFrom(plan)
        requests.append(req)
        batches.append(qm.Table(names, types, cols))
    got = conn.query(requests)
    n = len(requests)
    want_count = n + (1 if stream.agg is not None else 0)
    assert len(got) == want_count, \
        f"{len(got)} answers to {n} requests, want {want_count}: " \
        + "; ".join(a.describe() for a in got)
    for j, (req, t, a) in enumerate(zip(requests, batches, got)):
        context = f"request {j} (batch_id {req.batch_id})"
        assert a.batch_id == req.batch_id, f"{context}: answered as batch {a.batch_id}"
        assert not a.final, f"{context}: final set on a batch's answer"
        result, stats = stream.batch(t)
        if stream.agg is None:
            check_rows(a, result, context)
            check_stats(a.steps, stats, context, required=set(range(len(plan.steps))))
            continue
        if req.flush:
            check_groups(a, stream, schema, context + " (flush)", flush_batch_stats=stats)
            continue
        assert a.error is None, f"{context}: {a.describe()}"
        assert a.rows == 0, f"{context}: an aggregate plan's batch answered with {a.rows} rows"
        check_stats(a.steps, stats, context, required=set(range(stream.agg + 1)))
    if stream.agg is not None:
        final = got[-1]
        context = "the end of the stream"
        assert final.final, f"{context}: `final` not set: {final.describe()}"
        assert final.batch_id == requests[-1].batch_id + 1, \
            f"{context}: batch_id {final.batch_id}, want {requests[-1].batch_id + 1}"
        check_groups(final, stream, schema, context)


def samples_of(rng, schema, indexes):
    """Values filters compare with: the data's own, so literals hit rows."""
    out = {}
    for name, t in schema:
        out[name] = [value(rng, t, 0, key_like=True) for _ in range(4)]
    for ix in indexes:
        for pn, pt in ix.payload:
            vals = [p[pn] for rows in ix.groups.values() for p in rows if p[pn] is not None]
            out.setdefault(pn, []).extend(vals[:6])
    return out


def run_seeds(conn, seeds, refused=None):
    """Random indexes and plans for each seed, every answer checked. With
    `refused` (a list), a plan the server refuses UNIMPLEMENTED (a router that
    cannot split it) is appended there instead of failing; its message must
    name the step."""
    for seed in seeds:
        rng = random.Random(seed)
        kinds = rng.sample(INDEX_KINDS, rng.randint(1, 3))
        indexes = [make_index(conn, rng, f"qr{seed}-{k}", k) for k in kinds]
        schema = make_schema(rng)
        for p in range(4):
            plan, filters = make_plan(rng, schema, indexes, samples_of(rng, schema, indexes))
            try:
                run_plan(conn, rng, indexes, schema, plan, filters)
            except grpc.RpcError as e:
                if refused is None or e.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                assert re.search(r"steps\[\d+\]", e.details()), e.details()
                refused.append(e.details())
            except AssertionError as e:
                raise AssertionError(
                    f"seed {seed} (GPUJOIN_QUERY_SEED={seed} GPUJOIN_QUERY_SEEDS=1), plan {p}:\n"
                    f"{text_format.MessageToString(plan)}\ninput {schema}\n{e}") from None
        for ix in indexes:
            conn.stub.DropIndex(pb.DropIndexRequest(name=ix.name), timeout=30)


@pytest.mark.timeout(max(120, SEEDS))  # a second a seed at most
def test_random_plans_match_the_reference(conn):
    run_seeds(conn, range(FIRST_SEED, FIRST_SEED + SEEDS))


@pytest.fixture(scope="module")
def router_conn(pytestconfig):
    """gpujoin-router over three shards (docs/operations.md "Sharding")."""
    binary = os.path.join(os.path.dirname(pytestconfig.getoption("--gpujoind")), "gpujoin-router")
    shards = [start(pytestconfig, "--max-aggregate-groups=100000", f"--shard={i}/3")
              for i in range(3)]
    router = Router(binary, [s.address for s in shards])
    c = Connection(router.address)
    yield c
    c.close()
    assert router.stop() == 0, "".join(router.log)
    for s in shards:
        assert s.stop() == 0, "".join(s.log)


@pytest.mark.timeout(max(120, SEEDS))
def test_random_plans_through_a_router_match_the_reference(router_conn):
    """The same plans through a router over three shards: the plans it splits
    (lookups sharing one input key, aggregates, trailing projects and limits)
    answer exactly as the reference; the others are refused UNIMPLEMENTED
    naming the step."""
    refused = []
    seeds = range(FIRST_SEED, FIRST_SEED + max(1, SEEDS // 2))
    run_seeds(router_conn, seeds, refused)
    assert len(refused) < 3 * len(seeds), f"nearly every plan was refused: {refused[:5]}"


def mutate(conn, ix, deletes, upserts):
    """One Mutate batch on word index `ix` (payload "v" INT64, "note" STRING),
    applied to the model too; returns the MutateResponse."""
    req = pb.MutateRequest(index=ix.name, batch_id=1)
    if deletes:
        req.delete_keys.values.v.extend(deletes)
    if upserts:
        req.keys.values.v.extend(k for k, _ in upserts)
        for name, t in ix.payload:
            req.payload.append(encode(name, t, [p[name] for _, p in upserts]))
    (r,) = conn.stub.Mutate(iter([req]), timeout=30)
    assert not r.HasField("error"), r.error
    ix.mutate(deletes, upserts)
    assert r.mutation_sequence == ix.mutation_sequence and r.index_version == ix.version
    return r


@pytest.mark.parametrize("keep_all", [False, True], ids=["lowest_row", "keep_all"])
def test_each_batch_reports_the_version_it_used(conn, keep_all):
    """An index rebuilt and mutated between the batches of one stream: every
    batch's lookups report the version and mutation sequence they saw and
    answer from exactly that state; an aggregate plan's lookup after the
    aggregate runs at the end of the stream, on the state then."""
    name = f"qv-{int(keep_all)}"
    payload = [("v", T.COLUMN_TYPE_INT64), ("note", T.COLUMN_TYPE_STRING)]
    ix = qm.Index(name, pb.KEY_TYPE_UINT32, payload, keep_all)

    def build(keys, seed):
        rows = [{"v": k * 10 + seed, "note": f"n{k}.{seed}".encode()} for k in keys]
        info = conn.build(name, pb.KEY_TYPE_UINT32, keys,
                          [(n, t, [r[n] for r in rows]) for n, t in payload], keep_all)
        ix.build(keys, rows, info.version)

    build([1, 2, 3, 5, 5, 8], 0)
    schema = [("k", T.COLUMN_TYPE_INT64), ("w", T.COLUMN_TYPE_INT32)]
    names, types = [n for n, _ in schema], [t for _, t in schema]
    row_plan = pb.Plan(steps=[
        pb.PlanStep(lookup=pb.LookupStep(index=name, key=["k"], select=["v", "note"],
                                         kind=pb.JOIN_KIND_LEFT_OUTER))])
    agg_plan = pb.Plan(steps=[
        pb.PlanStep(lookup=pb.LookupStep(index=name, key=["k"], select=["v"], prefix="a.")),
        pb.PlanStep(aggregate=pb.AggregateStep(group_by=["k"], measures=[
            pb.Measure(op=pb.AGGREGATE_OP_SUM, column="a.v"), pb.Measure(op=pb.AGGREGATE_OP_COUNT)])),
        pb.PlanStep(lookup=pb.LookupStep(index=name, key=["k"], select=["note"], prefix="b.",
                                         kind=pb.JOIN_KIND_LEFT_SEMI))])
    # Grouped by a string payload column only: it travels as dictionary codes,
    # labelled per batch, so its groups must hold across the rebuild (a new
    # dictionary, other codes) and the mutations (new values).
    label_plan = pb.Plan(steps=[
        pb.PlanStep(lookup=pb.LookupStep(index=name, key=["k"], select=["note"],
                                         kind=pb.JOIN_KIND_LEFT_OUTER)),
        pb.PlanStep(aggregate=pb.AggregateStep(group_by=["note"], measures=[
            pb.Measure(op=pb.AGGREGATE_OP_COUNT), pb.Measure(op=pb.AGGREGATE_OP_SUM, column="w")]))])
    streams = []
    for plan in (row_plan, agg_plan, label_plan):
        streams.append((plan, Interactive(conn.stub),
                        qm.Stream(plan, {}, {name: ix}, names, types)))
    keys = [1, 5, 12, 8, -1, None, 3, 2**32 + 5]
    changes = [
        lambda: mutate(conn, ix, [3], [(12, {"v": 120, "note": b"new"}),
                                       (1, {"v": 11, "note": None})]),
        lambda: build([5, 12, 2**32 - 2], 7),
        lambda: mutate(conn, ix, [12, 99], [(5, {"v": None, "note": b"five"})]),
        lambda: mutate(conn, ix, [], [(8, {"v": -8, "note": b""}), (8, {"v": -9, "note": b"9"})]),
    ]
    for j in range(len(changes) + 1):
        t = qm.Table(names, types, [keys, list(range(len(keys)))])
        req = pb.QueryRequest(batch_id=j, columns=batch_columns(names, types, t.columns))
        for plan, s, model in streams:
            r = pb.QueryRequest()
            r.CopyFrom(req)
            if j == 0:
                r.plan.CopyFrom(plan)
            a = s.ask(r)
            want, stats = model.batch(t)
            context = f"batch {j} of the {'aggregate' if model.agg is not None else 'row'} plan"
            assert a.batch_id == j, context
            if want is not None:
                check_rows(a, want, context)
            else:
                assert a.error is None and a.rows == 0, f"{context}: {a.describe()}"
            check_stats(a.steps, stats, context, required={0})
        if j < len(changes):
            changes[j]()
    for plan, s, model in streams:
        rest = s.close()
        if model.agg is None:
            assert rest == [], [a.describe() for a in rest]  # a row plan's half-close: no answer
            continue
        assert len(rest) == 1 and rest[0].final, [a.describe() for a in rest]
        check_groups(rest[0], model, schema, "the end of the aggregate plan's stream")
    conn.stub.DropIndex(pb.DropIndexRequest(name=name), timeout=30)


@pytest.fixture(scope="module")
def small_messages(pytestconfig):
    server = start(pytestconfig, "--max-message-bytes=4096")
    c = Connection(server.address)
    yield c
    c.close()
    assert server.stop() == 0, "".join(server.log)


def test_a_result_larger_than_a_message_comes_in_parts(small_messages):
    """--max-message-bytes 4096: a keep_all lookup expanding 12 rows into 1,200
    with strings answers in several messages of one batch_id, all but the last
    with `more`, each at its first_row; joined they are the reference's rows,
    and the statistics are the batch's."""
    conn = small_messages
    name = "qp-parts"
    keys = [i % 3 for i in range(300)]
    notes = [f"note-{i:04d}".encode() for i in range(300)]
    ix = qm.Index(name, pb.KEY_TYPE_UINT32, [("note", T.COLUMN_TYPE_STRING)], True)
    info = conn.build(name, pb.KEY_TYPE_UINT32, keys, [("note", T.COLUMN_TYPE_STRING, notes)],
                      keep_all=True)
    ix.build(keys, [{"note": n} for n in notes], info.version)
    schema = [("k", T.COLUMN_TYPE_UINT32), ("s", T.COLUMN_TYPE_STRING)]
    names, types = [n for n, _ in schema], [t for _, t in schema]
    plan = pb.Plan(steps=[pb.PlanStep(lookup=pb.LookupStep(index=name, key=["k"], select=["note"])),
                          pb.PlanStep(filter=pb.FilterStep(where="note <> 'note-0003'"))])
    stream = qm.Stream(plan, {1: qm.Cmp("note", "<>", qm.Lit("string", b"note-0003", ""))},
                       {name: ix}, names, types)
    cols = [[0, 1, 2, 7, None, 0, 1, 2, 0, 1, 2, 2], [b"x" * 40] * 12]
    got = conn.query([pb.QueryRequest(batch_id=9, plan=plan,
                                      columns=batch_columns(names, types, cols))])
    a = got[0]
    assert len(a.parts) > 1, f"{a.rows} rows in one message of at most 4096 bytes"
    assert all(p.more for p in a.parts[:-1]) and not a.parts[-1].more
    assert all(p.ByteSize() <= 4096 for p in a.parts), [p.ByteSize() for p in a.parts]
    want, stats = stream.batch(qm.Table(names, types, cols))
    check_rows(a, want, "the parts joined")
    check_stats(a.steps, stats, "the parts' statistics", required={0, 1})
    assert got[1:] == [], [x.describe() for x in got[1:]]


DOCUMENTED_FILTERS = [
    # (where, rows kept of DOC_BATCH) — each line a sentence of docs/api.md "Filter".
    ("big < 18446744073709551615", [0, 1, 2]),           # int64 vs 2^64 - 1 is simply less
    ("big > -9223372036854775809.5", [0, 2]),            # as float64: -2^63 equals it
    ("u >= 4294967295", [3]),
    ("u = 4294967295.0", [3]),                           # integer column, float literal
    ("x = 1", [0]), ("x != 1", [1, 2]),                  # NaN compares false except !=
    ("x <> 1", [1, 2]), ("x < 100", [0, 2]), ("not x < 100", [1]),
    ("x = 2.5", [2]), ("f32 = 0.1", []), ("f32 > 0.1", [0, 1]),  # float32 0.1 as float64
    ("s = 'o''k'", [1]), ("s < 'b'", [0]), ("s >= 'o'", [1, 2]),  # bytewise; quote doubled
    ("s = '\u00e9'", [2]), ("s in ('a', '\u00e8')", [0]),
    ("b = true", [0]), ("b == FALSE", [1]), ("b != TRUE", [1]),
    ("b = true or x = 1", [0]), ("x = 1 or b", None),    # `b` alone is no expression
    ("b = false and x = 1", []),
    ("(b = true or x is null) and not (x in (1, 3))", []),
    ("x is null", [3]), ("x IS NOT NULL", [0, 1, 2]), ("not x is null", [0, 1, 2]),
    ("x not in (1, 2.5)", [1]),                          # NaN not in: true; null: null
    ("x in (7)", []), ("\"x\" = 1", [0]), ("\"my-col\" = 3", [1]),
    # false and null is false; true or null is true; not null is null.
    ("not (b = true and x = 5)", [0, 1, 2]),
    ("b = false or x is not null", [0, 1, 2]),
    ("not (x = 1)", [1, 2]),
]
DOC_BATCH = [("big", T.COLUMN_TYPE_INT64, [2**63 - 1, -2**63, 0, None]),
             ("u", T.COLUMN_TYPE_UINT32, [0, 1, 2, 2**32 - 1]),
             ("x", T.COLUMN_TYPE_FLOAT64, [1.0, math.nan, 2.5, None]),
             ("f32", T.COLUMN_TYPE_FLOAT32, [f32(0.2), f32(0.1), None, f32(-1.0)]),
             ("s", T.COLUMN_TYPE_STRING, [b"a", b"o'k", "\u00e9".encode(), None]),
             ("b", T.COLUMN_TYPE_BOOL, [True, False, None, None]),
             ("my-col", T.COLUMN_TYPE_INT32, [1, 3, None, 0])]


@pytest.mark.parametrize("where,keep", DOCUMENTED_FILTERS, ids=[w for w, _ in DOCUMENTED_FILTERS])
def test_documented_filter_semantics(conn, where, keep):
    names = [n for n, _, _ in DOC_BATCH]
    types = [t for _, t, _ in DOC_BATCH]
    cols = [v for _, _, v in DOC_BATCH]
    plan = pb.Plan(steps=[pb.PlanStep(filter=pb.FilterStep(where=where))])
    (a, *rest) = conn.query([pb.QueryRequest(batch_id=1, plan=plan,
                                             columns=batch_columns(names, types, cols))])
    if keep is None:
        assert a.error is not None and a.error.code == 3, a.describe()
        return
    assert a.error is None, a.describe()
    want = qm.Table(names, types, cols).take(keep)
    check_rows(a, want, f"where {where!r}")


def test_groups_without_rows_and_messages_without_a_batch(conn):
    """No group_by: one group even when no row arrived (count 0, the other
    measures null). An aggregate plan answers each batch with no rows, a
    flush-only message (no columns: it carries no batch) with the groups so
    far, and the end of the stream with the groups."""
    names, types = ["x", "g"], [T.COLUMN_TYPE_INT32, T.COLUMN_TYPE_STRING]
    plan = pb.Plan(steps=[
        pb.PlanStep(filter=pb.FilterStep(where="x > 100")),
        pb.PlanStep(aggregate=pb.AggregateStep(measures=[
            pb.Measure(op=pb.AGGREGATE_OP_COUNT), pb.Measure(op=pb.AGGREGATE_OP_COUNT, column="g"),
            pb.Measure(op=pb.AGGREGATE_OP_SUM, column="x"), pb.Measure(op=pb.AGGREGATE_OP_MIN, column="x"),
            pb.Measure(op=pb.AGGREGATE_OP_MEAN, column="x", name="avg")]))])
    reqs = [pb.QueryRequest(batch_id=1, plan=plan,
                            columns=batch_columns(names, types, [[1, 2], [b"a", None]])),
            pb.QueryRequest(batch_id=2, flush=True),
            pb.QueryRequest(batch_id=3, columns=batch_columns(names, types, [[101, 300, None],
                                                                             [None, b"b", b"c"]])),
            pb.QueryRequest(batch_id=4, flush=True)]
    got = conn.query(reqs)
    assert [a.batch_id for a in got] == [1, 2, 3, 4, 5], [a.describe() for a in got]
    assert all(a.error is None for a in got), [a.describe() for a in got]
    empty = [[0], [0], [None], [None], [None]]
    assert got[0].rows == 0 and got[2].rows == 0
    assert got[1].names == ["count", "count_g", "sum_x", "min_x", "avg"]
    assert got[1].types == [T.COLUMN_TYPE_UINT64, T.COLUMN_TYPE_UINT64, T.COLUMN_TYPE_INT64,
                            T.COLUMN_TYPE_INT32, T.COLUMN_TYPE_FLOAT64]
    assert got[1].columns == empty, got[1].describe()
    assert got[3].columns == [[2], [1], [401], [101], [200.5]], got[3].describe()
    assert got[4].final and got[4].columns == got[3].columns, got[4].describe()


def test_a_dropped_index_fails_its_batches_in_band(conn):
    """Each batch uses the live version: while the index is dropped a batch is
    answered NOT_FOUND in-band and the stream goes on; once it is built again
    (same key and payload) the next batch runs on the new version."""
    name = "qd-drop"
    info = conn.build(name, pb.KEY_TYPE_UINT32, [1, 2], [("v", T.COLUMN_TYPE_INT64, [10, 20])])
    names, types = ["k"], [T.COLUMN_TYPE_UINT32]
    s = Interactive(conn.stub)
    plan = pb.Plan(steps=[pb.PlanStep(lookup=pb.LookupStep(index=name, key=["k"], select=["v"]))])
    batch = batch_columns(names, types, [[2, 1, 3]])
    a = s.ask(pb.QueryRequest(batch_id=1, plan=plan, columns=batch))
    assert a.error is None and a.columns == [[2, 1], [20, 10], [True, True]], a.describe()
    conn.stub.DropIndex(pb.DropIndexRequest(name=name), timeout=30)
    a = s.ask(pb.QueryRequest(batch_id=2, columns=batch))
    assert a.error is not None and a.error.code == 5 and name in a.error.message, a.describe()
    again = conn.build(name, pb.KEY_TYPE_UINT32, [3], [("v", T.COLUMN_TYPE_INT64, [30])])
    a = s.ask(pb.QueryRequest(batch_id=3, columns=batch))
    assert a.error is None and a.columns == [[3], [30], [True]], a.describe()
    assert a.steps[0].index_version == again.version > info.version
    assert s.close() == []
    conn.stub.DropIndex(pb.DropIndexRequest(name=name), timeout=30)


@pytest.mark.parametrize("first_kind", [pb.JOIN_KIND_INNER, pb.JOIN_KIND_LEFT_SEMI,
                                        pb.JOIN_KIND_LEFT_OUTER, pb.JOIN_KIND_LEFT_ANTI],
                         ids=["inner", "semi", "outer", "anti"])
def test_each_lookup_reports_the_statistics_of_its_own_input_rows(conn, first_kind):
    """Lookups in a row, some keyed by the batch's columns (which run together
    on the server, docs/api.md Lookup) and one by a column an earlier lookup
    made: every step's found and missing count the rows reaching it (expanded
    rows as often as they were expanded), found + missing = rows_in
    (regression: later lookups reported the first lookup's statistics)."""
    name = "qs-chain"
    ix = qm.Index(name, pb.KEY_TYPE_UINT32, [("v", T.COLUMN_TYPE_INT64)], False)
    info = conn.build(name, pb.KEY_TYPE_UINT32, [1, 2], [("v", T.COLUMN_TYPE_INT64, [2, 9])])
    ix.build([1, 2], [{"v": 2}, {"v": 9}], info.version)
    names, types = ["x"], [T.COLUMN_TYPE_INT64]
    plan = pb.Plan(steps=[
        pb.PlanStep(lookup=pb.LookupStep(index=name, key=["x"], kind=first_kind, select=["v"])),
        pb.PlanStep(lookup=pb.LookupStep(index=name, key=["x"], found_column="f2")),
        pb.PlanStep(lookup=pb.LookupStep(index=name, key=["x"], found_column="f3",
                                         kind=pb.JOIN_KIND_LEFT_OUTER)),
        pb.PlanStep(lookup=pb.LookupStep(index=name, key=["v"], found_column="f4",
                                         kind=pb.JOIN_KIND_LEFT_OUTER)),
        pb.PlanStep(lookup=pb.LookupStep(index=name, key=["x"], found_column="f5",
                                         kind=pb.JOIN_KIND_LEFT_SEMI))])
    stream = qm.Stream(plan, {}, {name: ix}, names, types)
    cols = [[5, 6, 1, 7, 2, None]]
    (a, *rest) = conn.query([pb.QueryRequest(batch_id=1, plan=plan,
                                             columns=batch_columns(names, types, cols))])
    want, stats = stream.batch(qm.Table(names, types, cols))
    check_rows(a, want, "the chain")
    check_stats(a.steps, stats, "the chain", required={0, 1, 2, 3, 4})
    conn.stub.DropIndex(pb.DropIndexRequest(name=name), timeout=30)
