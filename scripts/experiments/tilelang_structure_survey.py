"""Experiment: TileLang's examples as both compilers lay them out, on the CPU machine (no GPU):
threads per block (a producer warpgroup added or not), registers and spill bytes, side by side.

Two runs write one folder, then a third compares:

    PYTHONPATH=. python3 scripts/experiments/tilelang_structure_survey.py ours EXAMPLES OUT
    python3.12 scripts/experiments/tilelang_structure_survey.py theirs EXAMPLES OUT --site SITE
    python3 scripts/experiments/tilelang_structure_survey.py compare EXAMPLES OUT

``ours`` builds each case of ``tilelang_examples.py`` (the same files, sizes and calls) with
tileworkbench standing in for tilelang and keeps the CUDA and ptxas's registers and spills (NVRTC);
``theirs`` builds the same cases with TileLang 0.1.15 (its unpacked site, Python 3.12; torch and the
examples' other imports answered by stand-ins, TileLang's GPU compile intercepted and its prim_func
lowered for sm_90a, as ``tilelang_source_on_cpu.py`` does) and compiles the CUDA with nvcc
(``/usr/local/cuda*/bin/nvcc``, TileLang's headers and CUTLASS from its site) for the same numbers.
``compare`` prints a markdown table: where one compiler splits the block and the other does not,
and where one spills. Structure only: what runs faster is the GPU's to say.
"""

from __future__ import annotations

import glob
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\((\d+)")


def _cases(examples: Path, only: list):
    import tilelang_examples as te
    return te, [(file, make) for file, make in te.CASES if not only or any(part in file for part in only)]


def _key(file: str, index: int) -> str:
    return f"{file.replace('/', '__')[:-3]}.{index}"


def _survey(examples: Path, out: Path, cases, side: str, measure) -> None:
    """Each case built by ``measure(module, make) -> record fields``, its record (or what stopped
    it, in the table's one-line form) written to ``OUT/<case>.<side>.json`` and printed."""
    import tilelang_examples as te
    seen: dict = {}
    for file, make in cases:
        index = seen[file] = seen.get(file, -1) + 1
        record = {"file": file}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                record.update(measure(te._load(examples / file), make, _key(file, index)))
        except BaseException as exc:  # noqa: BLE001 - the table says what stopped it, TileLang's own failures too
            if isinstance(exc, KeyboardInterrupt):
                raise
            record["error"] = te._first_line(exc)
        (out / f"{_key(file, index)}.{side}.json").write_text(json.dumps(record))
        print(file, record.get("error") or f"{record['threads']} threads, {record.get('registers')} registers")


def ours(examples: Path, out: Path, only: list):
    import tileworkbench as tw
    te, cases = _cases(examples, only)
    te._install(examples)

    def measure(module, make, key):
        built = make(module)
        if hasattr(built, "get_kernel_source"):
            source, resources = built.get_kernel_source(), built.trace.resources
        else:
            art = tw.lower(built, target="sm_90a")
            source, resources = art.kernel_source, art.trace.resources
        return {"threads": _threads(source), "registers": resources.get("registers"),
                "spills": resources.get("spills_bytes")}

    _survey(examples, out, cases, "ours", measure)


def theirs(examples: Path, out: Path, only: list, site: Path):
    sys.path[:0] = [str(site)]
    te, cases = _cases(examples, only)
    from tilelang_source_on_cpu import Captured, give_torch_types, intercept_compile, lower_for_sm90a

    class Finder(te._Finder):  # the examples' stand-ins, but ``tilelang`` is TileLang's own
        def find_spec(self, name, path=None, target=None):
            return None if name.split(".")[0] == "tilelang" else super().find_spec(name, path, target)

        def create_module(self, spec):
            module = super().create_module(spec)
            if spec.name == "torch":
                give_torch_types(module)
            return module

    stand_ins = {"torch", "einops", "fla", "triton", "scipy", "tqdm", "FLA_KDA"}
    sys.meta_path.insert(0, Finder(stand_ins))
    import tilelang  # noqa: F401 - TileLang's JIT, whose compile is intercepted below

    intercept_compile()
    # the cases call ``.fn(...)`` on a jitted builder for its prim_func (our JitFunction's name for
    # the builder); TileLang's JITImpl gives it by ``get_tir``, with the pass configs its @jit names
    from tilelang.autotuner.tuner import AutoTuneImpl
    from tilelang.jit import JITImpl

    def builder(impl):
        def fn(*args, **kwargs):
            raise Captured(impl.get_tir(*args, **kwargs), impl.pass_configs)
        return fn

    JITImpl.fn = property(builder)
    AutoTuneImpl.fn = property(lambda self: builder(self.jit_impl))
    nvcc = sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))

    def measure(module, make, key):
        configs = {}
        try:
            func = make(module)
        except Captured as captured:
            func, configs = captured.func, captured.pass_configs
        source = lower_for_sm90a(func, configs)
        record = {"threads": _threads(source)}
        if nvcc:
            record.update(_ptxas(nvcc[-1], source, site, out / f"{key}.theirs.cu"))
        return record

    _survey(examples, out, cases, "theirs", measure)


def _threads(source: str):
    found = LAUNCH_BOUNDS.search(source)
    return int(found.group(1)) if found else None


def _ptxas(nvcc: str, source: str, site: Path, path: Path) -> dict:
    path.write_text(source)
    include = site / "tilelang"
    done = subprocess.run([nvcc, "-std=c++17", "-arch=sm_90a", "-cubin", "-o", "/dev/null", "-Xptxas", "-v", "-w",
                           "-DENABLE_BF16", f"-I{include / 'src'}", f"-I{include / '3rdparty/cutlass/include'}",
                           str(path)], capture_output=True, text=True, timeout=300, check=False)
    log = done.stdout + done.stderr
    registers = re.findall(r"Used (\d+) registers", log)
    spills = re.findall(r"(\d+) bytes spill stores", log)
    if not registers:
        return {"nvcc_error": log.strip().splitlines()[-1][:160] if log.strip() else "no report"}
    return {"registers": max(map(int, registers)), "spills": max(map(int, spills or [0]))}


def compare(out: Path):
    print("| example | threads ours / TileLang | registers ours / TileLang | spill bytes ours / TileLang | note |")
    print("| --- | --- | --- | --- | --- |")
    split_differs = spills_more = both = 0
    for path in sorted(out.glob("*.ours.json")):
        mine = json.loads(path.read_text())
        other = out / path.name.replace(".ours.json", ".theirs.json")
        if "error" in mine or not other.exists() or "error" in json.loads(other.read_text()):
            continue
        them = json.loads(other.read_text())
        both += 1
        notes = []
        if mine["threads"] != them["threads"]:
            split_differs += 1
            notes.append("block split differently")
        if (mine.get("spills") or 0) > (them.get("spills") or 0):
            spills_more += 1
            notes.append("ours spills more")
        if notes:
            print(f"| {mine['file']} | {mine['threads']} / {them['threads']} | {mine['registers']} / "
                  f"{them.get('registers')} | {mine.get('spills')} / {them.get('spills')} | {', '.join(notes)} |")
    print(f"\n{both} cases built by both; the block split differently in {split_differs}; ours spills more in "
          f"{spills_more}")


if __name__ == "__main__":
    mode, rest = sys.argv[1], sys.argv[2:]
    if mode == "compare":
        compare(Path(rest[1]))
    else:
        site = None
        if "--site" in rest:
            at = rest.index("--site")
            site, rest = Path(rest[at + 1]), rest[:at] + rest[at + 2:]
        examples, out, only = Path(rest[0]), Path(rest[1]), rest[2:]
        out.mkdir(parents=True, exist_ok=True)
        (ours(examples, out, only) if mode == "ours" else theirs(examples, out, only, site))
