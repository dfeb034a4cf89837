"""The C launch path reading tensors through DLPack's C exchange API (backend/fastcall.c,
``use_exchange_api``), without a GPU: a stand-in table (tests/fake_exchange_api.c, built here with
the C compiler) answers for a stand-in tensor type. The launcher must accept exactly what it
accepts when it reads the tensors' attributes, take the stream from the table, and read by
attributes whatever the table cannot read. tests/gpu/test_launch.py runs torch's own table."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests import test_fastcall
from tests.test_fastcall import FLOAT, HALF, FakeTensor, dry_launcher, needs_compiler
from tileworkbench.backend import fastcall
from tileworkbench.errors import KernelRuntimeError

pytestmark = needs_compiler
mod = test_fastcall.mod  # the built module, as tests/test_fastcall.py builds it

DL_FLOAT, DL_CPU, DL_CUDA = 2, 1, 2
DL_DTYPES = {HALF: (DL_FLOAT, 16, 1), FLOAT: (DL_FLOAT, 32, 1)}


class ViewedTensor(FakeTensor):
    """A stand-in tensor that also describes itself to the stand-in table (``dl``); ``unreadable``:
    the table fails for it, as torch's does for a tensor DLPack cannot describe."""

    unreadable = False
    byte_offset = 0
    row_major_as_none = False  # strides given as NULL (row-major), as DLPack allows

    @property
    def dl(self):
        if self.unreadable:
            return None
        device = (DL_CUDA, self.device) if self.device >= 0 else (DL_CPU, 0)
        strides = None if self.row_major_as_none else tuple(self.strides)
        return (*DL_DTYPES[self.dtype], *device, self.ptr - self.byte_offset, tuple(self.shape), strides,
                self.byte_offset)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """The stand-in table's module, built from tests/fake_exchange_api.c."""
    source = Path(__file__).with_name("fake_exchange_api.c")
    out = tmp_path_factory.mktemp("fake") / f"fake_exchange_api{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    compiler = shutil.which("cc") or shutil.which("gcc")
    layouts = Path(fastcall.__file__).parent  # dlpack_exchange.h, which fastcall.c reads the table by
    subprocess.run([compiler, "-O1", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", f"-I{layouts}",
                    str(source), "-o", str(out)], check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("fake_exchange_api", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reading(mod, table, specs=None, probes=None, **kwargs):
    """A dry launcher on ViewedTensor that reads through the stand-in table."""
    launch = dry_launcher(mod, tensor_type=ViewedTensor, **kwargs) if specs is None else mod.Launcher(
        "k", 0, (1, 1, 1), (32, 1, 1), 0, 0, specs, (), ViewedTensor, lambda: 0, lambda d: 0x5000 + d,
        KernelRuntimeError, None)
    n = 3 if specs is None else len(specs)
    dtypes = [FLOAT if i == 2 else HALF for i in range(n)] if specs is None else [s[0] for s in specs]
    probes = probes or [ViewedTensor((0,), d) for d in dtypes]
    assert launch.use_exchange_api(table.capsule(), tuple(probes)) is True
    assert launch.tensor_reader == "dlpack"
    return launch


def args():
    """Three tensors the launchers here take: two half inputs and the float output."""
    return (ViewedTensor((128, 64), ptr=0x1000), ViewedTensor((128, 64), ptr=0x2000),
            ViewedTensor((128, 64), FLOAT, ptr=0x3000))


def test_a_call_reads_each_tensor_once_and_the_stream_from_the_table(mod, table):
    launch = reading(mod, table)
    a, b, c = args()
    before = table.reads()
    assert launch(a, b, c) is c
    assert table.reads() == (before[0] + 3, before[1] + 1)
    assert launch.last_launch == (0x7000, (0x1000, 0x2000, 0x3000))  # the table's stream, not get_stream's


def test_an_explicit_stream_asks_the_table_for_none(mod, table):
    launch = reading(mod, table)
    before = table.reads()
    launch(*args(), stream=0x42)
    assert table.reads()[1] == before[1] and launch.last_launch[0] == 0x42


def test_the_address_counts_the_byte_offset(mod, table):
    launch = reading(mod, table)
    a, b, c = args()
    a.byte_offset = 0x40  # data 0xfc0 + 0x40 bytes: the tensor starts at 0x1000
    assert launch(a, b, c) is c and launch.last_launch[1][0] == 0x1000


@pytest.mark.parametrize("change", [
    dict(dtype=FLOAT), dict(shape=(128, 32)), dict(shape=(128, 64, 1), strides=(64, 1, 1)), dict(strides=(1, 128)),
    dict(device=1), dict(device=-1), dict(ptr=0x1008)])
def test_what_the_attributes_would_refuse_is_handed_back(mod, table, change):
    launch = reading(mod, table)
    a, b, c = args()
    for name, value in change.items():
        setattr(a, name, value)
    before = table.reads()[0]
    assert launch(a, b, c) is NotImplemented
    assert table.reads()[0] == before + 1  # refused on what the table read: no attribute reads after it
    by_attributes = dry_launcher(mod, tensor_type=ViewedTensor)  # the same verdict without the table
    assert by_attributes(a, b, c) is NotImplemented


def test_row_major_allows_any_stride_on_a_dimension_of_one_element(mod, table):
    specs = ((HALF, (1, 64), (64, 1), 16, False, None),)
    launch = reading(mod, table, specs=specs)
    assert launch(ViewedTensor((1, 64), strides=(7, 1))) is None  # torch's is_contiguous() says yes too
    assert launch(ViewedTensor((1, 64), strides=(64, 2))) is NotImplemented
    row_major = ViewedTensor((1, 64))
    row_major.row_major_as_none = True
    assert launch(row_major) is None


def test_other_strides_must_match_and_are_not_row_major(mod, table):
    specs = ((HALF, (128, 64), (1, 128), 16, False, None),)  # a column-major parameter
    launch = reading(mod, table, specs=specs)
    assert launch(ViewedTensor((128, 64), strides=(1, 128))) is None
    row_major = ViewedTensor((128, 64), strides=(1, 128))
    row_major.row_major_as_none = True  # NULL strides are row-major: not this parameter's
    assert launch(row_major) is NotImplemented


def test_a_tensor_the_table_cannot_read_is_read_by_its_attributes(mod, table):
    launch = reading(mod, table)
    a, b, c = args()
    a.unreadable = True
    assert launch(a, b, c) is c and launch.last_launch[1] == (0x1000, 0x2000, 0x3000)
    a.dtype = FLOAT  # and refused by them where they refuse it
    assert launch(a, b, c) is NotImplemented


def test_a_dtype_the_table_cannot_read_keeps_the_attribute_reads_for_that_parameter(mod, table):
    unreadable_probe = ViewedTensor((0,), HALF)
    unreadable_probe.unreadable = True
    launch = reading(mod, table, probes=[unreadable_probe, ViewedTensor((0,)), ViewedTensor((0,), FLOAT)])
    before = table.reads()[0]
    a, b, c = args()
    assert launch(a, b, c) is c
    assert table.reads()[0] == before + 2  # b and c through the table, a by its attributes


def test_the_outputs_made_are_read_through_the_table_too(mod, table):
    launch = reading(mod, table)
    FakeTensor.made.clear()

    def new_empty(self, shape, dtype):
        out = ViewedTensor(shape, dtype, ptr=0x90000)
        FakeTensor.made.append(out)
        return out

    a, b, _ = args()
    ViewedTensor.new_empty = new_empty
    try:
        out = launch(a, b)
    finally:
        del ViewedTensor.new_empty
    assert FakeTensor.made == [out] and launch.last_launch == (0x7000, (0x1000, 0x2000, 0x90000))


def test_a_table_of_another_major_version_is_not_taken(mod, table):
    launch = dry_launcher(mod, tensor_type=ViewedTensor)
    probes = (ViewedTensor((0,)), ViewedTensor((0,)), ViewedTensor((0,), FLOAT))
    assert launch.use_exchange_api(table.capsule(1), probes) is False
    assert launch.tensor_reader == "attributes"
    assert launch(*args()) is not NotImplemented and launch.last_launch[0] == 0x5000


def test_one_probe_per_parameter(mod, table):
    launch = dry_launcher(mod, tensor_type=ViewedTensor)
    with pytest.raises(ValueError, match="one per tensor parameter"):
        launch.use_exchange_api(table.capsule(), (ViewedTensor((0,)),))
    with pytest.raises(ValueError):  # not the capsule of an exchange API
        launch.use_exchange_api(object(), ())


def test_read_through_exchange_api_takes_the_tensor_types_capsule(mod, table, caplog):
    class Offering(ViewedTensor):
        pass

    probes = [ViewedTensor((0,)), ViewedTensor((0,)), ViewedTensor((0,), FLOAT)]
    assert fastcall.read_through_exchange_api(dry_launcher(mod, tensor_type=ViewedTensor), ViewedTensor,
                                              probes) is False  # the type offers none
    Offering.__dlpack_c_exchange_api__ = table.capsule()
    launch = dry_launcher(mod, tensor_type=Offering)
    assert fastcall.read_through_exchange_api(launch, Offering, probes) is True and launch.tensor_reader == "dlpack"
    Offering.__dlpack_c_exchange_api__ = "not a capsule"
    launch = dry_launcher(mod, tensor_type=Offering)
    with caplog.at_level("INFO", logger="tileworkbench"):
        assert fastcall.read_through_exchange_api(launch, Offering, probes) is False
    assert launch.tensor_reader == "attributes" and "is not DLPack's exchange API" in caplog.text


def test_a_changed_header_is_a_new_build(tmp_path, monkeypatch):
    fastcall._state.clear()
    assert fastcall.module(tmp_path) is not None
    first = {f.name for f in (tmp_path / "fastcall").iterdir()}
    header = tmp_path / "dlpack_exchange.h"
    header.write_text(fastcall.HEADERS[0].read_text() + "/* changed */\n")
    monkeypatch.setattr(fastcall, "HEADERS", (header,))
    fastcall._state.clear()
    assert fastcall.module(tmp_path) is not None
    second = {f.name for f in (tmp_path / "fastcall").iterdir()}
    assert len(first) == len(second) == 1 and first != second  # built again (and the older build removed)
    fastcall._state.clear()


def test_the_stand_in_table_refuses_a_description_it_cannot_read(mod, table):
    launch = reading(mod, table)
    a, b, c = args()
    a.strides = (64,)  # shorter than the shape: the stand-in fails the read, the attributes then refuse
    before = table.reads()[0]
    assert launch(a, b, c) is NotImplemented and table.reads()[0] == before + 1
