/* dlx_sig.c: every grammar element, malformed signatures with their columns, the
 * canonical text, and the per-call tensor check with its messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_sig.h"

static dlx_sig *ok(const char *text) {
  char err[256] = "";
  int32_t col = -1;
  dlx_sig *s = dlx_sig_parse(text, err, sizeof err, &col);
  if (!s) fail_msg("'%s' refused at column %d: %s", text, col, err);
  assert_int_equal(col, 0);
  return s;
}

/* The canonical text of `text` is `canon`, and it parses back to itself. */
static void canon(const char *text, const char *want) {
  dlx_sig *s = ok(text);
  char buf[1024];
  size_t n = dlx_sig_format(s, buf, sizeof buf);
  assert_int_equal(n, strlen(want));
  assert_string_equal(buf, want);
  dlx_sig *again = ok(buf);
  char buf2[1024];
  dlx_sig_format(again, buf2, sizeof buf2);
  assert_string_equal(buf2, buf);
  dlx_sig_free(again);
  dlx_sig_free(s);
}

static void bad(const char *text, int32_t column, const char *msg_part) {
  char err[256] = "";
  int32_t col = -1;
  dlx_sig *s = dlx_sig_parse(text, err, sizeof err, &col);
  if (s) fail_msg("'%s' accepted", text);
  if (col != column) fail_msg("'%s': column %d, expected %d (%s)", text, col, column, err);
  if (!strstr(err, msg_part)) fail_msg("'%s': message '%s' lacks '%s'", text, err, msg_part);
}

static void test_contract_example(void **state) {
  (void)state;
  dlx_sig *s = ok("x: f32[m, n], out: f32[m, n] mut? = None, axis: int = -1 -> f32[m, n]");
  assert_int_equal(s->nparams, 3);
  assert_int_equal(s->nrequired, 1);
  assert_int_equal(s->nresults, 1);
  assert_int_equal(s->nsymbols, 2);
  assert_string_equal(dlx_sig_param_name(s, 0), "x");
  assert_string_equal(dlx_sig_param_name(s, 2), "axis");
  const dlx_sig_type *x = &s->params[0].type, *o = &s->params[1].type;
  assert_int_equal(x->kind, DLX_SIG_TENSOR);
  assert_int_equal(x->dtypes, 1u << DLX_SIG_F32);
  assert_int_equal(x->ndims, 2);
  assert_int_equal(s->dims[x->dim0].kind, DLX_DIM_SYMBOL);
  assert_int_equal(s->dims[x->dim0].sym, dlx_sig_symbol_index(s, "m"));
  assert_int_equal(s->dims[o->dim0 + 1].sym, dlx_sig_symbol_index(s, "n"));
  assert_int_equal(o->flags, DLX_SIG_MUT);
  assert_int_equal(o->optional, 1);
  assert_int_equal(s->params[1].def_kind, DLX_DEF_NONE);
  assert_int_equal(s->params[2].type.kind, DLX_SIG_INT);
  assert_int_equal(s->params[2].def_kind, DLX_DEF_INT);
  assert_int_equal(s->params[2].def.i, -1);
  assert_int_equal(dlx_sig_symbol_index(s, "q"), -1);
  assert_int_equal(s->options, 0);
  dlx_sig_free(s);
}

static void test_scalars_and_defaults(void **state) {
  (void)state;
  dlx_sig *s = ok("a: int, b: float = 2, c: bool = True, d: str = 'sum', e: ints = (1, -2), "
                  "f: floats = (1, 2.5e-1), g: str? = None, h: float = -1.5e3");
  const dlx_sig_param *p = s->params;
  assert_int_equal(p[0].type.kind, DLX_SIG_INT);
  assert_int_equal(p[1].type.kind, DLX_SIG_FLOAT);
  assert_int_equal(p[1].def_kind, DLX_DEF_FLOAT);
  assert_true(p[1].def.f == 2.0);
  assert_int_equal(p[2].type.kind, DLX_SIG_BOOL);
  assert_int_equal(p[2].def.i, 1);
  assert_int_equal(p[3].def_kind, DLX_DEF_STR);
  assert_string_equal(dlx_sig_str(s, p[3].def_off), "sum");
  assert_int_equal(p[3].def_len, 3);
  assert_int_equal(p[4].def_kind, DLX_DEF_INTS);
  assert_int_equal(p[4].def_len, 2);
  assert_int_equal(s->nums[p[4].def_off + 1].i, -2);
  assert_int_equal(p[5].def_kind, DLX_DEF_FLOATS);
  assert_true(s->nums[p[5].def_off].f == 1.0 && s->nums[p[5].def_off + 1].f == 0.25);
  assert_int_equal(p[6].type.optional, 1);
  assert_true(p[7].def.f == -1500.0);
  assert_int_equal(s->nrequired, 1);
  dlx_sig_free(s);
  canon("a:int,b:float=2,c:bool=True,d:str=\"it's\",e:ints=(),f:floats=(3,),g:ints=(7,)",
        "a: int, b: float = 2.0, c: bool = True, d: str = \"it's\", e: ints = (), "
        "f: floats = (3.0,), g: ints = (7,)");
  canon("x: float = 0.1, y: float = 1e300, z: float = -0.0",
        "x: float = 0.1, y: float = 1e+300, z: float = -0.0");
  canon("s: str = \"\"", "s: str = ''");
}

static void test_tensors(void **state) {
  (void)state;
  dlx_sig *s = ok("a: tensor, b: f16|bf16|f32[...], c: bool[], d: bool, e: u8|bool[_, 3] contig "
                  "cuda rocm, f: i64[b, ..., 2] gpu, g: bool mut, h: c64|c128 npu cpu");
  const dlx_sig_param *p = s->params;
  assert_int_equal(p[0].type.kind, DLX_SIG_TENSOR);
  assert_int_equal(p[0].type.dtypes, DLX_SIG_DT_ANY);
  assert_int_equal(p[0].type.ndims, -1);
  assert_int_equal(p[1].type.dtypes, (1u << DLX_SIG_F16) | (1u << DLX_SIG_BF16) | (1u << DLX_SIG_F32));
  assert_int_equal(p[1].type.ndims, 1);
  assert_int_equal(p[1].type.ellipsis, 0);
  assert_int_equal(p[2].type.kind, DLX_SIG_TENSOR); /* bool[] is a 0-d bool tensor */
  assert_int_equal(p[2].type.ndims, 0);
  assert_int_equal(p[3].type.kind, DLX_SIG_BOOL); /* bool alone: the scalar */
  assert_int_equal(p[4].type.flags, DLX_SIG_CONTIG | DLX_SIG_CUDA | DLX_SIG_ROCM);
  assert_int_equal(s->dims[p[4].type.dim0].kind, DLX_DIM_ANY);
  assert_int_equal(s->dims[p[4].type.dim0 + 1].kind, DLX_DIM_FIXED);
  assert_int_equal(s->dims[p[4].type.dim0 + 1].extent, 3);
  assert_int_equal(p[5].type.ellipsis, 1);
  assert_int_equal(p[5].type.flags, DLX_SIG_GPU);
  assert_int_equal(p[6].type.kind, DLX_SIG_TENSOR); /* a flag makes bool a tensor */
  assert_int_equal(p[7].type.flags, DLX_SIG_NPU | DLX_SIG_CPU);
  assert_int_equal(s->nsymbols, 1); /* 'b' the symbol; the parameter 'b' is another namespace */
  dlx_sig_free(s);
  canon("a:tensor,b:f32|f16[...],c:bool[],e:bool|u8[_,3]contig cuda,g:bool mut",
        "a: tensor, b: f16|f32[...], c: bool[], e: u8|bool[_, 3] contig cuda, g: bool mut");
}

static void test_results_and_options(void **state) {
  (void)state;
  dlx_sig *s = ok("x: f32[n] -> (f32[], i64[]); nogil");
  assert_int_equal(s->nresults, 2);
  assert_int_equal(s->results[1].dtypes, 1u << DLX_SIG_I64);
  assert_int_equal(s->options, DLX_SIG_NOGIL);
  dlx_sig_free(s);
  canon("", "");
  canon("  ", "");
  canon("-> f32[k]", "-> f32[k]");
  canon("->(int,float?)", "-> (int, float?)");
  canon("; nogil", "; nogil");
  canon("x: int -> int ; nogil", "x: int -> int; nogil");
  s = ok("n: int -> i64[]; effects");
  assert_int_equal(s->options, DLX_SIG_EFFECTS);
  dlx_sig_free(s);
  s = ok("; effects , nogil");
  assert_int_equal(s->options, DLX_SIG_NOGIL | DLX_SIG_EFFECTS);
  dlx_sig_free(s);
  canon("; effects", "; effects");
  canon("-> int;effects,nogil", "-> int; nogil, effects"); /* one order, whatever was given */
  canon("x: int; nogil, effects", "x: int; nogil, effects");
  canon("x: f32[m,\n n] mut?=None", "x: f32[m, n] mut? = None");
  canon("x: tensor? = None -> ()", "x: tensor? = None -> ()");
}

static void test_malformed(void **state) {
  (void)state;
  bad("x", 2, "expected ':'");
  bad("x f32", 3, "expected ':'");
  bad(": f32", 1, "expected a parameter name");
  bad("x: f33[n]", 4, "expected a type");
  bad("x: f32|f99", 8, "expected a dtype");
  bad("x: f32|f32", 8, "listed twice");
  bad("x: f32[n", 9, "expected ',' or ']'");
  bad("x: f32[n,]", 10, "expected a dimension");
  bad("x: f32[..., ...]", 13, "'...' may appear once");
  bad("x: f32[-1]", 8, "expected a dimension");
  bad("x: f32[99999999999999999999]", 8, "out of range");
  bad("x: f32[3x]", 9, "unexpected 'x'");
  bad("x: f32 mut mut", 12, "given twice");
  bad("x: f32 muut", 8, "unknown flag");
  bad("x: f32, x: f32", 9, "duplicate parameter 'x'");
  bad("lambda: int", 1, "Python keyword");
  bad("x: int = 1, y: int", 13, "without a default follows");
  bad("x: int = None", 10, "needs an optional type");
  bad("x: f32[n] = 0", 13, "can only be None");
  bad("x: int = 1.5", 11, "unexpected '.'");
  bad("x: int = abc", 10, "an integer or None");
  bad("x: float = 1e", 14, "exponent");
  bad("x: float = 1e999", 12, "out of range");
  bad("x: bool = 1", 11, "True, False or None");
  bad("x: str = 'abc", 10, "unterminated");
  bad("x: str = 'a\\'b'", 12, "escapes");
  bad("x: str = abc", 10, "quoted string");
  bad("x: ints = 1", 11, "'('");
  bad("x: ints = (1, 2.5)", 16, "unexpected '.'");
  bad("x: ints = (1 2)", 14, "',' or ')'");
  bad("x: int -> ", 11, "expected a type");
  bad("x: int -> (int", 15, "',' or ')'");
  bad("x: int; fast", 9, "expected an option");
  bad("x: int; nogil, nogil", 16, "given twice");
  bad("x: int; effects, nogil, effects", 25, "option 'effects' given twice");
  bad("x: int; effect", 9, "expected an option ('nogil' or 'effects')");
  bad("x: int; effectss", 9, "expected an option");
  bad("x: int; effects,", 17, "expected an option");
  bad("x: int; effects nogil", 17, "the end");
  bad("x: int -> int junk", 15, "the end");
  bad("x: int,", 8, "parameter name");
  bad("x: int?? ", 8, "got '?");
}

/* A str default becomes a Python str: strict UTF-8 or a fault at the first bad byte. */
static void test_utf8_defaults(void **state) {
  (void)state;
  bad("x: str = '\xff'", 11, "must be UTF-8 (byte 0xff");
  bad("x: str = 'ab\xc3'", 13, "byte 0xc3");          /* cut short by the quote */
  bad("x: str = 'a\xc3\x28'", 12, "UTF-8");            /* not a continuation byte */
  bad("x: str = '\xc0\xaf'", 11, "UTF-8");             /* overlong '/' */
  bad("x: str = '\xe0\x80\xaf'", 11, "UTF-8");         /* overlong, 3 bytes */
  bad("x: str = '\xed\xa0\x80'", 11, "UTF-8");         /* a surrogate */
  bad("x: str = '\xf4\x90\x80\x80'", 11, "UTF-8");     /* past U+10FFFF */
  bad("x: str = '\xf8\x88\x80\x80\x80'", 11, "UTF-8"); /* 5 bytes */
  bad("x: str = '\x80'", 11, "UTF-8");                 /* a lone continuation byte */
  bad("\xc3\xa9: int", 1, "parameter name");           /* names stay ASCII */
  char err[256];
  int32_t col = 0;
  /* every length, the edges of each range */
  const char *ok = "x: str = 'a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xc2\x80\xdf\xbf"
                   "\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xf0\x90\x80\x80\xf4\x8f\xbf\xbf'";
  dlx_sig *s = dlx_sig_parse(ok, err, sizeof err, &col);
  assert_non_null(s);
  assert_string_equal(dlx_sig_str(s, s->params[0].def_off),
                      "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xc2\x80\xdf\xbf\xe0\xa0\x80"
                      "\xed\x9f\xbf\xee\x80\x80\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
  dlx_sig_free(s);
}

static void test_limits(void **state) {
  (void)state;
  char *big = malloc(DLX_SIG_MAX_LEN + 100);
  memset(big, ' ', DLX_SIG_MAX_LEN + 99);
  big[DLX_SIG_MAX_LEN + 99] = 0;
  bad(big, DLX_SIG_MAX_LEN + 1, "longer than");
  /* 65 parameters */
  size_t n = 0;
  for (int i = 0; i < 65; ++i) n += (size_t)sprintf(big + n, "%sp%d: int", i ? ", " : "", i);
  char err[256];
  int32_t col = 0;
  assert_null(dlx_sig_parse(big, err, sizeof err, &col));
  assert_non_null(strstr(err, "too many parameters"));
  assert_int_equal(big[col - 1], 'p');
  /* 33 size symbols */
  n = (size_t)sprintf(big, "x: f32[");
  for (int i = 0; i < 33; ++i)
    n += (size_t)sprintf(big + n, "%ss%d", i == 0 ? "" : i == 20 ? "], y: f32[" : ", ", i);
  sprintf(big + n, "]");
  assert_null(dlx_sig_parse(big, err, sizeof err, &col));
  assert_non_null(strstr(err, "too many size symbols"));
  free(big);
  dlx_sig *empty = dlx_sig_parse(NULL, err, sizeof err, &col); /* NULL: the empty signature */
  assert_non_null(empty);
  assert_int_equal(empty->nparams, 0);
  dlx_sig_free(empty);
}

/* ---- the per-call check ---------------------------------------------------------- */

typedef struct {
  DLTensor t;
  int64_t shape[4], strides[4];
} tensor;

static void make(tensor *t, DLDataType dt, int32_t ndim, const int64_t *shape) {
  tensor x;
  memset(&x, 0, sizeof x);
  x.t.dtype = dt;
  x.t.ndim = ndim;
  x.t.device = (DLDevice){kDLCPU, 0};
  if (ndim > 0) memcpy(x.shape, shape, sizeof(int64_t) * (size_t)ndim); /* 0-d: shape may be NULL */
  int64_t s = 1;
  for (int32_t d = ndim - 1; d >= 0; --d) x.strides[d] = s, s *= shape[d];
  *t = x;
  t->t.shape = t->shape;
  t->t.strides = t->strides;
}

static const DLDataType F32 = {kDLFloat, 32, 1}, F64 = {kDLFloat, 64, 1};

static void check_msg(const dlx_sig *s, int32_t param, tensor *x, dlx_sig_bindings *b, int code,
                      const char *want) {
  dlx_sig_fault f;
  assert_int_equal(dlx_sig_check_tensor(s, param, &x->t, 0, b, &f), -1);
  assert_int_equal(f.code, code);
  char msg[256];
  dlx_sig_fault_message(s, param, &x->t, b, &f, msg, sizeof msg);
  assert_string_equal(msg, want);
}

static void test_check(void **state) {
  (void)state;
  dlx_sig *s = ok("x: f32[m, n], y: f32|f64[..., 3] contig, z: tensor cuda, "
                  "out: f32[m, n] mut? = None");
  dlx_sig_bindings b;
  dlx_sig_bindings_init(&b, s);
  dlx_sig_fault f;
  tensor x;
  make(&x, F32, 2, (int64_t[]){4, 4});
  assert_int_equal(dlx_sig_check_tensor(s, 0, &x.t, 0, &b, &f), 0);
  assert_int_equal(b.value[0], 4); /* m and n bound by x */
  assert_int_equal(b.value[1], 4);
  assert_int_equal(b.owner[1], 0);
  tensor out;
  make(&out, F32, 2, (int64_t[]){4, 5});
  check_msg(s, 3, &out, &b, DLX_FAULT_SYMBOL, "'out' has n=5 where 'x' has n=4");
  make(&out, F32, 2, (int64_t[]){4, 4});
  assert_int_equal(dlx_sig_check_tensor(s, 3, &out.t, 1, &b, &f), -1);
  assert_int_equal(f.code, DLX_FAULT_READONLY);
  make(&out, F64, 2, (int64_t[]){4, 4});
  check_msg(s, 3, &out, &b, DLX_FAULT_DTYPE, "'out' must be f32[m, n] mut?, got dtype f64");
  make(&out, F32, 3, (int64_t[]){4, 4, 1});
  check_msg(s, 3, &out, &b, DLX_FAULT_NDIM,
            "'out' must be f32[m, n] mut?, got 3 dimensions of shape [4, 4, 1]");
  /* ellipsis: any number of leading dims, then 3 */
  tensor y;
  make(&y, F64, 1, (int64_t[]){3});
  assert_int_equal(dlx_sig_check_tensor(s, 1, &y.t, 0, &b, &f), 0);
  make(&y, F64, 4, (int64_t[]){2, 1, 7, 3});
  assert_int_equal(dlx_sig_check_tensor(s, 1, &y.t, 0, &b, &f), 0);
  make(&y, F64, 0, NULL);
  check_msg(s, 1, &y, &b, DLX_FAULT_NDIM,
            "'y' must be f32|f64[..., 3] contig, got 0 dimensions of shape []");
  make(&y, F64, 2, (int64_t[]){3, 4});
  check_msg(s, 1, &y, &b, DLX_FAULT_EXTENT,
            "'y' must be f32|f64[..., 3] contig, got shape [3, 4] (dimension 1 is 4)");
  make(&y, F64, 2, (int64_t[]){2, 3});
  y.strides[0] = 6; /* every other row */
  check_msg(s, 1, &y, &b, DLX_FAULT_CONTIG,
            "'y' must be C-contiguous (f32|f64[..., 3] contig), got strides [6, 1] for shape [2, 3]");
  y.shape[0] = 1; /* extent 1: its stride does not matter */
  assert_int_equal(dlx_sig_check_tensor(s, 1, &y.t, 0, &b, &f), 0);
  /* a zero extent anywhere: no element is ever stepped to, any strides are contiguous */
  make(&y, F64, 2, (int64_t[]){0, 3});
  y.strides[0] = y.strides[1] = 0;
  assert_int_equal(dlx_sig_is_contig(&y.t), 1);
  assert_int_equal(dlx_sig_check_tensor(s, 1, &y.t, 0, &b, &f), 0);
  make(&y, F64, 3, (int64_t[]){2, 0, 3});
  y.strides[0] = 7;
  y.strides[2] = 5;
  assert_int_equal(dlx_sig_is_contig(&y.t), 1);
  make(&y, F64, 2, (int64_t[]){2, 3});
  y.strides[1] = 0; /* no zero extent: still refused */
  assert_int_equal(dlx_sig_is_contig(&y.t), 0);
  tensor z;
  make(&z, (DLDataType){kDLFloat8_e4m3fn, 8, 1}, 1, (int64_t[]){2});
  check_msg(s, 2, &z, &b, DLX_FAULT_DEVICE, "'z' must be tensor cuda, got a tensor on cpu:0");
  z.t.device = (DLDevice){kDLCUDA, 1};
  assert_int_equal(dlx_sig_check_tensor(s, 2, &z.t, 0, &b, &f), 0); /* "tensor": any dtype */
  dlx_sig_free(s);
}

static void test_devices_and_dtypes(void **state) {
  (void)state;
  assert_true(dlx_sig_device_ok(DLX_SIG_GPU, kDLExtDev));
  assert_true(dlx_sig_device_ok(DLX_SIG_GPU, kDLROCM));
  assert_false(dlx_sig_device_ok(DLX_SIG_GPU, kDLCPU));
  assert_true(dlx_sig_device_ok(DLX_SIG_NPU, kDLExtDev));
  assert_false(dlx_sig_device_ok(DLX_SIG_NPU, kDLCUDA));
  assert_true(dlx_sig_device_ok(DLX_SIG_MUT, kDLCUDA)); /* no device flag: anywhere */
  assert_int_equal(dlx_sig_dtype_bit((DLDataType){kDLBfloat, 16, 1}), 1u << DLX_SIG_BF16);
  assert_int_equal(dlx_sig_dtype_bit((DLDataType){kDLComplex, 128, 1}), 1u << DLX_SIG_C128);
  assert_int_equal(dlx_sig_dtype_bit((DLDataType){kDLBool, 8, 1}), 1u << DLX_SIG_BOOLT);
  assert_int_equal(dlx_sig_dtype_bit((DLDataType){kDLFloat, 32, 4}), DLX_SIG_DT_OTHER);
  assert_int_equal(dlx_sig_dtype_bit((DLDataType){kDLFloat, 8, 1}), DLX_SIG_DT_OTHER);
  char buf[64];
  dlx_sig_dtype_name((DLDataType){kDLFloat, 32, 4}, buf, sizeof buf);
  assert_string_equal(buf, "f32x4");
  dlx_sig_dtype_name((DLDataType){kDLFloat8_e5m2, 8, 1}, buf, sizeof buf);
  assert_string_equal(buf, "dtype(code=12, bits=8)");
  dlx_sig_dtype_name((DLDataType){kDLUInt, 16, 1}, buf, sizeof buf);
  assert_string_equal(buf, "u16");
}

static void test_format_pieces(void **state) {
  (void)state;
  dlx_sig *s = ok("x: f32[m] mut contig gpu?, k: floats = (0.5, 2)");
  char buf[64];
  assert_int_equal(dlx_sig_format_type(s, &s->params[0].type, buf, sizeof buf),
                   strlen("f32[m] mut contig gpu?"));
  assert_string_equal(buf, "f32[m] mut contig gpu?");
  dlx_sig_format_default(s, &s->params[1], buf, sizeof buf);
  assert_string_equal(buf, "(0.5, 2.0)");
  char tiny[5];
  size_t n = dlx_sig_format(s, tiny, sizeof tiny); /* truncated, terminated, full length told */
  assert_string_equal(tiny, "x: f");
  assert_true(n > sizeof tiny);
  dlx_sig_free(s);
}

/* The quick check agrees with the full one: it passes only what the full check passes,
 * binding the same symbols to the same values; what it does not pass, the full check
 * decides (and reports as it always did). */
static void test_quick(void **state) {
  (void)state;
  dlx_sig *s = ok("x: f32[m, n], y: f32[n] mut, z: f32[3, _], w: f32|f64[n], "
                  "v: f32[..., n], c: f32[n] contig, d: f32[n] cuda, i: int");
  dlx_sig_quick q[8];
  for (int32_t p = 0; p < 8; ++p) dlx_sig_quick_plan(s, p, &q[p]);
  assert_int_equal(q[0].ndim, 2);
  assert_int_equal(q[0].sym[0], 0);
  assert_int_equal(q[0].sym[1], 1);
  assert_int_equal(q[0].mut, 0);
  assert_int_equal(q[1].ndim, 1);
  assert_int_equal(q[1].mut, 1);
  assert_int_equal(q[2].sym[0], -2);
  assert_int_equal(q[2].extent[0], 3);
  assert_int_equal(q[2].sym[1], -1);
  for (int32_t p = 3; p < 8; ++p) assert_int_equal(q[p].ndim, -1); /* left to the full check */
  assert_int_equal(q[7].kind, DLX_SIG_INT);
  assert_int_equal(q[0].kind, DLX_SIG_TENSOR);

  const DLDataType dts[] = {F32, F64};
  const int64_t shapes[][2] = {{4, 5}, {4, 4}, {3, 5}, {5, 4}, {3, 2}};
  for (int32_t p = 0; p < 8; ++p)
    for (size_t di = 0; di < 2; ++di)
      for (int32_t nd = 1; nd <= 2; ++nd)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si)
          for (int ro = 0; ro <= 1; ++ro) {
            if (p == 7) continue; /* not a tensor */
            /* two calls' bindings, both after x = [4, 5] bound m and n */
            dlx_sig_bindings bq, bf;
            dlx_sig_bindings_init(&bq, s);
            dlx_sig_bindings_init(&bf, s);
            tensor x, t;
            dlx_sig_fault f;
            make(&x, F32, 2, (int64_t[]){4, 5});
            assert_int_equal(dlx_sig_check_quick(&q[0], 0, &x.t, 0, &bq), 0);
            assert_int_equal(dlx_sig_check_tensor(s, 0, &x.t, 0, &bf, &f), 0);
            assert_memory_equal(bq.value, bf.value, sizeof(int64_t) * 2);
            make(&t, dts[di], nd, shapes[si]);
            int quick = dlx_sig_check_quick(&q[p], p, &t.t, ro, &bq);
            int full = dlx_sig_check_tensor(s, p, &t.t, ro, &bf, &f);
            if (quick == 0) {
              assert_int_equal(full, 0);
              assert_memory_equal(bq.value, bf.value, sizeof(int64_t) * (size_t)s->nsymbols);
            } else {
              /* the full check after the quick one: as if alone */
              dlx_sig_fault f2;
              assert_int_equal(dlx_sig_check_tensor(s, p, &t.t, ro, &bq, &f2), full);
              if (full) assert_int_equal(f2.code, f.code);
            }
          }
  /* fresh symbols are bound by the quick check as by the full one, owner included */
  dlx_sig_bindings b;
  dlx_sig_bindings_init(&b, s);
  tensor y;
  make(&y, F32, 1, (int64_t[]){7});
  assert_int_equal(dlx_sig_check_quick(&q[1], 1, &y.t, 0, &b), 0);
  assert_int_equal(b.value[1], 7);
  assert_int_equal(b.owner[1], 1);
  assert_int_equal(dlx_sig_check_quick(&q[1], 1, &y.t, 1, &b), 1); /* mut: read-only refused */
  dlx_sig_free(s);
}

/* A `mut` tensor's quick check tests overlap in its shape loop: a stride 0 over more than
 * one element goes to the full check (which names DLX_FAULT_OVERLAP), over one element or
 * with no strides (compact) it passes, as the full check says; the bindings a call starts
 * with are unbound whatever the number of symbols. */
static void test_quick_mut_overlap(void **state) {
  (void)state;
  dlx_sig *s = ok("y: f32[m, n] mut, x: f32[m, n]");
  dlx_sig_quick q[2];
  for (int32_t p = 0; p < 2; ++p) dlx_sig_quick_plan(s, p, &q[p]);
  assert_int_equal(q[0].ndim, 2);
  const int64_t cases[][2][2] = {/* shape, strides: then whether it overlaps */
                                 {{4, 5}, {5, 1}}, {{4, 5}, {0, 1}}, {{4, 5}, {5, 0}},
                                 {{1, 5}, {0, 1}}, {{4, 1}, {1, 0}}};
  const int overlaps[] = {0, 1, 1, 0, 0};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
    for (int32_t p = 0; p < 2; ++p) {
      tensor t;
      make(&t, F32, 2, cases[c][0]);
      memcpy(t.strides, cases[c][1], sizeof cases[c][1]);
      dlx_sig_bindings bq, bf;
      dlx_sig_bindings_init(&bq, s);
      dlx_sig_bindings_init(&bf, s);
      dlx_sig_fault f;
      int quick = dlx_sig_check_quick(&q[p], p, &t.t, 0, &bq);
      int full = dlx_sig_check_tensor(s, p, &t.t, 0, &bf, &f);
      const int refused = p == 0 && overlaps[c]; /* only `mut` cares */
      assert_int_equal(quick, refused);
      assert_int_equal(full != 0, refused);
      if (refused) assert_int_equal(f.code, DLX_FAULT_OVERLAP);
      t.t.strides = NULL; /* compact: no overlap */
      dlx_sig_bindings_init(&bq, s);
      assert_int_equal(dlx_sig_check_quick(&q[p], p, &t.t, 0, &bq), 0);
    }
  dlx_sig_free(s);
  s = ok("a: f32[p, q, r, s, t, u]"); /* six symbols: past the four stored in line */
  dlx_sig_bindings b;
  memset(&b, 0x5a, sizeof b);
  dlx_sig_bindings_init(&b, s);
  for (int32_t k = 0; k < 6; ++k) assert_int_equal(b.value[k], -1);
  dlx_sig_free(s);
}

/* "n*": a size symbol marked independent (issue 32); contradictions refused at the mark. */
static void test_independent(void **state) {
  (void)state;
  dlx_sig *s = ok("x: f32[b*, n], w: f32[n] -> f32[b, n]");
  assert_int_equal(s->independent, 1u << 0); /* marking one use marks the symbol */
  dlx_sig_free(s);
  s = ok("x: f32[..., n], w: f32[n]");
  assert_int_equal(s->independent, 0);
  dlx_sig_free(s);
  /* the canonical text marks every use */
  canon("x: f32[b*, n], w: f32[n] -> f32[b, n]", "x: f32[b*, n], w: f32[n] -> f32[b*, n]");
  canon("x: f32[b *,c*] mut", "x: f32[b*, c*] mut");
  canon("x: f32[..., c*], y: f32[c*] -> (f32[..., c*], f32[c*])",
        "x: f32[..., c*], y: f32[c*] -> (f32[..., c*], f32[c*])");
  bad("x: f32[3*]", 9, "only a size symbol");
  bad("x: f32[_*]", 9, "only a size symbol");
  bad("x: f32[...*]", 11, "only a size symbol");
  bad("x: f32[b**]", 10, "',' or ']'");
  bad("x: f32[b*, n] -> f32[n]", 9, "result 0 has no dimension 'b'");
  bad("x: f32[b*, n] -> (f32[b], i64[])", 9, "result 1 has no dimension 'b'");
  bad("x: f32[b*] -> int", 9, "result 0 has no dimension 'b'");
  bad("x: f32[b*] -> f32", 9, "result 0 has no dimension 'b'");
  bad("x: f32[b*], acc: f32[] mut", 9, "mut parameter 'acc' has no dimension 'b'");
  bad("x: f32[b*, b]", 9, "appears twice in 'x'");
  bad("x: f32[b*] -> f32[b, b]", 9, "appears twice in result 0");
  bad("x: f32[n] -> f32[k*]", 19, "no parameter has it");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_independent),
      cmocka_unit_test(test_contract_example), cmocka_unit_test(test_scalars_and_defaults),
      cmocka_unit_test(test_tensors),          cmocka_unit_test(test_results_and_options),
      cmocka_unit_test(test_malformed),        cmocka_unit_test(test_limits),
      cmocka_unit_test(test_check),            cmocka_unit_test(test_devices_and_dtypes),
      cmocka_unit_test(test_format_pieces),    cmocka_unit_test(test_quick), cmocka_unit_test(test_quick_mut_overlap),
      cmocka_unit_test(test_utf8_defaults),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
