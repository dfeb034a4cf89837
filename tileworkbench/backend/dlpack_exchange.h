// dlpack_exchange.h - the parts of DLPack's C exchange API (dlpack.h 1.3, DLPackExchangeAPI) that
// fastcall.c reads: a framework offers the table as a "dlpack_exchange_api" capsule on its tensor
// type (`__dlpack_c_exchange_api__`); its non-owning read fills a DLTensor, and it names the
// current stream of a device. The layouts are DLPack's ABI (tests/fake_exchange_api.c, the CPU
// tests' stand-in for torch's table, fills the same ones).
#pragma once
#include <stdint.h>

typedef struct {
  void* data;
  struct {
    int32_t type, id;
  } device;
  int32_t ndim;
  struct {
    uint8_t code, bits;
    uint16_t lanes;
  } dtype;
  int64_t* shape;
  int64_t* strides; /* in elements; NULL: row-major */
  uint64_t byte_offset;
} DLTensorView;

typedef struct {
  struct {
    uint32_t major, minor;
  } version;
  void* prev_api;
  void *managed_tensor_allocator, *managed_tensor_from_py_object_no_sync, *managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensorView* out); /* may be NULL */
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
} ExchangeAPI;

#define TW_DL_CUDA 2 /* DLDeviceType kDLCUDA */
