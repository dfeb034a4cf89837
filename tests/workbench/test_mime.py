"""The MIME types are defined once, in tileworkbench/mime.py: the extension spells them the same."""

import pathlib
import re

from tileworkbench import mime

TS = pathlib.Path(__file__).resolve().parents[2] / "extension" / "src" / "mime.ts"


def _ts_constants() -> dict:
    return dict(re.findall(r"export const (\w+) = '([^']+)';", TS.read_text()))


def test_the_extension_spells_every_mime_type_as_python_does():
    ts = _ts_constants()
    for name in ("TRACE_MIME", "BENCH_MIME", "LEGACY_TRACE_MIME", "LEGACY_BENCH_MIME"):
        assert ts[f"{name}_TYPE"] == getattr(mime, name), name


def test_the_types_are_versioned_and_the_legacy_ones_are_not():
    assert re.fullmatch(r"application/vnd\.tileworkbench\.trace\.v\d+\+json", mime.TRACE_MIME)
    assert re.fullmatch(r"application/vnd\.tileworkbench\.bench\.v\d+\+json", mime.BENCH_MIME)
    assert mime.LEGACY_TRACE_MIME == mime.TRACE_MIME.replace(".v1", "")
    assert mime.LEGACY_BENCH_MIME == mime.BENCH_MIME.replace(".v1", "")
