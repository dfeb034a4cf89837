"""Python the DSL does not take: statements and expressions kernels cannot contain, and kernel
signatures it cannot compile. Each is a CompileError at the line, naming the construct."""

import textwrap

import pytest

from .harness import Bad, check_bad, check_unique, ids

PARAMS = 'A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")'


def kernel(body: str, params: str = PARAMS, head: str = "with T.Kernel(4, threads=128) as bx:") -> str:
    """A kernel whose ``with T.Kernel`` body is ``body`` (marked lines inside)."""
    inner = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return f"@T.prim_func\ndef main({params}):\n    {head}\n{inner}\n"


STATEMENTS = [
    ("while-never-ends", "while bx < 3:  # <-\n    A[0] = 1.0", "changes nothing its condition"),
    ("break", "for i in T.Parallel(4):\n    break  # <-", "`break` in a T.Parallel loop"),
    ("continue", "for i in T.serial(4):\n    continue  # <-", "`continue` is not supported"),
    ("return-value", "return A  # <-", "a kernel returns nothing"),
    ("return-bare", "return  # <-", "a kernel returns nothing"),
    ("try", "try:  # <-\n    A[0] = 1.0\nexcept Exception:\n    pass", "`try` is not supported"),
    ("raise", "raise ValueError('no')  # <-", "`raise` is not supported"),
    ("assert", "assert bx < 4  # <-", "`assert` is not supported on kernel values"),
    ("assert-failed", "assert 4 < 2, 'four is not below two'  # <-", "assertion failed: four is not below two"),
    ("nested-def", "def helper(x):  # <-\n    return x", "functions cannot be defined inside a kernel"),
    ("nested-class", "class K:  # <-\n    pass", "classes cannot be defined inside a kernel"),
    ("global", "global G  # <-", "`global` is not supported"),
    ("import", "import math  # <-", "imports are not supported inside kernels"),
    ("import-from", "from math import pi  # <-", "imports are not supported inside kernels"),
    ("del", "x = bx + 1\ndel x  # <-", "`del` is not supported"),
    ("with-other", "with open('f'):  # <-\n    pass", r"only `with T.Kernel\(...\) as ...:` and `with T.ws\(...\):` are supported"),
    ("with-two", "with T.Kernel(1), T.Kernel(2):  # <-\n    pass", r"only `with T.Kernel"),
    ("nested-kernel", "with T.Kernel(1, threads=32):  # <-\n    A[0] = 1.0", r"inside a kernel: kernels run one after another"),
    ("for-else", "for i in T.serial(4):  # <-\n    A[i] = 1.0\nelse:\n    A[0] = 2.0", "for-else is not supported"),
    ("chained-assign-unpack", "x = y, z = bx + 1  # <-", "cannot unpack this value"),
    ("slice-assign", "A[0:4] = 1.0  # <-", "assigning to a slice is not supported; use T.fill or T.copy"),
    ("unpack-mismatch", "x, y = bx, bx, bx  # <-", "cannot unpack this value"),
    ("starred-assign", "x, *y = 1, 2, 3  # <-", "cannot unpack this value into the names on the left"),
    ("attribute-assign", "A.name = 3  # <-", "unsupported assignment target"),
    ("annotation-not-dtype", "x: int = bx  # <-", "a variable's annotation must be a dtype"),
    ("annotation-no-value", "x: T.int32  # <-", "a declaration needs a value"),
    ("annotation-string-value", "x: T.int32 = 'seven'  # <-", "the value of x must be a number, not the string"),
    ("no-effect", "bx + 1  # <-", "this expression has no effect"),
    ("print", "print(bx)  # <-", r"print\(\) would run while the kernel is built"),
    ("python-counter", "n = 0\nfor i in T.serial(4):\n    n = n + 1  # <-", "'n' holds the Python value 0"),
    ("loop-target-tuple-mismatch", "for i, j in T.serial(4):  # <-\n    A[i] = 1.0", "this loop has 1 dimension"),
    ("loop-target-attribute", "for A.x in T.serial(4):  # <-\n    pass", "loop and kernel targets must be names"),
    ("loop-over-list", "for i in [1, 2]:  # <-\n    A[i] = 1.0", "kernel loops iterate over T.serial"),
    ("range-step", "for i in range(0, 8, 2):  # <-\n    A[i] = 1.0", r"range\(\) with a step is not supported"),
    ("kernel-bound-three", "pass", r"T.Kernel has 1 grid dimension\(s\) but 3 names are bound"),
    ("match", "match bx:  # <-\n    case 0:\n        pass", "`match` is not supported"),
]

EXPRESSIONS = [
    ("lambda", "f = lambda x: x  # <-", "lambdas are not supported"),
    ("comp-over-tensor", "xs = [v for v in A]  # <-", "a comprehension runs while the kernel is built, over Python"),
    ("comp-over-index", "g = sum(i for i in bx)  # <-", "a comprehension runs while the kernel is built, over Python"),
    ("comp-kernel-condition", "xs = [i for i in range(3) if A[i] > 0]  # <-",
     "a comprehension's condition must be a Python value"),
    ("comp-unpack", "xs = [a for a, b in [(1, 2, 3)]]  # <-", "cannot unpack 3 values into 2 names"),
    ("walrus", "A[0] = (y := 1.0)  # <-", "the walrus operator"),
    ("fstring", "x = f'{bx}'  # <-", "f-strings are not supported"),
    ("set", "x = {1, 2}  # <-", "set literals are not supported"),
    ("unknown-name", "A[0] = undefined_size  # <-", "unknown name 'undefined_size'"),
    ("bad-attribute", "A[0] = T.no_such_function(1)  # <-", "has no attribute 'no_such_function'"),
    ("call-non-callable", "A[0] = A(1)  # <-", "A is not callable"),
    ("call-number", "n = 3\nx = n(1)  # <-", "n is not callable"),
    ("wrong-arity", "T.copy(A, B, 1, 2, 3, 4, 5, 6, 7)  # <-", "wrong arguments to T.copy"),
    ("unknown-keyword", "T.fill(A, 1.0, colour=3)  # <-", "wrong arguments to T.fill"),
    ("pow-kernel-value", "A[0] = A[1] ** 2  # <-", r"\*\* is only supported between Python numbers"),
    ("matmul-operator", "A[0] = A[1] @ A[2]  # <-", "unsupported operator MatMult"),
    ("in-kernel-value", "if bx in (0, 1):  # <-\n    A[0] = 1.0", "unsupported comparison In"),
    ("is-kernel-value", "if bx is None:  # <-\n    A[0] = 1.0", "unsupported comparison Is"),
    ("python-index-by-kernel-value", "A[0] = (1.0, 2.0)[bx]  # <-", "indexed while the kernel is built"),
    ("python-index-out-of-range", "A[0] = (1.0, 2.0)[5]  # <-", "cannot index a tuple of 2"),
    ("dict-unpack", "d = {**{}}  # <-", r"dict unpacking \(\*\*\) is not supported"),
    ("buffer-as-condition", "if A:  # <-\n    A[0] = 1.0", "the global buffer A is not a condition"),
    ("helper-raises", "A[0] = float('x')  # <-", r"float\(...\) raised ValueError"),
    ("negate-string", "x = -'a'  # <-", "the operand of `-` must be a number"),
    ("invert-float", "A[0] = ~A[1]  # <-", "`~` takes an integer"),
    ("kernel-value-truth", "x = 1 if bx else 2  # <-", None),
    ("helper-with-loop", None, "a T.parallel loop is only understood in the kernel's own body"),
    ("bool-of-kernel-value", "x = bool(bx)  # <-", "has no Python truth value"),
    ("int-of-kernel-value", "x = int(A[0])  # <-", r"int\(...\) raised TypeError"),
    ("len-of-kernel-value", "x = len(bx)  # <-", r"len\(...\) raised TypeError"),
]

SIGNATURES = [
    ("varargs", "def main(*tensors):  # <-", "a kernel takes named parameters only, not \\*tensors"),
    ("kwargs", "def main(A: T.Tensor((128,), 'float32'), **more):  # <-",
     "a kernel takes named parameters only, not \\*more"),
    ("keyword-only", "def main(*, A: T.Tensor((128,), 'float32')):  # <-", "no keyword-only parameters"),
    ("default", "def main(A: T.Tensor((128,), 'float32') = None):  # <-", "take no default values"),
    ("no-annotation", "def main(A):  # <-", "parameter 'A' needs a T.Tensor"),
    ("int-annotation", "def main(A: int):  # <-", "annotation must be T.Tensor, T.StridedTensor or a dtype, "
                                                   "not the class int"),
    ("string-annotation", "def main(A: 'matrix'):  # <-", "annotation must be T.Tensor, T.StridedTensor or a "
                                                         "dtype, not the string 'matrix'"),
    ("async", "async def main(A: T.Tensor((128,), 'float32')):  # <-", "a kernel cannot be an `async def`"),
]


def _statement_case(name, body, match):
    if name == "kernel-bound-three":
        return Bad(f"stmt-{name}", kernel(body, head="with T.Kernel(4, threads=128) as (bx, by, bz):  # <-"), match)
    if match is None:  # a conditional expression on a kernel value becomes a select, not an error
        return None
    return Bad(f"stmt-{name}", kernel(body), match)


def _signature_case(name, line, match):
    body = "    with T.Kernel(1, threads=128):\n        pass\n"
    return Bad(f"signature-{name}", f"@T.prim_func\n{line}\n{body}", match)


HELPER_WITH_LOOP = "def scale(dst, k):\n    for i in T.Parallel(128):\n        dst[i] = dst[i] * k\n\n"


def _expression_case(name, body, match):
    if body is None:  # a Python helper with a kernel loop in it, called from the kernel
        return Bad(f"expr-{name}", HELPER_WITH_LOOP + kernel("scale(A, 2.0)  # <-"), match)
    return Bad(f"expr-{name}", kernel(body), match)


CASES = check_unique(
    [c for c in (_statement_case(n, b, m) for n, b, m in STATEMENTS) if c is not None]
    + [_expression_case(n, b, m) for n, b, m in EXPRESSIONS if m is not None]
    + [_signature_case(*s) for s in SIGNATURES]
)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_python_the_dsl_does_not_take_is_named_at_its_line(case):
    check_bad(case)
