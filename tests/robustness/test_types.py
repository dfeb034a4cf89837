"""Values of the wrong kind where the DSL takes a number, an integer or a dtype: every place a
number belongs, crossed with the values users pass there by mistake. Each is a CompileError at
the line that names the place and the value."""

import pytest

from .harness import Bad, check_bad, check_unique, ids
from .test_syntax import kernel

# The values (source text, the words the message names them with).
STRING = ('"x"', "the string 'x'")
BUFFER = ("A", "the global buffer A")
NONE = ("None", "None")
LIST = ("[1, 2]", "a list of 2")
DTYPE = ("T.float32", "the dtype float32")
FLOAT = ("2.5", "the float 2.5")
BARRIER = ("mbar", "the barrier mbar")
SHARED = ("s", "the shared buffer s")

NOT_NUMBERS = (STRING, BUFFER, NONE, LIST, DTYPE)
NOT_INTEGERS = NOT_NUMBERS + (FLOAT,)

PRELUDE = 's = T.alloc_shared((128,), "float32")\nmbar = T.alloc_barrier(128)\n'

# (place, kernel body with {v} where the value goes, the words naming the place, bad values)
PLACES = [
    ("grid", None, "T.Kernel: grid dimension x must be", NOT_INTEGERS),
    ("threads", None, "T.Kernel: threads must be a constant between 1 and 1024", (STRING, BUFFER, NONE, DTYPE, FLOAT)),
    ("shared-shape", 'x = T.alloc_shared(({v}, 64), "float16")  # <-', "T.alloc_shared: dimension 0 must be",
     NOT_INTEGERS),
    ("fragment-shape", 'x = T.alloc_fragment((64, {v}), "float32")  # <-', "T.alloc_fragment: dimension 1 must be",
     NOT_INTEGERS),
    ("local-shape", 'x = T.alloc_local(({v},), "float32")  # <-', "T.alloc_local: dimension 0 must be", NOT_INTEGERS),
    ("serial-extent", "for i in T.serial({v}):  # <-\n    A[i] = 1.0", "T.serial: the extent must be", NOT_INTEGERS),
    ("serial-start", "for i in T.serial({v}, 8):  # <-\n    A[i] = 1.0", "T.serial: the start must be", NOT_INTEGERS),
    ("range-extent", "for i in range({v}):  # <-\n    A[i] = 1.0", "T.serial: the extent must be", NOT_INTEGERS),
    ("parallel-extent", "for i in T.Parallel({v}):  # <-\n    A[i] = 1.0", "T.Parallel: extent 0 must be",
     NOT_INTEGERS),
    ("unroll-extent", "for i in T.unroll({v}):  # <-\n    A[i] = 1.0", "T.unroll: the extent must be", NOT_INTEGERS),
    ("pipelined-extent", "for i in T.Pipelined({v}, num_stages=2):  # <-\n    A[i] = 1.0",
     "T.Pipelined: the extent must be", NOT_INTEGERS),
    ("num-stages", "for i in T.Pipelined(4, num_stages={v}):  # <-\n    A[i] = 1.0",
     "T.Pipelined: num_stages must be a non-negative constant", NOT_INTEGERS),
    ("fill-value", "T.fill(s, {v})  # <-", "T.fill: the value must be a number", NOT_NUMBERS),
    ("store-value", "A[0] = {v}  # <-", "the value stored in A must be a number", NOT_NUMBERS + (BARRIER,)),
    ("parity", "T.barrier_wait(mbar, {v})  # <-", "T.barrier_wait: the parity must be",
     (STRING, BUFFER, LIST, DTYPE, FLOAT)),
    ("exp", "A[0] = T.exp({v})  # <-", "T.exp: the argument must be a number", NOT_NUMBERS),
    ("sqrt", "A[0] = T.sqrt({v})  # <-", "T.sqrt: the argument must be a number", NOT_NUMBERS),
    ("abs", "A[0] = T.abs({v})  # <-", "T.abs: the argument must be a number", NOT_NUMBERS),
    ("max", "A[0] = T.max(A[1], {v})  # <-", "T.max: the second argument must be a number", NOT_NUMBERS),
    ("min", "A[0] = T.min({v}, A[1])  # <-", "T.min: the first argument must be a number", NOT_NUMBERS),
    ("cast-value", "A[0] = T.cast({v}, T.float32)  # <-", "T.cast: the value must be a number", NOT_NUMBERS),
    ("select", "A[0] = T.if_then_else(bx < 2, {v}, 1.0)  # <-", "T.if_then_else: the first value must be a number",
     NOT_NUMBERS),
    ("ceildiv", "x = T.ceildiv({v}, 4)  # <-", "T.ceildiv: the dividend must be", NOT_INTEGERS),
    ("load-index", "A[0] = A[{v}]  # <-", "index 0 of A must be", NOT_INTEGERS),
    ("store-index", "A[{v}] = 1.0  # <-", "index 0 of A must be", NOT_INTEGERS),
    ("slice-start", "T.copy(A[{v}:64], B[0:64])  # <-", "the start of slice 0 of A must be",
     (STRING, BUFFER, LIST, DTYPE, FLOAT)),
    ("barrier-slot", "T.barrier_arrive(mbar[{v}])  # <-", "the slot of barrier mbar must be", NOT_INTEGERS),
    ("barrier-count", "m = T.alloc_barrier({v})  # <-", "T.alloc_barrier: an arrive count must be",
     (STRING, BUFFER, NONE, DTYPE, FLOAT)),
    ("add-operand", "A[0] = A[1] + {v}  # <-", "the other operand of `\\+` must be a number",
     (STRING, NONE, LIST, DTYPE)),
    ("add-buffer", "A[0] = A[1] + {v}  # <-", "{named} cannot be used as a number in a kernel \\(index it", (BUFFER,)),
    ("compare-operand", "if A[1] < {v}:  # <-\n    A[0] = 1.0", "{named} cannot be used as a number", NOT_NUMBERS),
    ("alloc-var-init", "x = T.alloc_var(T.int32, init={v})  # <-", "T.alloc_var: init must be a number",
     (STRING, BUFFER, LIST, DTYPE)),
    ("copy-source", "T.copy({v}, s)  # <-", "T.copy source must be", (STRING, NONE, LIST, DTYPE, FLOAT)),
    ("gemm-accumulator", 'a = T.alloc_shared((64, 64), "float16")\nT.gemm(a, a, {v})  # <-', "T.gemm C must be",
     (STRING, NONE, FLOAT)),
]


def _case(place, body, words, value):
    text, named = value
    if place == "grid":
        source = kernel("A[0] = 1.0", head=f"with T.Kernel({text}, threads=128) as bx:  # <-")
    elif place == "threads":
        source = kernel("A[0] = 1.0", head=f"with T.Kernel(4, threads={text}) as bx:  # <-")
    else:
        source = kernel(PRELUDE + body.replace("{v}", text))
    if "{named}" in words:
        return Bad(f"{place}-{text}", source, words.replace("{named}", _escape(named)))
    return Bad(f"{place}-{text}", source, f"{words}.*{_escape(named)}")


def _escape(text):
    return text.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")


DTYPES = [
    ("tensor-annotation", 'def main(A: T.Tensor((128,), "flaot16")):  # <-', "T.Tensor: unknown data type 'flaot16'"),
    ("tensor-annotation-number", "def main(A: T.Tensor((128,), 16)):  # <-", "T.Tensor: unknown data type 16"),
    ("strided-annotation", 'def main(A: T.StridedTensor((4, 32), (40, 1), "f32")):  # <-',
     "T.StridedTensor: unknown data type 'f32'"),
]

BODY_DTYPES = [
    ("alloc-shared-dtype", 'x = T.alloc_shared((64,), "halfish")  # <-', "T.alloc_shared: unknown data type 'halfish'"),
    ("alloc-fragment-dtype", "x = T.alloc_fragment((64,), None)  # <-", "T.alloc_fragment: unknown data type None"),
    ("cast-dtype", 'A[0] = T.cast(A[1], "float99")  # <-', "T.cast: unknown data type 'float99'"),
    ("infinity-dtype", 'A[0] = T.infinity("big")  # <-', "T.infinity: unknown data type 'big'"),
    ("dtype-call-string", 'A[0] = T.float32("x")  # <-', "the string 'x' cannot be used as a number"),
    ("dtype-call-truncates", "x = T.int32(2.5)  # <-", "2.5 is not a whole number"),
    ("dtype-call-overflow", "x = T.int8(300)  # <-", "300 does not fit int8"),
    ("dtype-call-half-overflow", "A[0] = T.float16(70000.0)  # <-", "beyond the largest finite float16"),
    ("bitwise-float-and", "A[0] = A[1] & 1  # <-", "`&` takes integers, but .* is float32"),
    ("bitwise-float-shift", "x = bx << 2.5  # <-", "`<<` takes integers"),
    ("bitwise-float-or", "x = 1.5 | bx  # <-", "`\\|` takes integers"),
    ("bitwise-float-xor", "A[0] = A[1] ^ A[2]  # <-", "`\\^` takes integers"),
    ("float-index-expr", "A[0] = A[bx * 0.5]  # <-", "index 0 of A must be an integer, not a float32 kernel value"),
    ("float-store-index-expr", "A[bx / 2] = 1.0  # <-", "index 0 of A must be an integer, not a float32"),
    ("float-barrier-slot", PRELUDE + "T.barrier_arrive(mbar[bx / 2])  # <-",
     "the slot of barrier mbar must be an integer"),
    ("float-parity", PRELUDE + "T.barrier_wait(mbar, bx / 2)  # <-", "the parity must be an integer"),
    ("float-extent", "for i in T.serial(bx / 2):  # <-\n    A[i] = 1.0", "T.serial: the extent must be an integer"),
    ("bool-index", "A[0] = A[True]  # <-", "index 0 of A must be an integer, not the bool True"),
    ("compare-index", "A[0] = A[bx < 2]  # <-", "index 0 of A must be an integer"),
    ("barrier-in-arithmetic", PRELUDE + "x = mbar[0] + 1  # <-",
     "the barrier slot mbar\\[0\\] cannot be used as a number"),
    ("threads-list", None, "threads must be a constant between 1 and 1024, got the float 2.5"),
    ("parity-missing", PRELUDE + "T.barrier_wait(mbar, None)  # <-", "T.barrier_wait needs a parity"),
    ("region-in-arithmetic", "x = A[0:4] + 1  # <-", "a slice of A cannot be used as a number"),
    ("buffer-in-arithmetic", "x = A * 2  # <-", "the global buffer A cannot be used as a number"),
    ("store-int-truncates", 'x = T.alloc_local((4,), "int32")\nx[0] = 2.5  # <-', "2.5 is not a whole number"),
    ("store-uint8-overflow", 'x = T.alloc_local((4,), "uint8")\nx[0] = 256  # <-', "256 does not fit uint8"),
    ("store-negative-unsigned", 'x = T.alloc_local((4,), "uint32")\nx[1] = -1  # <-', "-1 does not fit uint32"),
    ("fill-half-overflow", 's = T.alloc_shared((64,), "float16")\nT.fill(s, 1e6)  # <-',
     "beyond the largest finite float16"),
    ("fill-int-fraction", 's = T.alloc_shared((64,), "int32")\nT.fill(s, 0.5)  # <-', "0.5 is not a whole number"),
    ("pointer-arithmetic", None, "a pointer cannot take part in"),
]


def _dtype_case(name, line, match):
    return Bad(f"dtype-{name}", f"@T.prim_func\n{line}\n    with T.Kernel(1, threads=128):\n        pass\n", match)


def _body_case(name, body, match):
    if name == "threads-list":
        return Bad(f"dtype-{name}", kernel("A[0] = 1.0", head="with T.Kernel(4, threads=[128, 2.5]) as bx:  # <-"), match)
    if name == "pointer-arithmetic":
        return Bad(f"dtype-{name}", kernel("x = P[0] + 16  # <-", params="P: T.Tensor((1,), T.ptr)"), match)
    return Bad(f"dtype-{name}", kernel(body), match)


CASES = check_unique(
    [_case(place, body, words, v) for place, body, words, values in PLACES for v in values]
    + [_dtype_case(*d) for d in DTYPES]
    + [_body_case(*d) for d in BODY_DTYPES]
)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_a_value_of_the_wrong_kind_is_named_with_its_place(case):
    check_bad(case)
