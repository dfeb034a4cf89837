"""verify_shared_views: refuse a program that reads through one name of a shared tile what it wrote
through a ``T.view`` of it (or the other way round).

Expects: the IR straight from the front end, where ``V = T.view(S, shape, dtype)`` of a shared tile
``S`` is a tile of its own marked ``ir.SHARED_VIEW`` (``ir.records.SharedView``).
Guarantees: the same IR (this pass never changes it). In TileLang ``V`` shares ``S``'s bytes: a way
to reuse shared memory (DeepSeek's sparse MLA backward stages float32 results in its bf16 key
tile once the gemms have read it). Two separate tiles compute the same wherever every read
through a name reads what was last written through that same name, which this pass checks: on
every path through the program (each branch of an ``if``; a loop's body run once, again after
itself, or not at all) a read of ``S`` or one of its views whose bytes may have been written last
through another of those names is a ``CompileError`` at the read, naming the write. Such a read
would mean, in TileLang, whatever the two tiles' layouts make of each other's elements (a swizzled
bf16 gemm operand read back as float32 rows), not something a program can rely on.
A statement's reads come before its writes (``V[i] = S[i]`` reads ``S`` first); a ``T.Parallel``
nest is one statement (its ``if``s choose elements, not paths); a write through any part of a
name counts as that name's (the check is by name, not by element); scopes side by side
(``T.ws``) are taken in program order.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import nodes as ir
from ..ir.visitor import buffer_roles, collect
from .manager import register
from .rules.loop_lets import written_buffer_ids

# The roles (ir.visitor.buffer_roles) in which a statement reads a buffer; "other" is a gemm's or
# a scan's operand, an atomic update's address (which reads the old value) ...
_READ_ROLES = ("load", "copy_src", "reduce_src", "other")

_COMPOUND = (ir.SeqStmt, ir.For, ir.While, ir.IfThenElse, ir.ThreadScope, ir.WarpSpecialize)


def _children(s: ir.Stmt) -> list:
    if isinstance(s, ir.WarpSpecialize):
        return [s.producer, s.consumer]
    if isinstance(s, ir.SeqStmt):
        return list(s.stmts)
    return [s.body]


class _Flow:
    """Which names may have written each shared storage last, walked in program order. A state maps
    a storage (the viewed tile's id) to ``{name's id: (name, the write's location)}``."""

    def __init__(self, storage_of: dict):
        self.storage_of = storage_of  # id(tile or view) -> the viewed tile

    def walk(self, s: ir.Stmt, state: dict) -> dict:
        if isinstance(s, ir.IfThenElse):
            then = self.walk(s.then_body, state)
            other = self.walk(s.else_body, state) if s.else_body is not None else state
            return _join(then, other)
        if isinstance(s, ir.For) and s.kind == "parallel":
            return self._leaf(s, state)  # its `if`s choose elements, not paths: the nest is one statement
        if isinstance(s, (ir.For, ir.While)):
            entry = state
            while True:  # states only grow, over at most a few names: a handful of rounds
                after = _join(state, self.walk(s.body, entry))
                if after == entry:
                    return after
                entry = after
        if isinstance(s, _COMPOUND):
            for child in _children(s):
                state = self.walk(child, state)
            return state
        return self._leaf(s, state)

    def _leaf(self, s: ir.Stmt, state: dict) -> dict:
        mentioned = {id(b): b for b in collect(s, ir.Buffer) if id(b) in self.storage_of}
        if not mentioned or isinstance(s, ir.Allocate):
            return state
        for b in mentioned.values():
            if _reads(s, b):
                self._check_read(b, _reading_statement(s, b), state)
        written = written_buffer_ids(s)
        state = dict(state)
        for key, b in mentioned.items():
            if key in written:
                state[id(self.storage_of[key])] = {key: (b, s.loc)}
        return state

    def _check_read(self, b: ir.Buffer, s: ir.Stmt, state: dict):
        tile = self.storage_of[id(b)]
        for key, (writer, loc) in state.get(id(tile), {}).items():
            if key == id(b):
                continue
            view = b if b is not tile else writer
            where = f" at line {loc.line}" if loc is not None and loc.line else ""
            made = view.attrs[ir.SHARED_VIEW].loc
            made_at = f" (line {made.line})" if made is not None and made.line else ""
            raise CompileError(
                f"{b.name} is read here, but what it holds may have been written last through {writer.name}{where}: "
                f"in TileLang, T.view{made_at} makes {view.name} share {tile.name}'s shared memory, and what one "
                f"name reads of the other's writes depends on how each tile is laid out. Here the two are tiles "
                f"of their own; write {b.name} before reading it (or copy between the two explicitly)", s.loc)


def _reads(s: ir.Stmt, b: ir.Buffer) -> bool:
    return any(role in _READ_ROLES for role in buffer_roles(s, b))


def _reading_statement(s: ir.Stmt, b: ir.Buffer) -> ir.Stmt:
    """The innermost statement of ``s`` (a ``T.Parallel`` nest, say) that reads ``b``: where the
    error points."""
    inner = [x for x in collect(s, ir.Stmt) if not isinstance(x, _COMPOUND) and x.loc is not None and _reads(x, b)]
    return inner[0] if inner else s


def _join(a: dict, b: dict) -> dict:
    out = {k: dict(v) for k, v in a.items()}
    for k, writers in b.items():
        out.setdefault(k, {}).update(writers)
    return out


@register("verify_shared_views", "tile")
def verify_shared_views(func: ir.PrimFunc, ctx) -> ir.PrimFunc:
    views = [a.buffer for a in collect(func.body, ir.Allocate) if a.buffer.attrs.get(ir.SHARED_VIEW) is not None]
    if not views:
        return func
    storage_of = {}
    for v in views:
        tile = v.attrs[ir.SHARED_VIEW].source
        storage_of[id(v)] = storage_of[id(tile)] = tile
    _Flow(storage_of).walk(func.body, {})
    return func
