"""Client.join and its stream and DataFrame forms: pipelined Join batches,
the answers the server continued over several messages reassembled, and
batches cut by the server's --max-result-bytes re-sent in halves."""
import collections
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import columns as _columns
from . import keys as _keys
from . import wire as _wire
from ._common import _JOIN_KINDS, MAX_CAPACITY, _choice
from ._proto import pb
from .errors import Aborted, Internal, InvalidArgument, ResourceExhausted, from_batch_error
from .results import JoinResult, QueryStatistics


class _JoinBatch:
    """The reassembled answer to one left batch (its continued parts appended)."""

    def __init__(self, select: Sequence[Tuple[str, str]]):
        self.left: List[np.ndarray] = []
        self.right: List[np.ndarray] = []
        self.builders = [_columns.ColumnBuilder(n, t) for n, t in select]
        self.pairs = 0
        self.count = 0
        self.capacity = 0
        self.overflow = False
        self.found: List[np.ndarray] = []
        self.probes: List[np.ndarray] = []
        self.statistics = QueryStatistics()
        self.started = False
        self.versions = set()  # index versions the answer's parts ran on
        self.sequence = 0  # the mutation sequence the (last) answer saw

    def add(self, part) -> None:
        if not self.started:
            if part.first_pair != 0:
                raise Internal(f"join answer starts at pair {part.first_pair}, not 0")
            self.started = True
            self.count, self.capacity, self.overflow = part.count, part.capacity, part.overflow
            if part.statistics is not None:
                self.statistics.merge(part.statistics)
            if part.found:
                self.found.append(np.frombuffer(part.found, np.uint8).astype(bool))
            if part.probes:
                self.probes.append(np.frombuffer(part.probes, "<u4").copy())
        elif part.first_pair != self.pairs:
            raise Internal(f"join answer continues at pair {part.first_pair} after {self.pairs}")
        left = np.frombuffer(part.left_rows, "<u4")
        right = np.frombuffer(part.right_rows, "<u4")
        if len(left) != len(right):
            raise Internal(f"server sent {len(left)} left rows but {len(right)} right rows")
        if len(part.columns) != len(self.builders):
            raise Internal(f"join answer carries {len(part.columns)} columns, not "
                           f"{len(self.builders)}")
        for b, col in zip(self.builders, part.columns):
            if b.add(col, "join column") != len(left):
                raise Internal(f"server sent column {b.name!r} of {col.length} rows for "
                               f"{len(left)} pairs")
        self.left.append(left)
        self.right.append(right)
        self.pairs += len(left)

    def check_complete(self, count_only: bool) -> None:
        want = 0 if count_only else min(self.count, self.capacity)
        if self.pairs != want:
            raise Internal(f"join answer holds {self.pairs} pairs, not min(count {self.count}, "
                           f"capacity {self.capacity}) = {want}")

    def absorb(self, other: "_JoinBatch") -> None:
        """Appends a later batch's answer (the halves of a re-sent batch)."""
        self.left += other.left
        self.right += other.right
        for mine, theirs in zip(self.builders, other.builders):
            mine._data += theirs._data
            mine._valid += theirs._valid
        self.pairs += other.pairs
        self.count += other.count
        self.capacity += other.capacity
        self.overflow = self.overflow or other.overflow
        self.found += other.found
        self.probes += other.probes
        self.statistics.merge(other.statistics)
        self.versions |= other.versions
        self.sequence = max(self.sequence, other.sequence)


class _JoinCalls:
    """The Join calls, a mixin of gpujoin.Client (which supplies the
    connection and _describe_for_query)."""

    def _join_plan(self, index: str, kind: str, select: List[str]):
        """(kind number, index info, selected (name, type)s, pairs per left row at most)."""
        kind_number = _choice(_JOIN_KINDS, kind, "kind")
        info = self._describe_for_query(index, select)
        types = [(s, info.payload_type(s)) for s in select]
        # At most one pair per left row unless an inner or outer join meets a keep_all index.
        group = max(1, info.statistics.max_group_rows) if (
            info.duplicates == "keep_all" and kind_number in (1, 2)) else 1
        return kind_number, info, types, group

    def join(self, index: str, keys: Any, *, kind: str = "inner", select: Sequence[str] = (),
             left_rows: Any = None, capacity: Optional[int] = None, count_only: bool = False,
             found: bool = False, probes: bool = False, max_probe_count: int = 0,
             batch_rows: Optional[int] = None, timeout: Optional[float] = None) -> JoinResult:
        """Joins left keys with the index: pairs (left row, right row) in left
        row order, then the index's source-row order, with the selected payload
        columns per pair. `keys` are as lookup() takes them (a left row with a
        null in a key column matches nothing).

        Args:
            kind: "inner", "left" (left outer), "semi" or "anti" (also spelled
                "left_outer", "left_semi", "left_anti").
            left_rows: optional uint32 left row IDs per key; default the key's
                position in `keys`.
            capacity: pairs per batch of `batch_rows` keys; beyond it a batch is
                cut (`overflow`, `count` exact). Default: every pair (on a
                keep_all index the server allocates what the groups need; a
                batch cut by the server's --max-result-bytes is re-sent in halves).
            count_only: only count the pairs (`count`; no pairs or columns).
            found, probes: per left row, concatenated over the batches.

        Raises Aborted when the index was rebuilt while the join ran (its
        batches saw different versions).
        """
        select = list(select)
        kind_number, info, types, group = self._join_plan(index, kind, select)
        wire = _keys.query_keys(keys, info)
        n = len(wire)
        if n > 0xFFFFFFFF:
            raise InvalidArgument(f"join has {n} left rows; left row IDs are uint32")
        explicit = None
        if left_rows is not None:
            explicit = _keys.u32_column(left_rows, "left_rows")
            if len(explicit) != n:
                raise InvalidArgument(f"left_rows: {len(explicit)} rows, but keys has {n}")
        auto = capacity is None and not count_only
        row_bytes = 8 * group + found + 4 * probes + sum(
            (64 if t in _columns.VARIABLE else 8) * group for _, t in types)
        extra = 4 if explicit is not None else 0
        rows = self._rows_per_batch(batch_rows, row_bytes, _keys.row_bytes(wire) + extra)
        out = _JoinBatch(types)
        ranges = [(s, t, min(MAX_CAPACITY, (t - s) * group) if auto else (capacity or 0))
                  for s, t in _keys.batch_ranges(wire, rows, self._limit - 4096, row_extra=extra)]
        for part in self._join_ranges(index, wire, explicit, ranges, kind_number, select, types,
                                      count_only, found, probes, max_probe_count, auto, timeout):
            out.absorb(part)
        if len(out.versions) > 1:
            raise Aborted(f"join of index {index!r} ran on index versions "
                          f"{sorted(out.versions)}: the index was rebuilt during the join; "
                          "run it again")
        return self._join_result(out, found, probes, info.version)

    @staticmethod
    def _join_result(out: _JoinBatch, found: bool, probes: bool, version: int) -> JoinResult:
        """The JoinResult of an assembled answer (its parts joined, one copy)."""
        return JoinResult(
            left_rows=np.concatenate([np.zeros(0, np.uint32)] + out.left).astype(np.uint32),
            right_rows=np.concatenate([np.zeros(0, np.uint32)] + out.right).astype(np.uint32),
            columns={b.name: b.finish() for b in out.builders}, count=out.count,
            overflow=out.overflow,
            found=np.concatenate([np.zeros(0, bool)] + out.found) if found else None,
            probes=(np.concatenate([np.zeros(0, np.uint32)] + out.probes).astype(np.uint32)
                    if probes else None),
            statistics=out.statistics, index_version=max(out.versions, default=version),
            mutation_sequence=out.sequence)

    def join_stream(self, index: str, batches: Iterable[Any], *, kind: str = "inner",
                    select: Sequence[str] = (), found: bool = False, probes: bool = False,
                    max_probe_count: int = 0,
                    timeout: Optional[float] = None) -> Iterator[JoinResult]:
        """Joins a stream of left key batches (an iterable of arrays or
        sequences, each one request) and yields one JoinResult per batch, in
        order, as the answers arrive, with every pair of the batch (a batch
        the server's --max-result-bytes cut is re-sent in halves). Left rows
        number the keys across all batches (the first key of the third batch
        is the rows of the first two). Memory holds at most `max_inflight`
        batches beyond the one the caller works on. Each result's
        `index_version` is the version its batch ran on."""
        select = list(select)
        kind_number, info, types, group = self._join_plan(index, kind, select)
        limit = self._limit - 4096
        sent: "collections.deque[Tuple[np.ndarray, int]]" = collections.deque()

        def requests():
            first = 0
            for i, keys in enumerate(batches):
                w = _keys.query_keys(keys, info, f"batches[{i}]")
                if w.nbytes > limit:
                    raise InvalidArgument(f"batches[{i}]: {len(w)} keys ({w.nbytes} bytes) do not "
                                          f"fit the server's {self._limit}-byte messages; "
                                          "split the batch")
                if first + len(w) > 0x100000000:
                    raise InvalidArgument(f"batches[{i}]: left rows beyond 2^32 - 1 (left row "
                                          "IDs are uint32)")
                lb = pb.LeftBatch(capacity=min(MAX_CAPACITY, len(w) * group), want_found=found,
                                  want_probes=probes, first_left_row=first)
                header = pb.JoinRequest(index=index, batch_id=i, select=select, kind=kind_number,
                                        max_probe_count=max_probe_count).SerializeToString()
                sent.append((w, first))
                first += len(w)
                yield _wire.join_request(header, lb.SerializeToString(), w)

        for a in self._join_answers(requests(), types, False, timeout):
            w, first = sent.popleft()
            if a.count > a.pairs:
                explicit = np.arange(first, first + len(w), dtype=np.uint32)
                a = self._resend_cut(index, w, explicit, 0, len(w), a, kind_number, select, types,
                                     found, probes, max_probe_count, timeout)
                if len(a.versions) > 1:
                    raise Aborted(f"join of index {index!r}: a re-sent batch ran on index "
                                  f"versions {sorted(a.versions)}; run it again")
            yield self._join_result(a, found, probes, info.version)

    def _join_answers(self, requests: Iterable[bytes], types, count_only: bool,
                      timeout: Optional[float]) -> Iterator[_JoinBatch]:
        """Streams one-batch JoinRequests and yields each batch's reassembled answer
        (its continued parts appended), in order."""
        current: Optional[_JoinBatch] = None
        version = None
        b = 0
        for r in self._stream("Join", requests, finishes=lambda r: not r.more, timeout=timeout):
            if r.error is not None:
                raise from_batch_error(r.error, b)
            if r.batch_id != b:
                raise Internal(f"join answer {b} carries batch_id {r.batch_id}")
            if current is None:
                current = _JoinBatch(types)
                version = r.index_version
            elif r.index_version != version:
                raise Internal(f"join answer parts ran on index versions {version} and "
                               f"{r.index_version}")
            for part in r.results:
                if part.batch != 0:
                    raise Internal(f"join answer holds batch {part.batch} of a one-batch request")
                current.add(part)
            if not r.more:
                current.check_complete(count_only)
                current.versions.add(r.index_version)
                current.sequence = r.mutation_sequence
                yield current
                current = None
                b += 1

    def _join_ranges(self, index, wire, explicit, ranges, kind_number, select, types, count_only,
                     found, probes, max_probe_count, auto, timeout) -> List[_JoinBatch]:
        """Answers of the left batches `ranges` ((start, stop, capacity) each), in
        order. With `auto` capacity, a batch the server cut short (count above the
        pairs it could hold) is re-sent as two halves, each with capacity = its count."""
        if not ranges:
            return []

        def requests():
            for b, (start, stop, cap) in enumerate(ranges):
                lb = pb.LeftBatch(capacity=cap, want_found=found, want_probes=probes,
                                  count_only=count_only)
                if explicit is not None:
                    lb.left_rows.packed = explicit[start:stop].tobytes()
                else:
                    lb.first_left_row = start
                header = pb.JoinRequest(index=index, batch_id=b, select=select, kind=kind_number,
                                        max_probe_count=max_probe_count).SerializeToString()
                yield _wire.join_request(header, lb.SerializeToString(), wire[start:stop])

        answers = list(self._join_answers(requests(), types, count_only, timeout))
        if len(answers) != len(ranges):
            raise Internal(f"join stream answered {len(answers)} of {len(ranges)} batches")
        if not auto:
            return answers
        return [a if a.count <= a.pairs else
                self._resend_cut(index, wire, explicit, start, stop, a, kind_number, select,
                                 types, found, probes, max_probe_count, timeout)
                for (start, stop, _), a in zip(ranges, answers)]

    def _resend_cut(self, index, wire, explicit, start, stop, a: _JoinBatch, kind_number, select,
                    types, found, probes, max_probe_count, timeout) -> _JoinBatch:
        """The whole answer of left rows [start, stop), whose answer `a` the server
        cut short: the rows re-sent as two halves (recursively), each with capacity
        `a.count`, an upper bound of its pairs."""
        if stop - start == 1:
            row = int(explicit[start]) if explicit is not None else start
            raise ResourceExhausted(
                f"join of index {index!r}: left row {row} matches {a.count} rows, more pairs than "
                f"the server's --max-result-bytes lets one batch hold ({a.pairs}); select fewer "
                "columns or raise the limit")
        mid = (start + stop) // 2
        cap = min(MAX_CAPACITY, max(1, a.count))
        halves = self._join_ranges(index, wire, explicit, [(start, mid, cap), (mid, stop, cap)],
                                   kind_number, select, types, False, found, probes,
                                   max_probe_count, True, timeout)
        whole = _JoinBatch(types)
        for h in halves:
            whole.absorb(h)
        if whole.count != a.count:
            raise Aborted(f"join of index {index!r}: rows [{start}, {stop}) yielded {a.count} "
                          f"pairs, then {whole.count}: the index changed during the join; "
                          "run it again")
        return whole

    def join_frame(self, index: str, left: Any, *, on: Union[str, Sequence[str]],
                   kind: str = "inner", select: Sequence[str] = (), keep_index: bool = False,
                   **kwargs):
        """join() of a DataFrame's key columns `on` (one name, or a list of
        names in key column order for a composite key) as a DataFrame: the left
        frame's rows of each pair (repeated per match; unmatched left rows of an
        outer join once) with `right_row` and the selected columns appended.
        The frame's index is a fresh RangeIndex, or with `keep_index` the left
        frame's index label of each pair's left row (repeated per match)."""
        r = self.join(index, _keys.frame_keys(left, on), kind=kind, select=select, **kwargs)
        pairs = r.to_pandas()
        # take() makes a new frame (iloc[] would mark it a copy of `left`).
        rows = left.take(r.left_rows.astype(np.int64))
        if not keep_index:
            rows = rows.reset_index(drop=True)
        for c in pairs.columns[1:]:
            # .array: by position, as the index may repeat labels.
            rows[c if c not in rows.columns else f"{c}_right"] = pairs[c].array
        return rows
