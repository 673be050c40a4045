"""The selective parser: never raises, and agrees with prometheus_client on valid pages."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.openmetrics import exposition as om
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_families
from prometheus_client.parser import text_string_to_metric_families

from llm_oncall.signals.catalog import WANTED_ALL
from llm_oncall.signals.exposition import Page, parse

REAL_PAGE = (Path(__file__).resolve().parents[2] / "src/llm_oncall/data/pages/vllm-0.32.0-cpu-idle.prom").read_text()

Key = tuple[str, tuple[tuple[str, str], ...]]


def _value_key(v: float) -> object:
    return "NaN" if math.isnan(v) else v


def ours(page: Page) -> dict[Key, tuple[object, float | None]]:
    out: dict[Key, tuple[object, float | None]] = {}
    for name, samples in page.samples.items():
        for s in samples:
            key = (name, tuple(sorted(s.labels)))
            assert key not in out, f"duplicate sample {key}"
            out[key] = (_value_key(s.value), s.timestamp)
    return out


def all_samples(page: Page) -> dict[Key, list[tuple[object, float | None]]]:
    out: dict[Key, list[tuple[object, float | None]]] = {}
    for name, samples in page.samples.items():
        for s in samples:
            out.setdefault((name, tuple(sorted(s.labels))), []).append((_value_key(s.value), s.timestamp))
    return out


def theirs(families: Iterable[Metric], ms_timestamps: bool) -> dict[Key, tuple[object, float | None]]:
    out: dict[Key, tuple[object, float | None]] = {}
    for family in families:
        for s in family.samples:
            ts = None if s.timestamp is None else float(s.timestamp) * (1000 if ms_timestamps else 1)
            out[(s.name, tuple(sorted(s.labels.items())))] = (_value_key(s.value), ts)
    return out


def assert_same(a: dict[Key, tuple[object, float | None]], b: dict[Key, tuple[object, float | None]]) -> None:
    assert a.keys() == b.keys()
    for key, (value, ts) in a.items():
        other_value, other_ts = b[key]
        assert value == other_value, key
        if ts is None or other_ts is None:
            assert ts is other_ts, key
        else:
            assert math.isclose(ts, other_ts, rel_tol=1e-12, abs_tol=1e-3), key


# -- unit cases -----------------------------------------------------------------------------------

def test_label_escapes_specials_and_timestamps() -> None:
    page = parse(
        'm{a="x\\"y",b="line\\nbreak",c="back\\\\slash",d="}{,=",e="ünï ☃"} 1 1700000000123\n'
        "n NaN\n"
        'n{x="1"} +Inf\n'
        'n{x="2"} -Inf\n'
        "untyped_without_help 3.5e-3\n"
    )
    assert page.errors == 0
    (m,) = page.get("m")
    assert dict(m.labels) == {"a": 'x"y', "b": "line\nbreak", "c": "back\\slash", "d": "}{,=", "e": "ünï ☃"}
    assert m.value == 1 and m.timestamp == 1700000000123
    values = {s.labels: s.value for s in page.get("n")}
    assert math.isnan(values[()]) and values[(("x", "1"),)] == math.inf and values[(("x", "2"),)] == -math.inf
    assert page.get("untyped_without_help")[0].value == 0.0035


def test_garbage_lines_are_counted_and_skipped() -> None:
    page = parse('ok 1\nbroken{a="x" 2\nno_value\nbad{a="1"} one\nv 1_000\nalso_ok{a="b"} 2\n')
    assert page.errors == 4
    assert [s.value for s in page.get("ok")] == [1.0] and [s.value for s in page.get("also_ok")] == [2.0]


def test_openmetrics_exemplar_and_eof() -> None:
    page = parse('# TYPE c counter\nc_total{a="1"} 5 # {trace_id="abc"} 1.0 1700000000.5\nc_created 1.7e9\n# EOF\n')
    assert page.errors == 0
    (c,) = page.get("c_total")
    assert c.value == 5 and c.timestamp is None
    assert page.get("c_created")[0].value == 1.7e9


def test_real_page_matches_prometheus_client() -> None:
    assert_same(ours(parse(REAL_PAGE)), theirs(text_string_to_metric_families(REAL_PAGE), ms_timestamps=True))


def test_selective_parse_keeps_exactly_the_wanted_samples() -> None:
    full = ours(parse(REAL_PAGE))
    wanted = ours(parse(REAL_PAGE, WANTED_ALL))
    assert wanted == {k: v for k, v in full.items() if k[0] in WANTED_ALL}
    assert any(k[0] == "vllm:time_to_first_token_seconds_bucket" for k in wanted)
    assert not any(k[0].startswith("python_gc") for k in wanted)


# -- never raises -----------------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from([
    "{", "}", '"', "\\", "=", ",", " ", "\t", "#", "\n", "\r", "# HELP ", "# TYPE ", "vllm:num_requests_running",
    "_bucket", "le", "+Inf", "NaN", "-1e9", "0.5", "1_0", "é", "\x00", "# EOF", "x", "_total",
])


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), st.lists(_FRAGMENTS, max_size=60).map("".join),
                 st.binary(max_size=2000).map(lambda b: b.decode("utf-8", errors="replace"))))
def test_parse_never_raises_on_arbitrary_text(text: str) -> None:
    for wanted in (None, WANTED_ALL):
        page = parse(text, wanted)
        assert page.errors >= 0
        for samples in page.samples.values():
            assert all(isinstance(s.value, float) for s in samples)


@st.composite
def mutated_page(draw: st.DrawFn) -> str:
    data = bytearray(REAL_PAGE.encode())
    for _ in range(draw(st.integers(min_value=1, max_value=30))):
        pos = draw(st.integers(min_value=0, max_value=len(data) - 1))
        op = draw(st.sampled_from(["flip", "delete", "insert", "cut"]))
        byte = draw(st.sampled_from(b'{}"\\=, #\n\t\x00\xff0aZ:'))
        if op == "flip":
            data[pos] = byte
        elif op == "delete":
            del data[pos]
        elif op == "insert":
            data.insert(pos, byte)
        else:
            del data[pos:pos + draw(st.integers(min_value=1, max_value=500))]
        if not data:
            break
    return bytes(data).decode("utf-8", errors="replace")


@settings(deadline=None, max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_page())
def test_parse_never_raises_on_mutated_real_pages(text: str) -> None:
    full = parse(text)
    selective = parse(text, WANTED_ALL)
    # The selective parse reads a subset of what the full parse reads. A mutation can make two lines name the same
    # sample (a digit of `le` deleted), so samples are compared as lists per key, in page order.
    full_samples = all_samples(full)
    for key, values in all_samples(selective).items():
        assert full_samples.get(key) == values


# -- agreement with prometheus_client on generated pages ----------------------------------------

_RESERVED = ("_total", "_created", "_bucket", "_count", "_sum", "_gsum", "_gcount", "_info")
_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,15}", fullmatch=True).filter(
    lambda n: not n.endswith(_RESERVED) and not n.startswith("__"))
_label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: not n.startswith("__") and n not in ("le", "quantile"))
_label_values = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.sampled_from(['\\', '"', "\n", '\\"', 'a"}', "}", "=", ",", " ", "é☃", "x\\ny", "# HELP x", ""]),
)
_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, -0.0, 1e-300, 1e300]))
_timestamps = st.one_of(st.none(), st.integers(min_value=0, max_value=2_000_000_000_000).map(lambda ms: ms / 1000))


class _Families:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


@st.composite
def registries(draw: st.DrawFn, negative_buckets: bool = True) -> CollectorRegistry:
    """Random families; OpenMetrics forbids `_sum` with negative buckets, so it can opt out."""
    low = -1e6 if negative_buckets else 0.0
    registry = CollectorRegistry()
    names = draw(st.lists(_names, min_size=1, max_size=6, unique=True))
    families: list[Metric] = []
    for i, name in enumerate(names):
        labels = draw(st.lists(_label_names, max_size=3, unique=True))
        kind = draw(st.sampled_from(["gauge", "counter", "histogram"]))
        combos = draw(st.lists(st.tuples(*[_label_values] * len(labels)), min_size=1, max_size=3, unique=True))
        if kind == "histogram":
            bounds = sorted(draw(st.lists(st.floats(min_value=low, max_value=1e6, allow_nan=False),
                                          min_size=1, max_size=5, unique=True)))
            hist = Histogram(f"h{i}_{name}", "help \\ with\nnewline", labels, buckets=bounds, registry=registry)
            for combo in combos:
                child = hist.labels(*combo) if labels else hist
                for v in draw(st.lists(st.floats(min_value=low, max_value=1e7, allow_nan=False), max_size=5)):
                    child.observe(v)
                if not labels:
                    break
        elif kind == "gauge":
            g = GaugeMetricFamily(f"g{i}_{name}", "a gauge", labels=labels)
            for combo in combos:
                g.add_metric(list(combo), draw(_floats), timestamp=draw(_timestamps))
            families.append(g)
        else:
            c = CounterMetricFamily(f"c{i}_{name}", "a counter", labels=labels)
            for combo in combos:
                created = draw(st.one_of(st.none(), st.floats(min_value=0, max_value=2e9)))
                c.add_metric(list(combo), draw(st.floats(min_value=0, allow_infinity=True)), created=created,
                             timestamp=draw(_timestamps))
            families.append(c)
    registry.register(_Families(families))  # type: ignore[arg-type]
    return registry


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(registries())
def test_text_format_agrees_with_prometheus_client(registry: CollectorRegistry) -> None:
    text = generate_latest(registry).decode()
    expected = theirs(text_string_to_metric_families(text), ms_timestamps=True)
    page = parse(text)
    assert page.errors == 0
    assert_same(ours(page), expected)
    # the selective path (whole HELP blocks skipped) keeps exactly what was asked for
    wanted = frozenset(list({k[0] for k in expected})[::2])
    assert ours(parse(text, wanted)) == {k: v for k, v in ours(page).items() if k[0] in wanted}


@settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(registries(negative_buckets=False))
def test_openmetrics_agrees_with_prometheus_client(registry: CollectorRegistry) -> None:
    text = om.generate_latest(registry, escaping="allow-utf-8").decode()
    expected = theirs(om_families(text), ms_timestamps=False)
    page = parse(text)
    assert page.errors == 0
    assert_same(ours(page), expected)
