"""A tiny interpreter for the barrier calls of generated CUDA, used as an independent oracle.

It walks the device source from the pipeline's ``// prologue`` comment to the end of the
pipelined loop: ``for (int v = a; v < b; ++v) {`` loops are iterated, ``if (cond) {`` blocks
are entered when ``cond`` holds (``tw::shuffle_elect<N>()`` counts as true: the elected thread),
and every ``bar[index].arrive()/.wait(parity)/.expect_transaction(bytes)`` is recorded with its
index and argument evaluated as C integers (all operands here are non-negative, so C's ``/``
is Python's ``//``). Scalars declared (``int x = e;``) or assigned (``x = e;``) on the way keep
their values from one iteration to the next (carried ring counters); ``(c) ? a : b`` is read.
"""

import re

FOR = re.compile(r"^for \(int (\w+) = (.+?); \1 < (.+?); \+\+\1\) \{$")
IF = re.compile(r"^if \((.*)\) \{$")
OP = re.compile(r"^(\w+)\[(.+)\]\.(arrive|wait|expect_transaction)\((.*)\);$")
SET = re.compile(r"^(?:const )?(?:int )?(\w+) = (.+);$")
TERNARY = re.compile(r"\(\((.+?)\) \? (.+?) : (.+)\)$")


def c_eval(expr: str, env: dict):
    m = TERNARY.fullmatch(expr)
    if m:
        return c_eval(m.group(2) if c_eval(m.group(1), env) else m.group(3), env)
    py = re.sub(r"tw::shuffle_elect<\d+>\(\)", "True", expr)
    py = py.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    return eval(py, {"__builtins__": {}}, dict(env))


def pipeline_lines(source: str) -> list[str]:
    """Lines from the prologue comment to the closing brace of the pipelined loop."""
    lines = [ln.strip() for ln in source.splitlines()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("// prologue"))
    pragma = next(i for i in range(start, len(lines)) if lines[i] == "#pragma unroll 1")
    depth, end = 0, None
    for i in range(pragma + 1, len(lines)):
        depth += lines[i].count("{") - lines[i].count("}")
        if depth == 0:
            end = i
            break
    return [ln for ln in lines[start + 1:end + 1] if ln and not ln.startswith(("//", "#pragma"))]


def _block_end(lines, i) -> int:
    depth = 0
    for j in range(i, len(lines)):
        depth += lines[j].count("{") - lines[j].count("}")
        if depth == 0:
            return j
    raise ValueError("unbalanced braces")


def run(lines: list[str], env: dict, out: list) -> None:
    """Append ``(loop vars, barrier, slot, op, value)`` for every barrier call executed."""
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FOR.match(line)
        if m:
            end = _block_end(lines, i)
            var, lo, hi = m.group(1), c_eval(m.group(2), env), c_eval(m.group(3), env)
            for v in range(lo, hi):
                env[var] = v
                run(lines[i + 1:end], env, out)
            env.pop(var, None)
            i = end + 1
            continue
        m = IF.match(line)
        if m:
            end = _block_end(lines, i)
            if c_eval(m.group(1), env):
                run(lines[i + 1:end], env, out)
            i = end + 1
            continue
        m = OP.match(line)
        if m:
            name, index, op, arg = m.groups()
            value = c_eval(arg, env) if arg else None
            out.append((dict(env), name, c_eval(index, env), op, value))
        m = SET.match(line) if not m else None
        if m:
            env[m.group(1)] = c_eval(m.group(2), env)
        i += 1
