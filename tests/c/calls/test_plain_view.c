/* dlx_plain_view.h: a plain torch tensor described from a published layout, on buffers laid
 * out by hand as a layout says (here an invented one, not torch's: the reader must take
 * every offset from the layout). Each test the addon's fast path makes is made: anything
 * off sends the tensor back to the addon's view (0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_plain_view.h"

/* The invented layout: a Python object with its TensorImpl pointer at 40; a TensorImpl of
 * 256 bytes; a StorageImpl of 96. */
static const dlx_torch_plain_at AT = {
    .impl_at = 40, .meta_at = 8, .word_at = 200, .keys_at = 216, .storage_at = 24,
    .numel_at = 32, .offset_at = 48, .ndim_at = 64, .sizes_at = 72, .strides_at = 112,
    .max_ndim = 5, .data_at = 16, .checks_at = 60, .version_at = 160, .counter_at = 12};

typedef struct fake {
  _Alignas(16) unsigned char obj[64];
  _Alignas(16) unsigned char impl[256];
  _Alignas(16) unsigned char storage[96];
  _Alignas(16) unsigned char counter[32];
  float data[64];
} fake;

static const void *const VTABLE = (const void *)(uintptr_t)0x5000;

static void put(unsigned char *base, int32_t at, const void *v, size_t n) {
  memcpy(base + at, v, n);
}
static void put64(unsigned char *base, int32_t at, uint64_t v) { put(base, at, &v, 8); }
static void putp(unsigned char *base, int32_t at, const void *p) { put(base, at, &p, sizeof p); }

static dlx_torch_plain layout(void) {
  dlx_torch_plain p;
  memset(&p, 0, sizeof p);
  p.type = (const void *)(uintptr_t)0x7000;
  p.vtable = VTABLE;
  p.word_mask = 0x00ff00ffffffffffull; /* a policy byte inside, a free byte beside it */
  p.checks_mask = 0xff00ull;
  p.at = AT;
  p.nkinds = 2;
  p.kinds[0] = (dlx_torch_plain_kind){.word = 0x0000000100020001ull, .keys = 0x8021,
                                      .device = {kDLCPU, 0}, .dtype = {kDLFloat, 32, 1},
                                      .bumps = 1, .itemsize = 4};
  p.kinds[1] = (dlx_torch_plain_kind){.word = 0x0000000100020007ull, .keys = 0x8021,
                                      .device = {kDLCPU, 0}, .dtype = {kDLInt, 64, 1},
                                      .bumps = 0, .itemsize = 8};
  return p;
}

/* A 2x3 float32 tensor from element 4 of its storage, strides (1, 2). */
static void make(fake *f) {
  memset(f, 0, sizeof *f);
  putp(f->obj, AT.impl_at, f->impl);
  putp(f->impl, 0, VTABLE);
  put64(f->impl, AT.word_at, 0x0000000100020001ull | 0xab00000000000000ull); /* free byte */
  put64(f->impl, AT.keys_at, 0x8021);
  putp(f->impl, AT.storage_at, f->storage);
  put64(f->impl, AT.numel_at, 6);
  put64(f->impl, AT.offset_at, 4);
  put64(f->impl, AT.ndim_at, 2);
  put64(f->impl, AT.sizes_at, 2);
  put64(f->impl, AT.sizes_at + 8, 3);
  put64(f->impl, AT.strides_at, 1);
  put64(f->impl, AT.strides_at + 8, 2);
  putp(f->impl, AT.version_at, f->counter);
  putp(f->storage, AT.data_at, f->data);
  put64(f->storage, AT.checks_at, 0xff0000ull); /* set bits outside the mask are no check */
}

static void test_describes_a_plain_tensor(void **state) {
  (void)state;
  fake f;
  make(&f);
  dlx_torch_plain p = layout();
  DLTensor t;
  memset(&t, 0x55, sizeof t);
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 1);
  assert_ptr_equal(t.data, &f.data[4]);
  assert_int_equal(t.ndim, 2);
  assert_int_equal(t.dtype.code, kDLFloat);
  assert_int_equal(t.dtype.bits, 32);
  assert_int_equal(t.device.device_type, kDLCPU);
  assert_ptr_equal(t.shape, (int64_t *)(void *)(f.impl + AT.sizes_at));
  assert_ptr_equal(t.strides, (int64_t *)(void *)(f.impl + AT.strides_at));
  assert_int_equal(t.shape[1], 3);
  assert_int_equal(t.strides[1], 2);
  assert_int_equal(t.byte_offset, 0);
  /* dlx_plain_known: an invented layout is no known one; known 1/2 are never read here */
  assert_int_equal(dlx_plain_known(&p.at), DLX_PLAIN_OTHER);
  memset(&t, 0x55, sizeof t);
  assert_int_equal(dlx_plain_view_known(DLX_PLAIN_OTHER, &p, f.obj, &t, NULL), 1);
  assert_ptr_equal(t.data, &f.data[4]);
}

static void test_a_later_kind_and_an_unknown_one(void **state) {
  (void)state;
  fake f;
  make(&f);
  dlx_torch_plain p = layout();
  put64(f.impl, AT.word_at, 0x0000000100020007ull); /* int64: kinds[1] */
  DLTensor t;
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 1);
  assert_int_equal(t.dtype.code, kDLInt);
  assert_ptr_equal(t.data, (char *)f.data + 8 * 4); /* its itemsize, not kinds[0]'s */
  put64(f.impl, AT.word_at, 0x0000000100020009ull); /* a dtype no kind holds */
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 0);
  p.nkinds = 0; /* the first layout: kinds[0] must not match anything */
  p.kinds[0].keys = UINT64_MAX;
  make(&f);
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 0);
}

typedef void (*spoil_fn)(fake *f);
static void with_meta(fake *f) { putp(f->impl, AT.meta_at, f->counter); }
static void with_vtable(fake *f) { putp(f->impl, 0, (const void *)(uintptr_t)0x5008); }
static void with_policy(fake *f) { f->impl[AT.word_at + 6] ^= 0x04; }
static void with_device(fake *f) { f->impl[AT.word_at + 2] ^= 0x01; }
static void with_keys(fake *f) { put64(f->impl, AT.keys_at, 0x8061); }
static void without_storage(fake *f) { putp(f->impl, AT.storage_at, NULL); }
static void with_6_dims(fake *f) { put64(f->impl, AT.ndim_at, 6); }
static void with_negative_dims(fake *f) { put64(f->impl, AT.ndim_at, (uint64_t)-1); }
static void with_a_check(fake *f) { f->storage[AT.checks_at + 1] = 0x01; }

static void test_each_test_sends_the_tensor_back(void **state) {
  (void)state;
  const spoil_fn spoil[] = {with_meta, with_vtable, with_policy, with_device, with_keys,
                            without_storage, with_6_dims, with_negative_dims, with_a_check};
  dlx_torch_plain p = layout();
  for (size_t k = 0; k < sizeof spoil / sizeof spoil[0]; ++k) {
    fake f;
    make(&f);
    DLTensor t;
    assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 1);
    spoil[k](&f);
    assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 0);
  }
}

static void test_an_empty_tensor_has_no_data_pointer(void **state) {
  (void)state;
  fake f;
  make(&f);
  put64(f.impl, AT.numel_at, 0);
  dlx_torch_plain p = layout();
  DLTensor t;
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 1);
  assert_null(t.data);
  f.impl[AT.word_at + 5] ^= 0x04; /* a byte the mask leaves free: no test */
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 1);
}

static void test_a_mut_tensor_hands_over_its_counter(void **state) {
  (void)state;
  fake f;
  make(&f);
  dlx_torch_plain p = layout();
  DLTensor t;
  uint32_t *version = NULL;
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, &version), 1);
  assert_ptr_equal(version, (uint32_t *)(void *)(f.counter + AT.counter_at));
  putp(f.impl, AT.version_at, NULL); /* no counter: the hooks decide */
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, &version), 0);
  make(&f);
  put64(f.impl, AT.word_at, 0x0000000100020007ull); /* a kind that does not bump */
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, &version), 0);
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 1); /* read it still */
}

/* A tensor with autograd metadata (a view) is described only where the addon's hook says
 * torch's requires_grad() is false for its TensorImpl; the hook sees that TensorImpl. */
static const void *asked; /* the TensorImpl the hook was last asked of */
static int answer;
static int meta_no_grad(const void *impl) {
  asked = impl;
  return answer;
}

static void test_a_tensor_with_metadata_is_described_when_torch_says_no_grad(void **state) {
  (void)state;
  fake f;
  make(&f);
  with_meta(&f);
  dlx_torch_plain p = layout();
  DLTensor t;
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 0); /* no hook: the view */
  p.meta_no_grad = meta_no_grad;
  answer = 1;
  asked = NULL;
  memset(&t, 0x55, sizeof t);
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 1);
  assert_ptr_equal(asked, f.impl);
  assert_ptr_equal(t.data, &f.data[4]);
  uint32_t *version = NULL; /* a mut view: its counter (torch shares it with its base) */
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, &version), 1);
  assert_ptr_equal(version, (uint32_t *)(void *)(f.counter + AT.counter_at));
  answer = 0; /* requires grad */
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 0);
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, &version), 0);
  answer = -1; /* anything but 1: the view decides */
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 0);
  make(&f); /* no metadata: the hook is not asked */
  answer = 0;
  asked = NULL;
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 1);
  assert_null(asked);
  with_meta(&f); /* the other tests still send it back first */
  answer = 1;
  with_vtable(&f);
  asked = NULL;
  assert_int_equal(dlx_plain_view(&p, p.at, f.obj, &t, NULL), 0);
  assert_null(asked);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_describes_a_plain_tensor),
      cmocka_unit_test(test_a_later_kind_and_an_unknown_one),
      cmocka_unit_test(test_each_test_sends_the_tensor_back),
      cmocka_unit_test(test_an_empty_tensor_has_no_data_pointer),
      cmocka_unit_test(test_a_mut_tensor_hands_over_its_counter),
      cmocka_unit_test(test_a_tensor_with_metadata_is_described_when_torch_says_no_grad)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
