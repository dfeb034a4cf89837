/* A stand-in for torch's DLPack C exchange API (dlpack.h 1.3, DLPackExchangeAPI), for the CPU
 * tests of backend/fastcall.c (tests/test_fastcall_exchange.py builds it with the C compiler).
 *
 * Its non-owning read takes what a tensor says of itself from the Python attribute `dl`:
 * (code, bits, lanes, device_type, device_id, data, shape, strides or None, byte_offset), or fails
 * with RuntimeError where `dl` is None, as torch's fails for a tensor DLPack cannot describe. The
 * current stream of CUDA device d is 0x7000 + d. `reads()` counts the reads and stream queries. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "dlpack_exchange.h" /* tileworkbench/backend: the layouts */


static int64_t shape[8], strides[8]; /* valid until the next read: the tests run on one thread */
static long n_reads, n_streams;

static int read_view(void* obj, DLTensorView* out) {
  ++n_reads;
  PyObject* dl = PyObject_GetAttrString((PyObject*)obj, "dl");
  if (dl == NULL) return -1;
  PyObject *shape_obj, *strides_obj;
  int code, bits, lanes, type, id;
  unsigned long long data, offset;
  if (dl == Py_None) {
    Py_DECREF(dl);
    PyErr_SetString(PyExc_RuntimeError, "this tensor cannot be described by DLPack");
    return -1;
  }
  if (!PyArg_ParseTuple(dl, "iiiiiKOOK", &code, &bits, &lanes, &type, &id, &data, &shape_obj, &strides_obj,
                        &offset)) {
    Py_DECREF(dl);
    return -1;
  }
  int fits = PyTuple_Check(shape_obj) && PyTuple_GET_SIZE(shape_obj) <= 8;
  if (fits && strides_obj != Py_None)
    fits = PyTuple_Check(strides_obj) && PyTuple_GET_SIZE(strides_obj) == PyTuple_GET_SIZE(shape_obj);
  if (!fits) {
    Py_DECREF(dl);
    PyErr_SetString(PyExc_ValueError, "dl: shape a tuple of at most 8 sizes, strides None or a tuple as long");
    return -1;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(shape_obj);
  for (Py_ssize_t i = 0; i < n; ++i) {
    shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_obj, i));
    if (strides_obj != Py_None) strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides_obj, i));
  }
  out->data = (void*)(uintptr_t)data;
  out->device.type = type;
  out->device.id = id;
  out->ndim = (int32_t)n;
  out->dtype.code = (uint8_t)code;
  out->dtype.bits = (uint8_t)bits;
  out->dtype.lanes = (uint16_t)lanes;
  out->shape = shape;
  out->strides = strides_obj == Py_None ? NULL : strides;
  out->byte_offset = offset;
  Py_DECREF(dl);
  return 0;
}

static int current_stream(int32_t type, int32_t id, void** out) {
  ++n_streams;
  *out = type == 2 ? (void*)(uintptr_t)(0x7000 + id) : NULL;
  return 0;
}

static ExchangeAPI tables[2] = {
    {{1, 3}, NULL, NULL, NULL, NULL, read_view, current_stream}, /* as torch's */
    {{2, 0}, NULL, NULL, NULL, NULL, read_view, current_stream}, /* a major version fastcall.c does not read */
};

static PyObject* capsule(PyObject* self, PyObject* args) {
  int which = 0;
  (void)self;
  if (!PyArg_ParseTuple(args, "|i", &which)) return NULL;
  return PyCapsule_New(&tables[which ? 1 : 0], "dlpack_exchange_api", NULL);
}

static PyObject* reads(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  return Py_BuildValue("(ll)", n_reads, n_streams);
}

static PyMethodDef methods[] = {
    {"capsule", capsule, METH_VARARGS, "The table as a capsule (1: one of another major version)."},
    {"reads", reads, METH_NOARGS, "(tensor reads, stream queries) so far."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, .m_name = "fake_exchange_api", .m_size = -1,
                                 .m_methods = methods};

PyMODINIT_FUNC PyInit_fake_exchange_api(void) { return PyModule_Create(&def); }
