"""docs/ir-attrs.md names every attribute and annotation key the compiler hands on (a key used in
the code but missing there fails here)."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "ir-attrs.md").read_text()

_USES = [
    re.compile(r"\.(?:attrs|annotations)\[\s*\"(\w+)\"\s*\]"),
    re.compile(r"\.(?:attrs|annotations)\.(?:get|setdefault|pop)\(\s*\"(\w+)\""),
]
_LITERALS = re.compile(r"\b(?:attrs|annotations)=\{([^{}]*)\}")
_KEY = re.compile(r"\"(\w+)\"\s*:")
# Keys of dictionaries that are not IR attributes (user loop annotations, trace records) and
# keys the scan would misread.
NOT_ATTRS = {"prefer_instruction"}


def used_keys() -> dict:
    keys: dict = {}
    for path in (ROOT / "tileworkbench").rglob("*.py"):
        text = path.read_text()
        found = {m for pattern in _USES for m in pattern.findall(text)}
        for literal in _LITERALS.findall(text):
            found |= set(_KEY.findall(literal))
        for key in found - NOT_ATTRS:
            keys.setdefault(key, []).append(str(path.relative_to(ROOT)))
    return keys


def test_every_attribute_key_the_code_uses_is_documented():
    keys = used_keys()
    assert len(keys) > 20  # the scan sees the code (a regex gone wrong would find nothing)
    missing = {k: v for k, v in keys.items() if f"`{k}`" not in DOC}
    assert not missing, f"keys used but not in docs/ir-attrs.md: {missing}"


def test_the_tile_loop_annotation_is_the_documented_one():
    from tileworkbench.ir import nodes as ir

    assert f"`{ir.TILE_LOOP}`" in DOC
