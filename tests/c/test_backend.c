/* test_backend.c - backend selection rules and the device->backend map. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_backend.h"

static dlx_backend_facts linux_facts(void) {
  dlx_backend_facts f;
  memset(&f, 0, sizeof f);
  f.platform = DLX_PLATFORM_LINUX;
  return f;
}

static dlx_backend pick(const dlx_backend_facts *f, dlx_backend_choice *c) {
  memset(c, 0x5a, sizeof *c);
  assert_int_equal(dlx_backend_select(f, c), 0);
  assert_true(strlen(c->reason) > 0);
  return c->backend;
}

static void test_names_and_parse(void **state) {
  (void)state;
  static const char *const names[] = {"cpu", "cuda", "rocm", "torch_npu"};
  for (int i = 0; i < DLX_BACKEND_COUNT; ++i) {
    dlx_backend b = DLX_BACKEND_COUNT;
    assert_string_equal(dlx_backend_name((dlx_backend)i), names[i]);
    assert_int_equal(dlx_backend_parse(names[i], &b), 0);
    assert_int_equal(b, i);
  }
  dlx_backend b = DLX_BACKEND_CPU;
  assert_int_equal(dlx_backend_parse("ascend", &b), 0);
  assert_int_equal(b, DLX_BACKEND_TORCH_NPU);
  b = DLX_BACKEND_CPU;
  assert_int_equal(dlx_backend_parse("npu", &b), 0);
  assert_int_equal(b, DLX_BACKEND_TORCH_NPU);
  b = DLX_BACKEND_ROCM;
  assert_int_equal(dlx_backend_parse("CUDA", &b), -1);
  assert_int_equal(dlx_backend_parse("", &b), -1);
  assert_int_equal(dlx_backend_parse("torch-npu", &b), -1);
  assert_int_equal(dlx_backend_parse("cudax", &b), -1);
  assert_int_equal(dlx_backend_parse(NULL, &b), -1);
  assert_int_equal(b, DLX_BACKEND_ROCM); /* untouched on failure */
  assert_string_equal(dlx_backend_name(DLX_BACKEND_COUNT), "unknown");
}

static void test_platform(void **state) {
  (void)state;
  assert_int_equal(dlx_platform_from_name("linux"), DLX_PLATFORM_LINUX);
  assert_int_equal(dlx_platform_from_name("linux2"), DLX_PLATFORM_LINUX);
  assert_int_equal(dlx_platform_from_name("win32"), DLX_PLATFORM_WINDOWS);
  assert_int_equal(dlx_platform_from_name("cygwin"), DLX_PLATFORM_WINDOWS);
  assert_int_equal(dlx_platform_from_name("darwin"), DLX_PLATFORM_MACOS);
  assert_int_equal(dlx_platform_from_name("freebsd14"), DLX_PLATFORM_OTHER);
  assert_int_equal(dlx_platform_from_name(NULL), DLX_PLATFORM_OTHER);
  assert_string_equal(dlx_platform_name(DLX_PLATFORM_LINUX), "linux");
  assert_string_equal(dlx_platform_name(DLX_PLATFORM_WINDOWS), "windows");
  assert_string_equal(dlx_platform_name(DLX_PLATFORM_MACOS), "macos");
  assert_string_equal(dlx_platform_name(DLX_PLATFORM_OTHER), "other");
}

static void test_cpu(void **state) {
  (void)state;
  dlx_backend_facts f = linux_facts();
  dlx_backend_choice c;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CPU);
  assert_non_null(strstr(c.reason, "torch.cuda.is_available() is false"));
  /* cuda/hip version strings alone (a CUDA build on a machine without a GPU) */
  f.version_cuda_set = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CPU);
  f = linux_facts();
  f.version_hip_set = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CPU);
  /* an npu namespace that reports no device */
  f = linux_facts();
  f.npu_namespace = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CPU);
  assert_non_null(strstr(c.reason, "torch.npu.is_available() is false"));
  /* npu_available without the namespace is not a usable NPU */
  f = linux_facts();
  f.npu_available = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CPU);
  /* forced "" counts as unset */
  f = linux_facts();
  f.forced = "";
  f.cuda_available = f.version_cuda_set = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CUDA);
}

static void test_cuda_and_rocm(void **state) {
  (void)state;
  dlx_backend_facts f = linux_facts();
  dlx_backend_choice c;
  f.cuda_available = 1;
  f.version_cuda_set = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CUDA);
  assert_string_equal(c.reason, "torch.cuda.is_available() and torch.version.cuda is set");

  f.version_cuda_set = 0;
  f.version_hip_set = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_ROCM);
  assert_string_equal(c.reason, "torch.cuda.is_available() and torch.version.hip is set");

  /* both set: cuda */
  f.version_cuda_set = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CUDA);

  /* missing version attributes (probes raised -> 0): still cuda, and says so */
  f.version_cuda_set = f.version_hip_set = 0;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CUDA);
  assert_non_null(strstr(c.reason, "neither torch.version.cuda nor torch.version.hip"));
}

static void test_torch_npu(void **state) {
  (void)state;
  dlx_backend_facts f = linux_facts();
  dlx_backend_choice c;
  f.npu_namespace = 1;
  f.npu_available = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_TORCH_NPU);
  assert_non_null(strstr(c.reason, "torch.npu.is_available()"));
  /* a CUDA build without a GPU next to a working NPU: the NPU */
  f.version_cuda_set = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_TORCH_NPU);
}

static void test_gpu_precedence_over_npu(void **state) {
  (void)state;
  dlx_backend_facts f = linux_facts();
  dlx_backend_choice c;
  f.npu_namespace = f.npu_available = 1;
  f.cuda_available = f.version_cuda_set = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CUDA);
  assert_non_null(strstr(c.reason, "torch.npu is available too"));
  f.version_cuda_set = 0;
  f.version_hip_set = 1;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_ROCM);
  assert_non_null(strstr(c.reason, "torch.npu is available too"));
  f.version_hip_set = 0;
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CUDA);
}

static void test_npu_never_off_linux(void **state) {
  (void)state;
  const dlx_platform others[] = {DLX_PLATFORM_WINDOWS, DLX_PLATFORM_MACOS, DLX_PLATFORM_OTHER};
  for (size_t i = 0; i < sizeof others / sizeof others[0]; ++i) {
    dlx_backend_facts f = linux_facts();
    dlx_backend_choice c;
    f.platform = others[i];
    f.npu_namespace = f.npu_available = 1;
    assert_int_equal(pick(&f, &c), DLX_BACKEND_CPU);
    assert_non_null(strstr(c.reason, "only supported on Linux"));
    assert_non_null(strstr(c.reason, dlx_platform_name(others[i])));
    /* a GPU there is still used */
    f.cuda_available = f.version_cuda_set = 1;
    assert_int_equal(pick(&f, &c), DLX_BACKEND_CUDA);
    assert_null(strstr(c.reason, "npu"));
  }
}

static void test_forced(void **state) {
  (void)state;
  dlx_backend_facts f = linux_facts();
  dlx_backend_choice c;
  /* forcing beats every fact */
  f.cuda_available = f.version_cuda_set = 1;
  f.forced = "cpu";
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CPU);
  assert_non_null(strstr(c.reason, "DLX_BACKEND"));
  f.forced = "rocm";
  assert_int_equal(pick(&f, &c), DLX_BACKEND_ROCM);
  f.forced = "ascend";
  assert_int_equal(pick(&f, &c), DLX_BACKEND_TORCH_NPU);
  f = linux_facts();
  f.forced = "cuda";
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CUDA);

  f.forced = "metal";
  assert_int_equal(dlx_backend_select(&f, &c), -1);
  assert_non_null(strstr(c.reason, "'metal'"));
  assert_non_null(strstr(c.reason, "cpu, cuda, rocm, torch_npu"));

  f.platform = DLX_PLATFORM_WINDOWS;
  f.forced = "torch_npu";
  assert_int_equal(dlx_backend_select(&f, &c), -1);
  assert_non_null(strstr(c.reason, "only supported on Linux"));
  assert_non_null(strstr(c.reason, "windows"));
  f.platform = DLX_PLATFORM_MACOS;
  f.forced = "npu";
  assert_int_equal(dlx_backend_select(&f, &c), -1);
  assert_non_null(strstr(c.reason, "macos"));
  /* but other forced backends are fine there */
  f.forced = "cpu";
  assert_int_equal(pick(&f, &c), DLX_BACKEND_CPU);
}

static void test_device_map(void **state) {
  (void)state;
  dlx_backend b = DLX_BACKEND_COUNT;
  assert_int_equal(dlx_device_backend(kDLCUDA, &b), 0);
  assert_int_equal(b, DLX_BACKEND_CUDA);
  assert_int_equal(dlx_device_backend(kDLROCM, &b), 0);
  assert_int_equal(b, DLX_BACKEND_ROCM);
  assert_int_equal(dlx_device_backend(kDLExtDev, &b), 0);
  assert_int_equal(b, DLX_BACKEND_TORCH_NPU);
  b = DLX_BACKEND_COUNT;
  assert_int_equal(dlx_device_backend(kDLCPU, &b), -1);
  assert_int_equal(dlx_device_backend(kDLCUDAHost, &b), -1);
  assert_int_equal(dlx_device_backend(kDLMetal, &b), -1);
  assert_int_equal(dlx_device_backend(9999, &b), -1);
  assert_int_equal(dlx_device_backend(-1, &b), -1);
  assert_int_equal(b, DLX_BACKEND_COUNT);

  size_t n = 0;
  const dlx_device_row *rows = dlx_device_rows(&n);
  assert_int_equal(n, 3);
  for (size_t i = 0; i < n; ++i) {
    assert_non_null(rows[i].note);
    assert_true(strlen(rows[i].note) > 0);
    assert_int_equal(dlx_device_backend(rows[i].device_type, &b), 0);
    assert_int_equal(b, rows[i].backend);
    assert_int_equal(rows[i].only_when_active, rows[i].device_type == kDLExtDev);
  }
}

static void test_device_stream_map(void **state) {
  (void)state;
  dlx_backend b;
  for (int active = 0; active < DLX_BACKEND_COUNT; ++active) {
    b = DLX_BACKEND_COUNT;
    assert_int_equal(dlx_device_stream_backend(kDLCUDA, (dlx_backend)active, &b), 0);
    assert_int_equal(b, DLX_BACKEND_CUDA);
    assert_int_equal(dlx_device_stream_backend(kDLROCM, (dlx_backend)active, &b), 0);
    assert_int_equal(b, DLX_BACKEND_ROCM);
    assert_int_equal(dlx_device_stream_backend(kDLCPU, (dlx_backend)active, &b), -1);
    b = DLX_BACKEND_COUNT;
    int rc = dlx_device_stream_backend(kDLExtDev, (dlx_backend)active, &b);
    if (active == DLX_BACKEND_TORCH_NPU) {
      assert_int_equal(rc, 0);
      assert_int_equal(b, DLX_BACKEND_TORCH_NPU);
    } else {
      assert_int_equal(rc, -1);
      assert_int_equal(b, DLX_BACKEND_COUNT);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_and_parse),  cmocka_unit_test(test_platform),
      cmocka_unit_test(test_cpu),              cmocka_unit_test(test_cuda_and_rocm),
      cmocka_unit_test(test_torch_npu),        cmocka_unit_test(test_gpu_precedence_over_npu),
      cmocka_unit_test(test_npu_never_off_linux), cmocka_unit_test(test_forced),
      cmocka_unit_test(test_device_map),       cmocka_unit_test(test_device_stream_map),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
