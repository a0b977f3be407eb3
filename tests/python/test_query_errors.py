"""Query streams that break the contract (docs/api.md, "Query: plans in one
round trip"): every malformed plan field is INVALID_ARGUMENT (an unknown index
NOT_FOUND) naming the step and the field, answered in-band to the first
message and every later one; a bad batch is answered in-band and the stream
goes on; the limits (64 steps, --max-aggregate-groups, --max-result-bytes for
keep_all expansion) are RESOURCE_EXHAUSTED naming the limit; an integer sum
leaving 64 bits is OUT_OF_RANGE naming the measure.
"""
import re

import pytest

from gpujoin._proto import pb

from query_support import Connection, batch_columns, start

INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, OUT_OF_RANGE = 3, 5, 8, 11
T = pb

INPUT = [("k32", T.COLUMN_TYPE_UINT32, [1, 2, 3]),
         ("ki64", T.COLUMN_TYPE_INT64, [1, -2, 7]),
         ("s", T.COLUMN_TYPE_STRING, [b"a", b"b", None]),
         ("f", T.COLUMN_TYPE_FLOAT64, [0.5, None, 2.0]),
         ("b", T.COLUMN_TYPE_BOOL, [True, False, None]),
         ("i32", T.COLUMN_TYPE_INT32, [4, 5, 6])]


def columns(spec=INPUT):
    return batch_columns([n for n, _, _ in spec], [t for _, t, _ in spec], [v for _, _, v in spec])


@pytest.fixture(scope="module")
def conn(pytestconfig):
    server = start(pytestconfig)
    c = Connection(server.address)
    c.build("qe-words", pb.KEY_TYPE_UINT32, [1, 2, 3],
            [("v", T.COLUMN_TYPE_INT64, [10, 20, 30]),
             ("name", T.COLUMN_TYPE_STRING, [b"x", b"y", b"z"])])
    c.build("qe-comp", pb.KEY_TYPE_COLUMNS, [(1, b"a"), (7, b"b")],
            [("w", T.COLUMN_TYPE_INT32, [1, 2])],
            key_columns=[("tenant", T.COLUMN_TYPE_INT64), ("sku", T.COLUMN_TYPE_STRING)])
    yield c
    c.close()
    assert server.stop() == 0, "".join(server.log)


def lookup(**kw):
    return pb.PlanStep(lookup=pb.LookupStep(**kw))


def flt(where):
    return pb.PlanStep(filter=pb.FilterStep(where=where))


def agg(group_by=(), measures=()):
    return pb.PlanStep(aggregate=pb.AggregateStep(group_by=group_by, measures=measures))


def measure(op, column="", name=""):
    return pb.Measure(op=op, column=column, name=name)


def project(*cols):
    return pb.PlanStep(project=pb.ProjectStep(columns=[
        pb.ProjectColumn(column=c[0], name=c[1] if len(c) > 1 else "") for c in cols]))


def limit(rows):
    return pb.PlanStep(limit=pb.LimitStep(rows=rows))


GOOD_LOOKUP = lookup(index="qe-words", key=["k32"], select=["v", "name"])
F = "i32 >= 0 and "  # a good start, so that positions in the bad part have two digits


class Pos:
    """A position in the filter text, 0-based (or the 1-based one after it),
    of any of the given places (e.g. a column and its literal)."""

    def __init__(self, *places):
        self.places = places

    def found_in(self, msg):
        return any(re.search(rf"\b{p + d}\b", msg) for p in self.places for d in (0, 1))

    def __repr__(self):
        return f"position {' or '.join(str(p) for p in self.places)} (0-based)"
COUNT = measure(pb.AGGREGATE_OP_COUNT)


def assert_error(answer, code, step=None, words=(), context=""):
    """The answer is an in-band error of `code` whose message names step
    `step` (as steps[N] or step N) and every one of `words`."""
    where = f"{context}: {answer.describe()}"
    assert answer.error is not None, f"{where}: want error {code}"
    assert answer.error.code == code, f"{where}: want code {code}"
    msg = answer.error.message
    if step is not None:
        assert re.search(rf"\bsteps?\s*\[?\s*#?{step}\b", msg, re.I), \
            f"{where}: the message does not name step {step}"
    for w in words:
        if isinstance(w, Pos):
            assert w.found_in(msg), f"{where}: does not name {w}"
        elif isinstance(w, tuple):  # any of these
            assert any(x.lower() in msg.lower() for x in w), f"{where}: names none of {w}"
        else:
            assert w.lower() in msg.lower(), f"{where}: does not name {w!r}"


def plan_error(conn, steps, code, step, words, messages=3):
    """A plan refused whole: every message of the stream gets the error."""
    reqs = [pb.QueryRequest(batch_id=7 + j, columns=columns()) for j in range(messages)]
    reqs[0].plan.CopyFrom(pb.Plan(steps=steps))
    got = [a for a in conn.query(reqs) if not a.final]
    assert [a.batch_id for a in got] == [r.batch_id for r in reqs], [a.describe() for a in got]
    for a in got:
        assert_error(a, code, step, words, context=f"plan {steps}")
    return got[0].error.message


# Each case: (id, steps, code, the step named, words the message names)
PLAN_ERRORS = [
    ("lookup-unknown-index", [lookup(index="qe-nope", key=["k32"])], NOT_FOUND, 0,
     ["qe-nope"]),
    ("lookup-unknown-key-column", [lookup(index="qe-words", key=["nope"])], INVALID_ARGUMENT, 0,
     ["key", "nope"]),
    ("lookup-key-made-by-a-later-step", [lookup(index="qe-words", key=["l.v"]),
                                         lookup(index="qe-words", key=["k32"], select=["v"],
                                                prefix="l.")], INVALID_ARGUMENT, 0, ["l.v"]),
    ("lookup-no-key", [lookup(index="qe-words")], INVALID_ARGUMENT, 0, ["key"]),
    ("lookup-two-key-columns-for-a-word", [lookup(index="qe-words", key=["k32", "ki64"])],
     INVALID_ARGUMENT, 0, ["key"]),
    ("lookup-string-key-for-a-word", [lookup(index="qe-words", key=["s"])], INVALID_ARGUMENT, 0,
     ["key", "s"]),
    ("lookup-float-key-for-a-word", [lookup(index="qe-words", key=["f"])], INVALID_ARGUMENT, 0,
     ["key", "f"]),
    ("lookup-bool-key-for-a-word", [lookup(index="qe-words", key=["b"])], INVALID_ARGUMENT, 0,
     ["key", "b"]),
    ("key-schema-arity", [lookup(index="qe-comp", key=["ki64"])], INVALID_ARGUMENT, 0, ["key"]),
    ("key-schema-arity-3", [lookup(index="qe-comp", key=["ki64", "s", "s"])], INVALID_ARGUMENT, 0,
     ["key"]),
    ("key-schema-type", [lookup(index="qe-comp", key=["i32", "s"])], INVALID_ARGUMENT, 0,
     ["key", "i32"]),
    ("key-schema-order", [lookup(index="qe-comp", key=["s", "ki64"])], INVALID_ARGUMENT, 0,
     ["key"]),
    ("select-unknown-payload", [lookup(index="qe-words", key=["k32"], select=["v", "zz"])],
     INVALID_ARGUMENT, 0, ["select", "zz"]),
    ("select-twice", [lookup(index="qe-words", key=["k32"], select=["v", "v"], prefix="p")],
     INVALID_ARGUMENT, 0, ["select", "v"]),
    ("select-collides-with-an-earlier-step",
     [lookup(index="qe-words", key=["k32"], select=["name"]),
      lookup(index="qe-words", key=["ki64"], select=["name"], found_column="f2")],
     INVALID_ARGUMENT, 1, ["name"]),
    ("payload-collides-with-a-renamed-input", [project(("k32",), ("s", "v")), GOOD_LOOKUP],
     INVALID_ARGUMENT, 1, ["v"]),
    ("found-column-twice", [lookup(index="qe-words", key=["k32"]),
                            lookup(index="qe-words", key=["ki64"])], INVALID_ARGUMENT, 1,
     ["qe-words.found"]),
    ("found-column-is-an-input", [lookup(index="qe-words", key=["k32"], found_column="b")],
     INVALID_ARGUMENT, 0, ["found_column", "b"]),
    ("bad-join-kind", [lookup(index="qe-words", key=["k32"], kind=9)], INVALID_ARGUMENT, 0,
     ["kind", "9"]),
    ("filter-unknown-column", [GOOD_LOOKUP, flt("nope = 1")], INVALID_ARGUMENT, 1, ["nope"]),
    ("filter-after-project-dropped-it", [project(("k32",)), flt("s = 'a'")], INVALID_ARGUMENT, 1,
     ["s"]),
    ("filter-string-vs-number", [flt("k32 = 1 and s = 5")], INVALID_ARGUMENT, 0, [Pos(12, 16)]),
    ("filter-number-vs-string", [flt(F + "k32 = 'a'")], INVALID_ARGUMENT, 0, [Pos(13, 19)]),
    ("filter-bool-vs-number", [flt(F + "b = 1")], INVALID_ARGUMENT, 0, [Pos(13, 17)]),
    ("filter-float-vs-string", [flt(F + "f > 'x'")], INVALID_ARGUMENT, 0, [Pos(13, 17)]),
    ("filter-in-mixed-kinds", [flt(F + "ki64 in (1, 'a')")], INVALID_ARGUMENT, 0, [Pos(13, 25)]),
    ("filter-dangling-operator", [flt(F + "k32 >")], INVALID_ARGUMENT, 0, [Pos(17, 18)]),
    ("filter-two-operators", [flt(F + "k32 = = 5")], INVALID_ARGUMENT, 0, [Pos(19)]),
    ("filter-unclosed-parenthesis", [flt(F + "(k32 = 1")], INVALID_ARGUMENT, 0, [Pos(13, 21)]),
    ("filter-unterminated-string", [flt(F + "s = 'abc")], INVALID_ARGUMENT, 0, [Pos(17, 21)]),
    ("filter-empty-in", [flt(F + "k32 in ()")], INVALID_ARGUMENT, 0, [Pos(20, 21)]),
    ("filter-unknown-operator", [flt(F + "k32 ~ 1")], INVALID_ARGUMENT, 0, [Pos(17)]),
    ("filter-trailing-text", [flt(F + "k32 = 1 k32")], INVALID_ARGUMENT, 0, [Pos(21)]),
    ("filter-column-vs-column", [flt(F + "k32 = i32")], INVALID_ARGUMENT, 0, [Pos(19)]),
    ("filter-empty", [flt("")], INVALID_ARGUMENT, 0, ["where"]),
    ("filter-column-vs-column", [flt("k32 = i32")], INVALID_ARGUMENT, 0, [("6", "7")]),
    ("aggregate-sum-of-string", [agg(measures=[measure(pb.AGGREGATE_OP_SUM, "s")])],
     INVALID_ARGUMENT, 0, ["measures", "s"]),
    ("aggregate-mean-of-bool", [agg(measures=[measure(pb.AGGREGATE_OP_MEAN, "b")])],
     INVALID_ARGUMENT, 0, ["measures", "b"]),
    ("aggregate-min-of-string", [agg(measures=[COUNT, measure(pb.AGGREGATE_OP_MIN, "s")])],
     INVALID_ARGUMENT, 0, ["measures", "s"]),
    ("aggregate-measure-unknown-column", [agg(measures=[measure(pb.AGGREGATE_OP_MAX, "nope")])],
     INVALID_ARGUMENT, 0, ["nope"]),
    ("aggregate-count-unknown-column", [agg(measures=[measure(pb.AGGREGATE_OP_COUNT, "nope")])],
     INVALID_ARGUMENT, 0, ["nope"]),
    ("aggregate-sum-without-column", [agg(measures=[measure(pb.AGGREGATE_OP_SUM)])],
     INVALID_ARGUMENT, 0, ["measures"]),
    ("aggregate-group-by-float", [agg(["f"], [COUNT])], INVALID_ARGUMENT, 0, ["group_by", "f"]),
    ("aggregate-group-by-unknown", [agg(["nope"], [COUNT])], INVALID_ARGUMENT, 0,
     ["group_by", "nope"]),
    ("aggregate-group-by-twice", [agg(["k32", "k32"], [COUNT])], INVALID_ARGUMENT, 0,
     ["k32"]),
    ("aggregate-op-unspecified", [agg(measures=[measure(pb.AGGREGATE_OP_UNSPECIFIED, "k32")])],
     INVALID_ARGUMENT, 0, ["op"]),
    ("aggregate-op-unknown", [agg(measures=[measure(42, "k32")])], INVALID_ARGUMENT, 0,
     ["op", "42"]),
    ("aggregate-measure-names-twice", [agg(measures=[COUNT, COUNT])], INVALID_ARGUMENT, 0,
     ["count"]),
    ("aggregate-measure-named-as-group", [agg(["k32"], [measure(pb.AGGREGATE_OP_COUNT,
                                                                 name="k32")])],
     INVALID_ARGUMENT, 0, ["k32"]),
    ("two-aggregates", [agg(["k32"], [COUNT]), agg(measures=[COUNT])], INVALID_ARGUMENT, 1,
     ["aggregate"]),
    ("aggregate-then-old-column", [agg(["k32"], [COUNT]), flt("s = 'a'")], INVALID_ARGUMENT, 1,
     ["s"]),
    ("empty-project", [GOOD_LOOKUP, pb.PlanStep(project=pb.ProjectStep())], INVALID_ARGUMENT, 1,
     ["project"]),
    ("project-unknown", [project(("k32",), ("nope",))], INVALID_ARGUMENT, 0, ["nope"]),
    ("project-names-twice", [project(("k32", "x"), ("s", "x"))], INVALID_ARGUMENT, 0, ["x"]),
    ("project-keeps-a-name-twice", [project(("k32",), ("k32",))], INVALID_ARGUMENT, 0, ["k32"]),
    ("empty-step", [GOOD_LOOKUP, pb.PlanStep()], INVALID_ARGUMENT, 1, ()),
    ("no-steps", [], INVALID_ARGUMENT, None, ["step"]),  # a plan has at least one step
    # Column names follow payload column names: [A-Za-z0-9_.-]{1,128}.
    ("prefix-makes-a-bad-name", [lookup(index="qe-words", key=["k32"], select=["v"], prefix="p q")],
     INVALID_ARGUMENT, 0, ()),
    ("found-column-bad-name", [lookup(index="qe-words", key=["k32"], found_column="f/x")],
     INVALID_ARGUMENT, 0, ()),
    ("measure-bad-name", [agg(measures=[measure(pb.AGGREGATE_OP_COUNT, name="n n")])],
     INVALID_ARGUMENT, 0, ()),
    ("measure-name-too-long", [agg(measures=[measure(pb.AGGREGATE_OP_COUNT, name="n" * 129)])],
     INVALID_ARGUMENT, 0, ()),
    ("project-bad-name", [project(("k32", "k 32"))], INVALID_ARGUMENT, 0, ()),
]


@pytest.mark.parametrize("steps,code,step,words", [c[1:] for c in PLAN_ERRORS],
                         ids=[c[0] for c in PLAN_ERRORS])
def test_plan_errors_name_the_step_and_field(conn, steps, code, step, words):
    plan_error(conn, steps, code, step, words)


def test_a_plan_of_64_steps_runs_and_65_are_refused(conn):
    reqs = [pb.QueryRequest(batch_id=1, columns=columns(), plan=pb.Plan(steps=[limit(5)] * 64))]
    (a,) = [a for a in conn.query(reqs) if not a.final]
    assert a.error is None and a.rows == 3, a.describe()
    assert len(a.steps) == 64
    plan_error(conn, [limit(5)] * 65, RESOURCE_EXHAUSTED, None, ["64"])


@pytest.mark.parametrize("name", ["a b", "", "x" * 129, "caf\u00e9"], ids=["space", "empty", "long", "utf8"])
def test_input_column_names_follow_payload_column_names(conn, name):
    """An input column named outside [A-Za-z0-9_.-]{1,128}: the stream's first
    message (plan and first batch) is refused, and every later one."""
    spec = [(name, T.COLUMN_TYPE_INT64, [1, 2, 3])] + INPUT[1:]
    reqs = [pb.QueryRequest(batch_id=1, columns=columns(spec), plan=pb.Plan(steps=[limit(1)])),
            pb.QueryRequest(batch_id=2, columns=columns(spec))]
    got = [a for a in conn.query(reqs) if not a.final]
    assert [a.batch_id for a in got] == [1, 2]
    for a in got:
        assert_error(a, INVALID_ARGUMENT, None, ["columns[0]"])


def test_the_plan_is_required_on_the_first_message(conn):
    reqs = [pb.QueryRequest(batch_id=1, columns=columns()),
            pb.QueryRequest(batch_id=2, columns=columns())]
    got = [a for a in conn.query(reqs) if not a.final]
    assert [a.batch_id for a in got] == [1, 2]
    for a in got:
        assert_error(a, INVALID_ARGUMENT, None, ["plan"])


def test_a_plan_on_a_later_message_is_refused_in_band(conn):
    plan = pb.Plan(steps=[GOOD_LOOKUP])
    reqs = [pb.QueryRequest(batch_id=1, columns=columns(), plan=plan),
            pb.QueryRequest(batch_id=2, columns=columns(), plan=plan),
            pb.QueryRequest(batch_id=3, columns=columns())]
    got = [a for a in conn.query(reqs) if not a.final]
    assert [a.batch_id for a in got] == [1, 2, 3], [a.describe() for a in got]
    assert got[0].error is None and got[0].rows == 3, got[0].describe()
    assert_error(got[1], INVALID_ARGUMENT, None, ["plan"])
    assert got[2].error is None and got[2].rows == 3, got[2].describe()


BAD_BATCHES = [
    ("renamed-column", INPUT[:1] + [("KI64",) + INPUT[1][1:]] + INPUT[2:], ["KI64"]),
    ("another-type", INPUT[:1] + [("ki64", T.COLUMN_TYPE_UINT64, [1, 2, 7])] + INPUT[2:],
     ["ki64"]),
    ("a-column-less", INPUT[:-1], ["i32"]),
    ("a-column-more", INPUT + [("extra", T.COLUMN_TYPE_INT32, [1, 2, 3])], ["extra"]),
    ("lengths-differ", INPUT[:2] + [("s", T.COLUMN_TYPE_STRING, [b"a", b"b"])] + INPUT[3:],
     ["s", ("2", "3")]),
    ("a-name-twice", INPUT + [INPUT[0]], ["k32"]),
]


@pytest.mark.parametrize("plan", ["row", "aggregate"])
@pytest.mark.parametrize("spec,words", [c[1:] for c in BAD_BATCHES], ids=[c[0] for c in BAD_BATCHES])
def test_a_bad_batch_is_answered_in_band_and_the_stream_goes_on(conn, plan, spec, words):
    steps = [GOOD_LOOKUP, flt("k32 >= 2")]
    if plan == "aggregate":
        steps.append(agg(measures=[COUNT, measure(pb.AGGREGATE_OP_SUM, "v")]))
    reqs = [pb.QueryRequest(batch_id=1, columns=columns(), plan=pb.Plan(steps=steps)),
            pb.QueryRequest(batch_id=2, columns=columns(spec)),
            pb.QueryRequest(batch_id=3, columns=columns())]
    got = conn.query(reqs)
    batches = [a for a in got if not a.final]
    assert [a.batch_id for a in batches] == [1, 2, 3], [a.describe() for a in got]
    assert batches[0].error is None and batches[2].error is None, [a.describe() for a in got]
    assert_error(batches[1], INVALID_ARGUMENT, None, words)
    if plan == "row":
        assert batches[0].rows == batches[2].rows == 2, [a.describe() for a in got]
    else:
        # The bad batch adds nothing: two good batches of two rows each (v 20, 30).
        (final,) = [a for a in got if a.final]
        assert final.error is None and final.rows == 1, final.describe()
        assert final.columns == [[4], [100]], final.describe()


def test_columns_of_different_lengths_in_the_first_batch(conn):
    """The plan itself is good: the first batch's error is the batch's, and
    the next batch runs."""
    spec = INPUT[:2] + [("s", T.COLUMN_TYPE_STRING, [b"a", b"b"])] + INPUT[3:]
    reqs = [pb.QueryRequest(batch_id=1, columns=columns(spec), plan=pb.Plan(steps=[GOOD_LOOKUP])),
            pb.QueryRequest(batch_id=2, columns=columns())]
    got = [a for a in conn.query(reqs) if not a.final]
    assert [a.batch_id for a in got] == [1, 2]
    assert_error(got[0], INVALID_ARGUMENT, None, ["s"])
    assert got[1].error is None and got[1].rows == 3, got[1].describe()


def test_an_integer_sum_leaving_64_bits_is_out_of_range_naming_the_measure(conn):
    big = [("x", T.COLUMN_TYPE_INT64, [2**62, 2**62, -5]), ("g", T.COLUMN_TYPE_INT32, [0, 0, 1])]
    plan = pb.Plan(steps=[agg(["g"], [measure(pb.AGGREGATE_OP_SUM, "x", "total"), COUNT])])
    reqs = [pb.QueryRequest(batch_id=1, columns=columns(big), plan=plan)]
    got = conn.query(reqs)
    assert got[0].error is None, got[0].describe()
    assert got[-1].final, [a.describe() for a in got]
    assert_error(got[-1], OUT_OF_RANGE, None, ["total"])
    # The same column within range: exact (2^62 + 2^62 - 1 fits int64).
    ok = [("x", T.COLUMN_TYPE_INT64, [2**62, 2**62 - 1, -5]), ("g", T.COLUMN_TYPE_INT32, [0, 0, 1])]
    got = conn.query([pb.QueryRequest(batch_id=1, columns=columns(ok), plan=plan)])
    assert got[-1].final and got[-1].error is None, got[-1].describe()
    assert got[-1].columns == [[0, 1], [2**63 - 1, -5], [2, 1]], got[-1].describe()


# ----------------------------------------------------------------- limits


@pytest.fixture(scope="module")
def limited(pytestconfig):
    server = start(pytestconfig, "--max-aggregate-groups=10", "--max-result-bytes=256K")
    c = Connection(server.address)
    c.build("qe-many", pb.KEY_TYPE_UINT32, [5] * 4000 + [6],
            [("v", T.COLUMN_TYPE_INT64, list(range(4001)))], keep_all=True)
    yield c
    c.close()
    assert server.stop() == 0, "".join(server.log)


def test_more_groups_than_max_aggregate_groups(limited):
    plan = pb.Plan(steps=[agg(["k"], [COUNT])])
    few = [("k", T.COLUMN_TYPE_INT64, list(range(10)))]
    many = [("k", T.COLUMN_TYPE_INT64, list(range(10, 20)))]
    got = limited.query([pb.QueryRequest(batch_id=1, columns=columns(few), plan=plan)])
    assert got[-1].final and got[-1].error is None and got[-1].rows == 10, got[-1].describe()
    got = limited.query([pb.QueryRequest(batch_id=1, columns=columns(few), plan=plan),
                         pb.QueryRequest(batch_id=2, columns=columns(many))])
    errors = [a for a in got if a.error is not None]
    assert errors, [a.describe() for a in got]
    for a in errors:
        assert_error(a, RESOURCE_EXHAUSTED, None, ["max-aggregate-groups"])


def test_keep_all_expansion_beyond_max_result_bytes(limited):
    plan = pb.Plan(steps=[lookup(index="qe-many", key=["k"], select=["v"])])
    small = [("k", T.COLUMN_TYPE_INT64, [6, 5, 7])]
    huge = [("k", T.COLUMN_TYPE_INT64, [5] * 100)]  # 400,000 rows of 8-byte payload and more
    got = limited.query([pb.QueryRequest(batch_id=1, columns=columns(small), plan=plan),
                         pb.QueryRequest(batch_id=2, columns=columns(huge)),
                         pb.QueryRequest(batch_id=3, columns=columns(small))])
    got = [a for a in got if not a.final]
    assert [a.batch_id for a in got] == [1, 2, 3], [a.describe() for a in got]
    assert got[0].error is None and got[0].rows == 4001, got[0].describe()
    assert got[0].columns[1][:3] == [4000, 0, 1], got[0].columns[1][:3]
    assert_error(got[1], RESOURCE_EXHAUSTED, None, ["max-result-bytes"])
    assert got[2].error is None and got[2].rows == 4001


@pytest.mark.parametrize("batches", [[[-1], [0, 2**62, 2**62]], [[2**62, -1], [2**62]],
                                     [[2**62], [2**62], [-1]]],
                         ids=["a-batch-sum-leaves-int64", "in-range-at-every-row",
                              "the-running-total-leaves-int64"])
@pytest.mark.parametrize("op", [pb.AGGREGATE_OP_SUM, pb.AGGREGATE_OP_MEAN], ids=["sum", "mean"])
def test_an_exact_sum_that_fits_is_not_out_of_range_whatever_the_batches(conn, batches, op):
    """The stream's exact sum is 2^63 - 1, which fits int64: the answer is it
    (or its mean), however the rows are cut into batches (docs/api.md: integer
    sums are exact; only a sum that leaves the 64-bit type is OUT_OF_RANGE)."""
    plan = pb.Plan(steps=[agg(measures=[measure(op, "x", "m")])])
    reqs = [pb.QueryRequest(batch_id=j + 1, columns=columns([("x", T.COLUMN_TYPE_INT64, b)]))
            for j, b in enumerate(batches)]
    reqs[0].plan.CopyFrom(plan)
    final = conn.query(reqs)[-1]
    assert final.final and final.error is None, final.describe()
    rows = sum(len(b) for b in batches)
    want = 2**63 - 1 if op == pb.AGGREGATE_OP_SUM else (2**63 - 1) / rows
    assert final.columns == [[want]], final.describe()
