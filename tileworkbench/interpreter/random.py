"""The threads' random-number generators on the CPU: ``tw/random.h``'s Philox 4x32-10, one per
thread of a block, stepped as the GPU steps it (cuRAND's ``curandStatePhilox4_32_10_t``), held
as numpy arrays over the block's threads so that a statement's draws for all its running threads
are one vector operation. The integers and the uniform floats are the GPU's bit for bit; the
normal floats go through numpy's ``log``, ``sqrt``, ``sin`` and ``cos``, which may differ from
CUDA's in the last place."""

from __future__ import annotations

import numpy as np

from ..errors import KernelRuntimeError

M0, M1, W0, W1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
LOW = np.uint64(0xFFFFFFFF)
TWO_PI = 6.2831853071795865


def philox_block(counter: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Philox 4x32-10 of ``counter`` (n x 4 uint32, word 0 lowest) under ``key`` (n x 2)."""
    c = counter.astype(np.uint64)
    k = key.copy()
    for r in range(10):
        p0, p1 = M0 * c[:, 0], M1 * c[:, 2]
        k64 = k.astype(np.uint64)
        c = np.stack([(p1 >> np.uint64(32)) ^ c[:, 1] ^ k64[:, 0], p1 & LOW,
                      (p0 >> np.uint64(32)) ^ c[:, 3] ^ k64[:, 1], p0 & LOW], axis=1)
        k = np.stack([k[:, 0] + W0, k[:, 1] + W1], axis=1)
    return c.astype(np.uint32)


class Generators:
    """One generator per thread of a block (module doc); ``act``: the running threads' indices."""

    def __init__(self, threads: int):
        self.counter = np.zeros((threads, 4), np.uint32)
        self.key = np.zeros((threads, 2), np.uint32)
        self.output = np.zeros((threads, 4), np.uint32)
        self.at = np.zeros(threads, np.int64)
        self.started = np.zeros(threads, bool)
        self.normal = np.zeros(threads, np.float32)
        self.has_normal = np.zeros(threads, bool)
        self.normal_double = np.zeros(threads, np.float64)
        self.has_normal_double = np.zeros(threads, bool)

    def init(self, act: np.ndarray, seed, seq, off):
        n = act.size
        seed, seq, off = (np.broadcast_to(np.asarray(v).astype(np.int64).view(np.uint64), (n,)) for v in (seed, seq, off))
        counter = np.zeros((n, 4), np.uint32)
        counter[:, 2], counter[:, 3] = (seq & LOW).astype(np.uint32), (seq >> np.uint64(32)).astype(np.uint32)
        counter = advanced(counter, off >> np.uint64(2))
        key = np.stack([(seed & LOW).astype(np.uint32), (seed >> np.uint64(32)).astype(np.uint32)], axis=1)
        self.counter[act], self.key[act] = counter, key
        self.output[act] = philox_block(counter, key)
        self.at[act] = (off & np.uint64(3)).astype(np.int64)
        self.started[act] = True
        self.has_normal[act] = False
        self.has_normal_double[act] = False

    def rand(self, act: np.ndarray) -> np.ndarray:
        if not self.started[act].all():
            raise KernelRuntimeError("a thread draws a random number before its T.rng_init ran (it was under an "
                                     "`if` or in a loop the thread skipped)")
        word = self.output[act, self.at[act]]
        self.at[act] += 1
        spent = act[self.at[act] == 4]
        if spent.size:
            self.counter[spent] = advanced(self.counter[spent], np.uint64(1))
            self.output[spent] = philox_block(self.counter[spent], self.key[spent])
            self.at[spent] = 0
        return word

    def uniform(self, act: np.ndarray) -> np.ndarray:
        scale = np.float32(2.0 ** -32)
        return self.rand(act).astype(np.float32) * scale + scale / np.float32(2)

    def uniform_double(self, act: np.ndarray) -> np.ndarray:
        a = self.rand(act).astype(np.uint64)
        b = self.rand(act).astype(np.uint64)
        z = a ^ (b << np.uint64(21))
        return z.astype(np.float64) * 2.0 ** -53 + 2.0 ** -54

    def normal_value(self, act: np.ndarray) -> np.ndarray:
        return self._normal(act, np.float32, self.uniform, self.normal, self.has_normal)

    def normal_double_value(self, act: np.ndarray) -> np.ndarray:
        return self._normal(act, np.float64, self.uniform_double, self.normal_double, self.has_normal_double)

    @staticmethod
    def _normal(act, dtype, uniform, kept, has):
        """Box-Muller: threads holding a pair's second value take it, the others draw a new pair
        (two uniforms: the sine side now, the cosine side kept)."""
        out = np.zeros(act.size, dtype)
        waiting = has[act]
        out[waiting] = kept[act[waiting]]
        has[act[waiting]] = False
        fresh = act[~waiting]
        if fresh.size:
            u = uniform(fresh)
            v = uniform(fresh) * dtype(TWO_PI)
            s = np.sqrt(dtype(-2) * np.log(u)).astype(dtype)
            out[~waiting] = (s * np.sin(v)).astype(dtype)
            kept[fresh] = (s * np.cos(v)).astype(dtype)
            has[fresh] = True
        return out


def advanced(counter: np.ndarray, n) -> np.ndarray:
    """The 128-bit counters (n x 4 uint32, word 0 lowest) plus ``n`` (64-bit, per row or one)."""
    words = counter.astype(np.uint64)
    n = np.broadcast_to(np.asarray(n, np.uint64), (counter.shape[0],))
    total = words[:, 0] + (n & LOW)
    words[:, 0] = total & LOW
    total = words[:, 1] + (n >> np.uint64(32)) + (total >> np.uint64(32))
    words[:, 1] = total & LOW
    total = words[:, 2] + (total >> np.uint64(32))
    words[:, 2] = total & LOW
    words[:, 3] = (words[:, 3] + (total >> np.uint64(32))) & LOW
    return words.astype(np.uint32)
