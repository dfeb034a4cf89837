/* tileworkbench's C launch path (issue 18): one call of a kernel whose parameters are all tensors,
 * checked and launched without a Python frame per argument.
 *
 * backend/fastcall.py compiles this file with the system's C compiler on first use (as Triton
 * builds its launchers) and keeps the module in the compile cache. A Launcher is made per
 * (kernel, device) from the kernel's fast-call plan (codegen/host.py: shapes, strides, dtypes,
 * alignments, grid, block, shared memory) and called with the call's arguments:
 *
 *   - every argument must be a torch.Tensor (that exact type) with the plan's dtype, shape and
 *     strides, on the launcher's device (which must be the current one), its address aligned as
 *     the plan says: the checks the generated Python launcher's fast branch makes (Runtime.tensor).
 *     Where the tensor type offers DLPack's C exchange API (`__dlpack_c_exchange_api__`, torch
 *     2.10 on; `use_exchange_api`), one C call of it reads all of that, and another gives the
 *     current stream; else (or where it fails for a tensor) five attribute reads do;
 *   - the outputs may be left out: each is then made by `empty_like(template)` (a template the
 *     plan gives: an expanded scalar of the output's dtype, shape and device, which holds no
 *     memory) or else `like.new_empty(shape, dtype=...)` with `like` the first input, on torch's
 *     current stream (the one the launch goes on), and checked like the others;
 *   - each TMA tensor map the kernel takes (after its tensors) is the one `encode(address)` gave
 *     for the address of the tensor it describes: encoded again only when that address changes
 *     (Runtime.encode_tiled, which keeps them, does the encoding and its checks);
 *   - the launch goes on torch's current stream of the device (`get_stream(device)`), from a
 *     thread whose current CUDA context is the one the kernel was loaded in, so its device is the
 *     current one (a thread with none yet is given it, as the CUDA runtime would give it; one with
 *     another takes the Python path; a dry launcher, which has no context, asks `get_device()`);
 *   - a call's addresses and maps stay on its own stack until the launch has read them, so
 *     threads may call one launcher at once.
 *
 * A launcher made for one set of a T.dynamic kernel's sizes (jit/sized_launch.py) passes those
 * sizes as constants between the tensors (`interleave`): the call gives the tensors only.
 *
 * `stream=` an int handle sends the launch there instead, when every argument is given (outputs
 * made here would belong to torch's current stream); `stream=None` is no stream given. Anything
 * else (another array type, a wrong dtype, shape, stride, device or alignment, another keyword or
 * stream, another argument count, an exception from an attribute) is handed back: the call goes
 * to `fallback` (the kernel's Python launcher, jit/kernel.py; the launcher is then the kernel's
 * `__call__`, so a call made here runs no Python frame) with the same arguments, or returns
 * NotImplemented where there is no fallback. The Python launcher accepts what it can (CuPy arrays,
 * strides that differ only in dimensions of one element) and raises its own message for the rest.
 * So this path changes how fast a call is, never what it accepts or which error it gives. A launch
 * the driver refuses raises `error_type` here, as the Python launcher's does.
 *
 * libcuda is opened with dlopen, so the module builds without the CUDA toolkit. A Launcher whose
 * function is 0 launches nothing: it keeps each call's stream and parameter values in
 * `last_launch` (the CPU tests check the checks that way).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "dlpack_exchange.h"

#define TW_MAX_PARAMS 32
#define TW_MAX_DIMS 8
#define TW_MAP_BYTES 128 /* a CUtensorMap */

typedef int (*launch_fn)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*,
                         void**, void**);
typedef int (*error_name_fn)(int, const char**);
typedef int (*ctx_get_fn)(void**);
typedef int (*ctx_set_fn)(void*);
static launch_fn cu_launch = NULL;
static error_name_fn cu_error_name = NULL;
static ctx_get_fn cu_ctx_get_current = NULL;
static ctx_set_fn cu_ctx_set_current = NULL;

static PyObject *s_dtype, *s_shape, *s_stride, *s_is_contiguous, *s_get_device, *s_data_ptr, *s_new_empty;
static PyObject* kw_dtype; /* ("dtype",): new_empty's keyword */

/* One call's parameters. A call keeps them on its thread's stack (declared 128-byte aligned, for
 * the tensor maps): a launcher may be called from several threads at once, and a check or an
 * allocation can let the GIL go (torch's ops do), so nothing of a call lives in the launcher until
 * the launch has read it. */
typedef struct {
  unsigned long long values[TW_MAX_PARAMS];          /* the tensors' addresses */
  unsigned char maps[TW_MAX_PARAMS * TW_MAP_BYTES]; /* the tensor maps (offset 256: aligned as the Call) */
} Call;

typedef struct {
  PyObject* dtype;  /* the torch dtype the tensor must have (a strong reference) */
  PyObject* shape;  /* the shape as a tuple, for new_empty */
  int ndim;
  long long sizes[TW_MAX_DIMS];
  long long strides[TW_MAX_DIMS];
  unsigned long long align;
  int output;
  int contiguous;     /* the strides are the row-major ones: `is_contiguous()` checks them (no tuple) */
  PyObject* template; /* outputs: what empty_like makes the output from, or NULL */
  int dl_known;       /* the exchange API reads this dtype (dl_dtype: as it reads it) */
  uint8_t dl_code, dl_bits;
  uint16_t dl_lanes;
} Spec;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* name;
  unsigned long long function; /* CUfunction; 0: a dry launcher */
  unsigned grid[3], block[3], smem;
  long device;
  PyObject* device_obj; /* the device as a Python int, for get_stream */
  int nparams, ninputs, nout, like_at; /* nparams: the tensors (the call's arguments) */
  int out_at[TW_MAX_PARAMS];
  Spec spec[TW_MAX_PARAMS];
  int nmaps;                                  /* tensor maps, parameters nparams .. nparams + nmaps - 1 */
  int map_of[TW_MAX_PARAMS];                  /* the tensor each map describes */
  PyObject* encode[TW_MAX_PARAMS];            /* address -> the map's 128 bytes */
  unsigned long long map_address[TW_MAX_PARAMS]; /* the address each slot's map was encoded for (0: none) */
  unsigned char map_slots[TW_MAX_PARAMS * TW_MAP_BYTES]; /* the map kept for each map_address */
  PyObject *tensor_type, *get_device, *get_stream, *error_type, *empty_like;
  void* context; /* the CUcontext the function belongs to (current where the launcher was made) */
  Call last;     /* the last launch's parameters (repeat_last) */
  unsigned long long last_stream;
  PyObject* last_launch; /* dry launchers: (stream, (values...)) of the last call */
  PyObject* fallback;    /* what a call this path does not take goes to (NULL: it returns NotImplemented) */
  int nkernel;                              /* the kernel's parameters before its maps */
  int kernel_param[TW_MAX_PARAMS];          /* each: a tensor's index, or -1 - the constant's index */
  unsigned char constant[TW_MAX_PARAMS][8]; /* constants' bytes, as the kernel takes them (4 or 8) */
  long long constant_value[TW_MAX_PARAMS];  /* their values (what a dry launcher reports) */
  const ExchangeAPI* api; /* the tensor type's DLPack exchange API, or NULL: attributes are read */
  PyObject* api_capsule;  /* keeps the table's owner alive */
} Launcher;

/* 1: the ints of `seq` (a tuple, torch.Size included) are want[0..n); 0: they are not; -1: error. */
static int same_ints(PyObject* seq, const long long* want, int n) {
  if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) return 0;
  for (int i = 0; i < n; ++i) {
    long long x = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
    if (x == -1 && PyErr_Occurred()) return -1;
    if (x != want[i]) return 0;
  }
  return 1;
}

/* The checks by the tensor's attributes: 1, 0 or -1 as check_tensor. */
static int check_attributes(Launcher* self, PyObject* obj, const Spec* s, unsigned long long* ptr) {
  PyObject* v = PyObject_GetAttr(obj, s_dtype);
  if (v == NULL) return -1;
  int ok = v == s->dtype;
  Py_DECREF(v);
  if (!ok) return 0;
  v = PyObject_GetAttr(obj, s_shape);
  if (v == NULL) return -1;
  ok = same_ints(v, s->sizes, s->ndim);
  Py_DECREF(v);
  if (ok <= 0) return ok;
  if (s->contiguous) { /* row-major but in dimensions of one element, which the full check accepts too */
    v = PyObject_CallMethodNoArgs(obj, s_is_contiguous);
    if (v == NULL) return -1;
    ok = v == Py_True;
  } else {
    v = PyObject_CallMethodNoArgs(obj, s_stride);
    if (v == NULL) return -1;
    ok = same_ints(v, s->strides, s->ndim);
  }
  Py_DECREF(v);
  if (ok <= 0) return ok;
  v = PyObject_CallMethodNoArgs(obj, s_get_device);
  if (v == NULL) return -1;
  long device = PyLong_AsLong(v);
  Py_DECREF(v);
  if (device == -1 && PyErr_Occurred()) return -1;
  if (device != self->device) return 0;
  v = PyObject_CallMethodNoArgs(obj, s_data_ptr);
  if (v == NULL) return -1;
  *ptr = PyLong_AsUnsignedLongLong(v);
  Py_DECREF(v);
  if (PyErr_Occurred()) return -1;
  return *ptr % s->align == 0;
}

/* torch's is_contiguous() on what the exchange API read: the row-major strides, except that a
 * dimension of one element may have any stride and a tensor of no elements is contiguous. */
static int row_major_view(const DLTensorView* t) {
  if (t->strides == NULL) return 1;
  for (int d = 0; d < t->ndim; ++d)
    if (t->shape[d] == 0) return 1;
  long long expected = 1;
  for (int d = t->ndim - 1; d >= 0; --d) {
    if (t->shape[d] != 1 && t->strides[d] != expected) return 0;
    expected *= t->shape[d];
  }
  return 1;
}

/* The same checks on what one call of the exchange API reads; -2 where it cannot read the tensor
 * (its exception cleared: the attributes are read instead). */
static int check_view(Launcher* self, PyObject* obj, const Spec* s, unsigned long long* ptr) {
  DLTensorView t;
  if (self->api->dltensor_from_py_object_no_sync(obj, &t) != 0) {
    PyErr_Clear();
    return -2;
  }
  if (t.dtype.code != s->dl_code || t.dtype.bits != s->dl_bits || t.dtype.lanes != s->dl_lanes) return 0;
  if (t.ndim != s->ndim) return 0;
  for (int d = 0; d < s->ndim; ++d)
    if (t.shape[d] != s->sizes[d]) return 0;
  if (s->contiguous) {
    if (!row_major_view(&t)) return 0;
  } else {
    if (t.strides == NULL) return 0; /* row-major, which the plan's strides are not */
    for (int d = 0; d < s->ndim; ++d)
      if (t.strides[d] != s->strides[d]) return 0;
  }
  if (t.device.type != TW_DL_CUDA || t.device.id != self->device) return 0;
  *ptr = (unsigned long long)(uintptr_t)t.data + t.byte_offset;
  return *ptr % s->align == 0;
}

/* 1: `obj` is the tensor spec `s` asks for (its address in *ptr); 0: it is not; -1: error. */
static int check_tensor(Launcher* self, PyObject* obj, const Spec* s, unsigned long long* ptr) {
  if (Py_TYPE(obj) != (PyTypeObject*)self->tensor_type) return 0;
  if (self->api != NULL && s->dl_known) {
    int ok = check_view(self, obj, s, ptr);
    if (ok != -2) return ok;
  }
  return check_attributes(self, obj, s, ptr);
}

/* A call this path does not take: to the fallback with its arguments as they came, or NotImplemented. */
static PyObject* hand_back(Launcher* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  PyErr_Clear();
  if (self->fallback == NULL) Py_RETURN_NOTIMPLEMENTED;
  return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static long current_device(Launcher* self) {
  PyObject* d = PyObject_CallNoArgs(self->get_device);
  if (d == NULL) return -2;
  long device = PyLong_AsLong(d);
  Py_DECREF(d);
  return device;
}

/* Whether the calling thread can launch the function. A thread that has run no CUDA yet has no
 * current context (the driver would refuse a tensor map's encoding and the launch): it gets the
 * launcher's, its device's primary context, as the CUDA runtime gives a thread on its first call
 * there. 0: it can; 1: another context is current (not ours to launch from). */
static int own_context(Launcher* self) {
  if (self->function == 0) return current_device(self) != self->device; /* a dry launcher has no context */
  void* current = NULL;
  if (cu_ctx_get_current(&current) != 0) return 1;
  if (current == NULL) return cu_ctx_set_current(self->context) != 0;
  return current != self->context;
}

/* The launch on `stream`. 0: launched; -1: the driver refused (an exception is set). */
static int launch(Launcher* self, unsigned long long stream, Call* call) {
  void* params[TW_MAX_PARAMS];
  const int nkernel = self->nkernel;
  for (int k = 0; k < nkernel; ++k) {
    int at = self->kernel_param[k];
    params[k] = at >= 0 ? (void*)&call->values[at] : (void*)self->constant[-1 - at];
  }
  for (int m = 0; m < self->nmaps; ++m) params[nkernel + m] = call->maps + m * TW_MAP_BYTES;
  if (self->function == 0) { /* a dry launcher: the parameters' values, in the kernel's order */
    PyObject* values = PyTuple_New(nkernel + self->nmaps);
    if (values == NULL) return -1;
    for (int k = 0; k < nkernel; ++k) {
      int at = self->kernel_param[k];
      PyTuple_SET_ITEM(values, k, at >= 0 ? PyLong_FromUnsignedLongLong(call->values[at])
                                          : PyLong_FromLongLong(self->constant_value[-1 - at]));
    }
    for (int m = 0; m < self->nmaps; ++m)
      PyTuple_SET_ITEM(values, nkernel + m,
                       PyBytes_FromStringAndSize((const char*)call->maps + m * TW_MAP_BYTES, TW_MAP_BYTES));
    PyObject* last = Py_BuildValue("(KN)", stream, values);
    if (last == NULL) return -1;
    Py_XSETREF(self->last_launch, last);
    return 0;
  }
  int err;
  Py_BEGIN_ALLOW_THREADS
  err = cu_launch((void*)self->function, self->grid[0], self->grid[1], self->grid[2], self->block[0], self->block[1],
                  self->block[2], self->smem, (void*)stream, params, NULL);
  Py_END_ALLOW_THREADS
  if (err != 0) {
    const char* name = "an unknown error";
    if (cu_error_name != NULL) cu_error_name(err, &name);
    PyErr_Format(self->error_type,
                 "launching %U failed: %s (grid (%u, %u, %u), block (%u, %u, %u), %u bytes of shared memory)",
                 self->name, name, self->grid[0], self->grid[1], self->grid[2], self->block[0], self->block[1],
                 self->block[2], self->smem);
    return -1;
  }
  return 0;
}

/* The call's tensor maps: the launcher's kept map where its tensor's address is the one it was
 * encoded for, else `encode(address)` (kept for the next call). 0, or -1 with the encoder's
 * exception set. */
static int call_maps(Launcher* self, Call* call) {
  for (int m = 0; m < self->nmaps; ++m) {
    unsigned long long address = call->values[self->map_of[m]];
    unsigned char* slot = self->map_slots + m * TW_MAP_BYTES;
    if (address == self->map_address[m]) { /* no Python runs between the test and the copy */
      memcpy(call->maps + m * TW_MAP_BYTES, slot, TW_MAP_BYTES);
      continue;
    }
    PyObject* arg = PyLong_FromUnsignedLongLong(address);
    if (arg == NULL) return -1;
    PyObject* map = PyObject_CallOneArg(self->encode[m], arg);
    Py_DECREF(arg);
    if (map == NULL) return -1;
    if (!PyBytes_Check(map) || PyBytes_GET_SIZE(map) != TW_MAP_BYTES) {
      Py_DECREF(map);
      PyErr_SetString(PyExc_TypeError, "a tensor map encoder must return 128 bytes");
      return -1;
    }
    memcpy(call->maps + m * TW_MAP_BYTES, PyBytes_AS_STRING(map), TW_MAP_BYTES);
    memcpy(slot, PyBytes_AS_STRING(map), TW_MAP_BYTES);
    self->map_address[m] = address;
    Py_DECREF(map);
  }
  return 0;
}

static PyObject* launcher_call(PyObject* callable, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  Launcher* self = (Launcher*)callable;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  int explicit_stream = 0; /* stream=<an int handle>: the launch goes there (only with every argument given) */
  unsigned long long stream = 0;
  if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
    PyObject* value = args[n];
    if (PyTuple_GET_SIZE(kwnames) != 1 || !PyUnicode_Check(PyTuple_GET_ITEM(kwnames, 0)) ||
        PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "stream") != 0)
      return hand_back(self, args, nargsf, kwnames);
    if (value != Py_None) {
      if (n != self->nparams || !PyLong_CheckExact(value)) return hand_back(self, args, nargsf, kwnames);
      stream = PyLong_AsUnsignedLongLong(value);
      if (PyErr_Occurred()) return hand_back(self, args, nargsf, kwnames);
      explicit_stream = 1;
    }
  }
  if (n != self->nparams && n != self->ninputs) return hand_back(self, args, nargsf, kwnames);
  if (own_context(self) != 0) return hand_back(self, args, nargsf, kwnames);
  Call call __attribute__((aligned(128)));
  PyObject* full[TW_MAX_PARAMS];
  int made = n != self->nparams; /* the outputs are ours to make */
  for (int i = 0, j = 0; i < self->nparams; ++i) {
    if (made && self->spec[i].output) {
      full[i] = NULL;
    } else {
      full[i] = args[j++];
      int ok = check_tensor(self, full[i], &self->spec[i], &call.values[i]);
      if (ok <= 0) return hand_back(self, args, nargsf, kwnames);
    }
  }
  if (made) {
    PyObject* like = full[self->like_at];
    for (int i = 0; i < self->nparams; ++i) {
      if (!self->spec[i].output) continue;
      PyObject* out;
      if (self->spec[i].template != NULL) {
        out = PyObject_CallOneArg(self->empty_like, self->spec[i].template);
      } else { /* like.new_empty(shape, dtype=dtype) */
        PyObject* call_args[4] = {NULL, like, self->spec[i].shape, self->spec[i].dtype};
        out = PyObject_VectorcallMethod(s_new_empty, call_args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, kw_dtype);
      }
      full[i] = out;
      if (out == NULL || check_tensor(self, out, &self->spec[i], &call.values[i]) <= 0) {
        for (int k = 0; k <= i; ++k)
          if (self->spec[k].output) Py_XDECREF(full[k]);
        return hand_back(self, args, nargsf, kwnames);
      }
    }
  }
  PyObject* result = NULL;
  int launched = -1;
  if (call_maps(self, &call) < 0) goto done; /* the encoder's error (an unaligned tensor, ...) is raised */
  if (!explicit_stream && self->api != NULL) {
    void* current = NULL;
    if (self->api->current_work_stream(TW_DL_CUDA, (int32_t)self->device, &current) != 0) goto done;
    stream = (unsigned long long)(uintptr_t)current;
  } else if (!explicit_stream) {
    PyObject* stream_obj = PyObject_CallOneArg(self->get_stream, self->device_obj);
    if (stream_obj == NULL) goto done; /* an error from torch: raised as it is */
    stream = PyLong_AsUnsignedLongLong(stream_obj);
    Py_DECREF(stream_obj);
    if (PyErr_Occurred()) goto done;
  }
  launched = launch(self, stream, &call);
  if (launched < 0) goto done;
  memcpy(self->last.values, call.values, sizeof(call.values)); /* for repeat_last */
  memcpy(self->last.maps, call.maps, (size_t)self->nmaps * TW_MAP_BYTES);
  self->last_stream = stream;
  if (self->nout == 0) {
    result = Py_NewRef(Py_None);
  } else if (self->nout == 1) {
    result = Py_NewRef(full[self->out_at[0]]);
  } else {
    result = PyTuple_New(self->nout);
    if (result != NULL)
      for (int k = 0; k < self->nout; ++k) PyTuple_SET_ITEM(result, k, Py_NewRef(full[self->out_at[k]]));
  }
done:
  if (made)
    for (int i = 0; i < self->nparams; ++i)
      if (self->spec[i].output) Py_DECREF(full[i]);
  return result;
}

static int read_ints(PyObject* seq, long long* out, int max, const char* what) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == NULL) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (n > max) {
    Py_DECREF(fast);
    PyErr_Format(PyExc_ValueError, "%s: more than %d items", what, max);
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    out[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
    if (out[i] == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return -1;
    }
  }
  Py_DECREF(fast);
  return (int)n;
}

/* Launcher(name, function, grid, block, smem, device, specs, maps, tensor_type, get_device, get_stream,
 *          error_type, empty_like)
 * specs: one (dtype, shape, strides, align, is_output, template or None) per tensor parameter;
 * maps: one (index of the tensor it describes, encode) per tensor map parameter, in parameter order
 * after the tensors. */
static int launcher_init(PyObject* op, PyObject* args, PyObject* kwargs) {
  Launcher* self = (Launcher*)op;
  PyObject *name, *grid, *block, *specs, *maps, *tensor_type, *get_device, *get_stream, *error_type, *empty_like;
  unsigned long long function;
  unsigned smem;
  long device;
  if (kwargs != NULL && PyDict_GET_SIZE(kwargs) > 0) {
    PyErr_SetString(PyExc_TypeError, "Launcher takes its arguments by position");
    return -1;
  }
  if (!PyArg_ParseTuple(args, "UKOOIlOOOOOOO", &name, &function, &grid, &block, &smem, &device, &specs, &maps,
                        &tensor_type, &get_device, &get_stream, &error_type, &empty_like))
    return -1;
  if (self->name != NULL) {
    PyErr_SetString(PyExc_TypeError, "a Launcher is made once");
    return -1;
  }
  long long g[3], b[3];
  if (read_ints(grid, g, 3, "grid") != 3 || read_ints(block, b, 3, "block") != 3) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "grid and block have three dimensions each");
    return -1;
  }
  if (!PyTuple_Check(specs) || PyTuple_GET_SIZE(specs) > TW_MAX_PARAMS) {
    PyErr_Format(PyExc_ValueError, "specs: a tuple of at most %d parameters", TW_MAX_PARAMS);
    return -1;
  }
  for (int k = 0; k < 3; ++k) {
    self->grid[k] = (unsigned)g[k];
    self->block[k] = (unsigned)b[k];
  }
  self->function = function;
  if (function != 0) {
    if (cu_launch == NULL) {
      PyErr_SetString(PyExc_RuntimeError, "bind() first: libcuda is not open");
      return -1;
    }
    if (cu_ctx_get_current(&self->context) != 0 || self->context == NULL) {
      PyErr_SetString(PyExc_RuntimeError, "no current CUDA context to launch the function in");
      return -1;
    }
  }
  self->smem = smem;
  self->device = device;
  self->device_obj = PyLong_FromLong(device);
  if (self->device_obj == NULL) return -1;
  self->nparams = (int)PyTuple_GET_SIZE(specs);
  self->like_at = -1;
  for (int i = 0; i < self->nparams; ++i) {
    Spec* s = &self->spec[i];
    PyObject *dtype, *shape, *strides, *template;
    unsigned long long align;
    int output;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(specs, i), "OOOKpO", &dtype, &shape, &strides, &align, &output, &template))
      return -1;
    s->ndim = read_ints(shape, s->sizes, TW_MAX_DIMS, "shape");
    if (s->ndim < 0 || read_ints(strides, s->strides, TW_MAX_DIMS, "strides") != s->ndim) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "shape and strides differ in length");
      return -1;
    }
    s->dtype = Py_NewRef(dtype);
    s->shape = PySequence_Tuple(shape);
    if (s->shape == NULL) return -1;
    s->align = align ? align : 1;
    s->output = output;
    long long row_major = 1;
    s->contiguous = 1;
    for (int d = s->ndim - 1; d >= 0; --d) {
      s->contiguous &= s->strides[d] == row_major;
      row_major *= s->sizes[d];
    }
    s->template = output && template != Py_None ? Py_NewRef(template) : NULL;
    if (output) {
      self->out_at[self->nout++] = i;
    } else if (self->like_at < 0) {
      self->like_at = i;
    }
  }
  if (!PyTuple_Check(maps) || PyTuple_GET_SIZE(maps) + self->nparams > TW_MAX_PARAMS) {
    PyErr_Format(PyExc_ValueError, "maps: a tuple; at most %d parameters in all", TW_MAX_PARAMS);
    return -1;
  }
  self->nmaps = (int)PyTuple_GET_SIZE(maps);
  for (int m = 0; m < self->nmaps; ++m) {
    int tensor;
    PyObject* encode;
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(maps, m), "iO", &tensor, &encode)) return -1;
    if (tensor < 0 || tensor >= self->nparams) {
      PyErr_Format(PyExc_ValueError, "map %d describes tensor %d of %d", m, tensor, self->nparams);
      return -1;
    }
    self->map_of[m] = tensor;
    self->encode[m] = Py_NewRef(encode);
  }
  self->nkernel = self->nparams; /* the kernel takes the tensors alone, in order, until interleave() */
  for (int i = 0; i < self->nparams; ++i) self->kernel_param[i] = i;
  self->ninputs = self->nparams - self->nout;
  if (self->nout > 0 && self->like_at < 0) self->ninputs = -1; /* nothing to make outputs like: pass them */
  self->name = Py_NewRef(name);
  self->tensor_type = Py_NewRef(tensor_type);
  self->get_device = Py_NewRef(get_device);
  self->get_stream = Py_NewRef(get_stream);
  self->error_type = Py_NewRef(error_type);
  self->empty_like = Py_NewRef(empty_like);
  self->vectorcall = launcher_call;
  return 0;
}

/* The fallback is the kernel's bound method and the kernel holds its launcher: a cycle, which the
 * collector sees through these two. */
static int launcher_traverse(PyObject* op, visitproc visit, void* arg) {
  Launcher* self = (Launcher*)op;
  Py_VISIT(self->fallback);
  for (int m = 0; m < self->nmaps; ++m) Py_VISIT(self->encode[m]);
  Py_VISIT(self->last_launch);
  Py_VISIT(self->api_capsule);
  return 0;
}

static int launcher_clear(PyObject* op) {
  Launcher* self = (Launcher*)op;
  Py_CLEAR(self->fallback);
  return 0;
}

static void launcher_dealloc(PyObject* op) {
  Launcher* self = (Launcher*)op;
  PyObject_GC_UnTrack(op);
  Py_XDECREF(self->fallback);
  for (int i = 0; i < self->nparams; ++i) {
    Py_XDECREF(self->spec[i].dtype);
    Py_XDECREF(self->spec[i].shape);
    Py_XDECREF(self->spec[i].template);
  }
  for (int m = 0; m < self->nmaps; ++m) Py_XDECREF(self->encode[m]);
  Py_XDECREF(self->name);
  Py_XDECREF(self->device_obj);
  Py_XDECREF(self->tensor_type);
  Py_XDECREF(self->get_device);
  Py_XDECREF(self->get_stream);
  Py_XDECREF(self->error_type);
  Py_XDECREF(self->empty_like);
  Py_XDECREF(self->last_launch);
  Py_XDECREF(self->api_capsule);
  Py_TYPE(op)->tp_free(op);
}

/* repeat_last(n): the last call's launch made n times more, from C; nanoseconds per launch. What
 * the driver alone costs here (the benchmark's floor), with the same function, stream and values:
 * the tensors of that call must still be alive (a made output the caller dropped is not). */
static PyObject* launcher_repeat_last(PyObject* op, PyObject* arg) {
  Launcher* self = (Launcher*)op;
  long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return NULL;
  Call call __attribute__((aligned(128)));
  memcpy(&call, &self->last, sizeof(Call));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (own_context(self) != 0) {
    PyErr_SetString(PyExc_RuntimeError, "another CUDA context is current on this thread");
    return NULL;
  }
  for (long i = 0; i < n; ++i)
    if (launch(self, self->last_stream, &call) < 0) return NULL;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
  return PyFloat_FromDouble(n > 0 ? ns / (double)n : 0.0);
}

/* use_exchange_api(capsule, probes): read the tensors through DLPack's C exchange API from now on.
 * capsule: the tensor type's `__dlpack_c_exchange_api__` (a "dlpack_exchange_api" capsule);
 * probes: one tensor of each parameter's dtype (any shape, any device): the dtype as the API
 * reads it is what that parameter must have. A parameter whose probe it cannot read keeps the
 * attribute reads. True: taken; False: the table is not one this file reads (another major
 * version, no non-owning read), and nothing changed. */
static PyObject* launcher_use_exchange_api(PyObject* op, PyObject* args) {
  Launcher* self = (Launcher*)op;
  PyObject *capsule, *probes;
  if (!PyArg_ParseTuple(args, "OO!", &capsule, &PyTuple_Type, &probes)) return NULL;
  if (PyTuple_GET_SIZE(probes) != self->nparams) {
    PyErr_Format(PyExc_ValueError, "probes: one per tensor parameter (%d)", self->nparams);
    return NULL;
  }
  const ExchangeAPI* api = (const ExchangeAPI*)PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  if (api == NULL) return NULL;
  if (api->version.major != 1 || api->dltensor_from_py_object_no_sync == NULL || api->current_work_stream == NULL)
    Py_RETURN_FALSE;
  for (int i = 0; i < self->nparams; ++i) {
    Spec* s = &self->spec[i];
    DLTensorView t;
    s->dl_known = api->dltensor_from_py_object_no_sync(PyTuple_GET_ITEM(probes, i), &t) == 0;
    if (!s->dl_known) {
      PyErr_Clear();
      continue;
    }
    s->dl_code = t.dtype.code;
    s->dl_bits = t.dtype.bits;
    s->dl_lanes = t.dtype.lanes;
  }
  Py_XSETREF(self->api_capsule, Py_NewRef(capsule));
  self->api = api;
  Py_RETURN_TRUE;
}

/* interleave(layout): the kernel takes constants between its tensors (the T.dynamic sizes of a
 * launcher made for one set of sizes). layout: one item per kernel parameter before its maps, each
 * a tensor's index (every tensor once, in order) or (value, bytes) for a constant of 4 or 8 bytes. */
static PyObject* launcher_interleave(PyObject* op, PyObject* layout) {
  Launcher* self = (Launcher*)op;
  if (!PyTuple_Check(layout) || PyTuple_GET_SIZE(layout) + self->nmaps > TW_MAX_PARAMS) {
    PyErr_Format(PyExc_ValueError, "layout: a tuple; at most %d parameters in all", TW_MAX_PARAMS);
    return NULL;
  }
  int n = (int)PyTuple_GET_SIZE(layout), tensors = 0, constants = 0;
  int kernel_param[TW_MAX_PARAMS];
  unsigned char constant[TW_MAX_PARAMS][8];
  long long constant_value[TW_MAX_PARAMS];
  for (int k = 0; k < n; ++k) {
    PyObject* item = PyTuple_GET_ITEM(layout, k);
    if (PyLong_Check(item)) {
      long at = PyLong_AsLong(item);
      if (at != tensors) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "layout: tensor %ld where tensor %d comes", at, tensors);
        return NULL;
      }
      kernel_param[k] = tensors++;
      continue;
    }
    long long value;
    int bytes;
    if (!PyArg_ParseTuple(item, "Li", &value, &bytes)) return NULL;
    if (bytes == 4 && (value < INT32_MIN || value > INT32_MAX)) {
      PyErr_Format(PyExc_ValueError, "layout: %lld does not fit 4 bytes", value);
      return NULL;
    }
    if (bytes != 4 && bytes != 8) {
      PyErr_SetString(PyExc_ValueError, "layout: a constant has 4 or 8 bytes");
      return NULL;
    }
    memset(constant[constants], 0, 8);
    if (bytes == 4) {
      int32_t narrow = (int32_t)value;
      memcpy(constant[constants], &narrow, 4);
    } else {
      memcpy(constant[constants], &value, 8);
    }
    constant_value[constants] = value;
    kernel_param[k] = -1 - constants++;
  }
  if (tensors != self->nparams) {
    PyErr_Format(PyExc_ValueError, "layout: %d of the %d tensors", tensors, self->nparams);
    return NULL;
  }
  memcpy(self->kernel_param, kernel_param, sizeof kernel_param);
  memcpy(self->constant, constant, sizeof constant);
  memcpy(self->constant_value, constant_value, sizeof constant_value);
  self->nkernel = n;
  Py_RETURN_NONE;
}

static PyObject* launcher_tensor_reader(PyObject* op, void* closure) {
  Launcher* self = (Launcher*)op;
  (void)closure;
  return PyUnicode_FromString(self->api != NULL ? "dlpack" : "attributes");
}

static PyObject* launcher_last_launch(PyObject* op, void* closure) {
  Launcher* self = (Launcher*)op;
  (void)closure;
  return Py_NewRef(self->last_launch ? self->last_launch : Py_None);
}

static PyMethodDef launcher_methods[] = {
    {"repeat_last", launcher_repeat_last, METH_O, "Launch the last call's launch n more times; ns per launch."},
    {"interleave", launcher_interleave, METH_O,
     "The kernel's parameters before its maps: tensor indices and (value, bytes) constants, in order."},
    {"use_exchange_api", launcher_use_exchange_api, METH_VARARGS,
     "Read the tensors through DLPack's C exchange API (capsule, one probe tensor per parameter); whether taken."},
    {NULL, NULL, 0, NULL},
};

static PyObject* launcher_get_fallback(PyObject* op, void* closure) {
  Launcher* self = (Launcher*)op;
  (void)closure;
  return Py_NewRef(self->fallback ? self->fallback : Py_None);
}

static int launcher_set_fallback(PyObject* op, PyObject* value, void* closure) {
  Launcher* self = (Launcher*)op;
  (void)closure;
  if (value != NULL && value != Py_None && !PyCallable_Check(value)) {
    PyErr_SetString(PyExc_TypeError, "fallback: a callable or None");
    return -1;
  }
  Py_XSETREF(self->fallback, value == Py_None ? NULL : Py_XNewRef(value));
  return 0;
}

static PyGetSetDef launcher_getset[] = {
    {"last_launch", launcher_last_launch, NULL, "A dry launcher's last (stream, parameter values).", NULL},
    {"tensor_reader", launcher_tensor_reader, NULL,
     "How the tensors are read: 'dlpack' (the exchange API, attributes where it cannot) or 'attributes'.", NULL},
    {"fallback", launcher_get_fallback, launcher_set_fallback,
     "What the calls this path does not take go to, with their arguments (None: they return NotImplemented).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LauncherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tileworkbench_fastcall.Launcher",
    .tp_basicsize = sizeof(Launcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A kernel's C launch path: checks torch tensors and launches, or hands the call to its fallback.",
    .tp_traverse = launcher_traverse,
    .tp_clear = launcher_clear,
    .tp_vectorcall_offset = offsetof(Launcher, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = PyType_GenericNew,
    .tp_init = launcher_init,
    .tp_dealloc = launcher_dealloc,
    .tp_methods = launcher_methods,
    .tp_getset = launcher_getset,
};

/* bind(): open libcuda; None on success, else why not (a str). Dry launchers need no driver. */
static PyObject* module_bind(PyObject* mod, PyObject* unused) {
  (void)mod;
  (void)unused;
  if (cu_launch != NULL) Py_RETURN_NONE;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == NULL) return PyUnicode_FromFormat("libcuda.so.1 could not be opened: %s", dlerror());
  cu_launch = (launch_fn)dlsym(lib, "cuLaunchKernel");
  cu_error_name = (error_name_fn)dlsym(lib, "cuGetErrorName");
  cu_ctx_get_current = (ctx_get_fn)dlsym(lib, "cuCtxGetCurrent");
  cu_ctx_set_current = (ctx_set_fn)dlsym(lib, "cuCtxSetCurrent");
  if (cu_launch == NULL || cu_ctx_get_current == NULL || cu_ctx_set_current == NULL) {
    cu_launch = NULL;
    return PyUnicode_FromString("libcuda.so.1 lacks cuLaunchKernel, cuCtxGetCurrent or cuCtxSetCurrent");
  }
  Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"bind", module_bind, METH_NOARGS, "Open libcuda; None, or why it could not be opened."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tileworkbench_fastcall",
    .m_doc = "tileworkbench's C launch path (backend/fastcall.c).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit_tileworkbench_fastcall(void) {
  if (PyType_Ready(&LauncherType) < 0) return NULL;
  s_dtype = PyUnicode_InternFromString("dtype");
  s_shape = PyUnicode_InternFromString("shape");
  s_stride = PyUnicode_InternFromString("stride");
  s_is_contiguous = PyUnicode_InternFromString("is_contiguous");
  s_get_device = PyUnicode_InternFromString("get_device");
  s_data_ptr = PyUnicode_InternFromString("data_ptr");
  s_new_empty = PyUnicode_InternFromString("new_empty");
  kw_dtype = PyTuple_Pack(1, s_dtype);
  PyObject* m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  Py_INCREF(&LauncherType);
  if (PyModule_AddObject(m, "Launcher", (PyObject*)&LauncherType) < 0) {
    Py_DECREF(&LauncherType);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
