/*
 * dlx_plain_view.h - a plain torch tensor described in the call's own loop, from the layout
 * dlx's torch addon published (dlx_torch_plain), with no call into the addon.
 *
 * The addon's view export costs a call per tensor and tests again what the loop knows; the
 * layout lets the loop read the same fields itself. Every test the addon's fast path makes
 * is made here (no subclass, no grad required: none for a tensor without autograd
 * metadata, torch's requires_grad() for one with it, such as a view; default size
 * policies, a checked key set, dtype and device, a storage whose mutable access needs no
 * check, dims held in the TensorImpl); a tensor that fails one goes to the addon's view,
 * which describes or refuses it. Pure C over bytes: tests/c/calls/test_plain_view.c runs it on
 * laid-out buffers.
 */
#ifndef DLX_PLAIN_VIEW_H_
#define DLX_PLAIN_VIEW_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dlx_invoke.h"

/* The layout a parity struct publishes now (acquire order), or NULL: none offered, or an
 * addon older than the field. */
static inline const dlx_torch_plain *dlx_plain_current(const dlx_torch_parity *hooks) {
  if (hooks == NULL || hooks->size < offsetof(dlx_torch_parity, plain) + sizeof hooks->plain ||
      hooks->plain == NULL)
    return NULL;
  return __atomic_load_n(hooks->plain, __ATOMIC_ACQUIRE);
}

/* Unaligned-safe reads (memcpy: one load each once compiled). */
static inline uint64_t dlx_plain_u64(const char *base, int32_t at) {
  uint64_t v;
  memcpy(&v, base + at, sizeof v);
  return v;
}

static inline const char *dlx_plain_ptr(const char *base, int32_t at) {
  const char *p;
  memcpy(&p, base + at, sizeof p);
  return p;
}

/* The kind of p that matches a tensor's word and key set, or NULL. The newest kind is
 * tested first, in line; the others out of the way of the usual call. */
static inline __attribute__((always_inline)) const dlx_torch_plain_kind *dlx_plain_kind(
    const dlx_torch_plain *p, uint64_t word, uint64_t keys) {
  if (__builtin_expect(p->kinds[0].word == word && p->kinds[0].keys == keys, 1))
    return &p->kinds[0];
  for (int32_t k = 1; k < p->nkinds && k < DLX_TORCH_PLAIN_KINDS; ++k)
    if (p->kinds[k].word == word && p->kinds[k].keys == keys) return &p->kinds[k];
  return NULL;
}

/* 1 with *out as the addon's view describes `obj` (an object of type p->type), when it is a
 * plain tensor p describes; else 0, with *out and *version possibly written (meaning
 * nothing: the caller asks the addon's view). With `version` (a `mut` parameter), only a
 * tensor torch lets an in-place operation write, and *version its counter, which the caller
 * bumps after the kernel (as the view_mut hook gives it). `at` is p->at, or the same
 * offsets as constants (dlx_plain_view_known): the compiler then folds them in. A tensor
 * with autograd metadata (every view has some) is described when torch's requires_grad() is
 * false for it (asked through p->meta_no_grad: a view's answer may be its base's). */
static inline __attribute__((always_inline)) int dlx_plain_view(const dlx_torch_plain *p,
                                                                const dlx_torch_plain_at at,
                                                                const void *obj,
                                                                DLTensor *out,
                                                                uint32_t **version) {
  const char *impl = dlx_plain_ptr((const char *)obj, at.impl_at);
  if (dlx_plain_ptr(impl, 0) != p->vtable) return 0; /* a TensorImpl subclass */
  const dlx_torch_plain_kind *kind =
      dlx_plain_kind(p, dlx_plain_u64(impl, at.word_at) & p->word_mask,
                     dlx_plain_u64(impl, at.keys_at));
  const char *storage = dlx_plain_ptr(impl, at.storage_at);
  const uint64_t ndim = dlx_plain_u64(impl, at.ndim_at);
  if (kind == NULL || storage == NULL || ndim > (uint64_t)at.max_ndim ||
      (dlx_plain_u64(storage, at.checks_at) & p->checks_mask) != 0)
    return 0;
  if (version) {
    const char *counter = dlx_plain_ptr(impl, at.version_at);
    if (!kind->bumps || counter == NULL) return 0; /* the hooks decide (inference tensors) */
    *version = (uint32_t *)(uintptr_t)(counter + at.counter_at);
  }
  uintptr_t data = 0; /* as TensorImpl::data(): an empty tensor has no data pointer */
  if (dlx_plain_u64(impl, at.numel_at) != 0)
    data = (uintptr_t)dlx_plain_ptr(storage, at.data_at) +
           (uintptr_t)(kind->itemsize * (int64_t)dlx_plain_u64(impl, at.offset_at));
  out->data = (void *)data;
  out->device = kind->device;
  out->ndim = (int32_t)ndim;
  out->dtype = kind->dtype;
  out->shape = (int64_t *)(uintptr_t)(impl + at.sizes_at);
  out->strides = (int64_t *)(uintptr_t)(impl + at.strides_at);
  out->byte_offset = 0;
  /* the grad test last, its pointer read here: the usual tensor's loop keeps its registers
   * (asked earlier, the call made the loops' register allocation worse) */
  if (__builtin_expect(dlx_plain_ptr(impl, at.meta_at) != NULL, 0))
    return p->meta_no_grad != NULL && p->meta_no_grad(impl) == 1;
  return 1;
}

/* Layouts dlx has met, found by the addon on x86-64 Linux; the offsets an addon offers are
 * compared with these once, when dlx first meets its table (dlx_plain_known), and a match
 * reads its tensors at constant offsets (13 loads a tensor fewer). Any other layout is read
 * at the offsets it gives; a wrong entry here can only ever go unmatched. */
#define DLX_PLAIN_AT_TORCH_2_13 \
  ((dlx_torch_plain_at){16, 24, 160, 168, 16, 152, 144, 56, 64, 104, 5, 16, 59, 40, 16})
#define DLX_PLAIN_AT_TORCH_1_13 \
  ((dlx_torch_plain_at){24, 32, 176, 184, 24, 168, 160, 72, 80, 120, 5, 24, 0, 48, 24})

/* Which layout `at` is: 1 or 2 for a known one, else DLX_PLAIN_OTHER (never 0). */
#define DLX_PLAIN_OTHER 3
static inline int dlx_plain_known(const dlx_torch_plain_at *at) {
  const dlx_torch_plain_at known[2] = {DLX_PLAIN_AT_TORCH_2_13, DLX_PLAIN_AT_TORCH_1_13};
  for (int k = 0; k < 2; ++k)
    if (memcmp(at, &known[k], sizeof *at) == 0) return k + 1;
  return DLX_PLAIN_OTHER;
}

/* dlx_plain_view, with the offsets of layout `known` (dlx_plain_known) as constants when
 * dlx knows it. */
static inline __attribute__((always_inline)) int dlx_plain_view_known(int known,
                                                                      const dlx_torch_plain *p,
                                                                      const void *obj,
                                                                      DLTensor *out,
                                                                      uint32_t **version) {
  if (__builtin_expect(known == 1, 1))
    return dlx_plain_view(p, DLX_PLAIN_AT_TORCH_2_13, obj, out, version);
  if (known == 2) return dlx_plain_view(p, DLX_PLAIN_AT_TORCH_1_13, obj, out, version);
  return dlx_plain_view(p, p->at, obj, out, version);
}

#endif /* DLX_PLAIN_VIEW_H_ */
