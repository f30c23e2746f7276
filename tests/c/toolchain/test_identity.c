/* test_identity.c - SHA-256, addon identity strings and addon file names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_identity.h"

static void expect_digest(const void *data, size_t n, const char *hex) {
  char out[65];
  memset(out, 'x', sizeof out);
  dlx_digest_hex(data, n, out);
  assert_string_equal(out, hex);
}

static void test_sha256_vectors(void **state) {
  (void)state;
  /* FIPS 180-2 examples */
  expect_digest("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  expect_digest("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  expect_digest(two, strlen(two),
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* padding edges: 55 fits one block, 56 needs two; block multiples */
  static const struct {
    size_t n;
    const char *hex;
  } as[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
      {1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  char *a = malloc(1000000);
  assert_non_null(a);
  memset(a, 'a', 1000000);
  for (size_t i = 0; i < sizeof as / sizeof as[0]; ++i) expect_digest(a, as[i].n, as[i].hex);
  free(a);
}

/* The CPU's SHA instructions (where this machine has them) and the portable code agree on
 * every length around the block and padding edges, and on unaligned data. */
static void test_sha256_accelerated_matches_portable(void **state) {
  (void)state;
  unsigned char *buf = malloc(4096 + 1);
  assert_non_null(buf);
  uint32_t x = 12345;
  for (size_t i = 0; i < 4097; ++i) buf[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
  char fast[65], slow[65];
  for (size_t n = 0; n <= 4096; n += (n < 300 ? 1 : 61)) {
    dlx_digest_hex(buf + 1, n, fast); /* + 1: unaligned */
    dlx_digest_hex_portable(buf + 1, n, slow);
    assert_string_equal(fast, slow);
  }
  print_message("SHA-256 with the CPU's SHA instructions: %s\n",
                dlx_digest_uses_sha_ni() ? "yes" : "no (portable code only)");
  free(buf);
}

static dlx_addon_facts base(void) {
  dlx_addon_facts f;
  memset(&f, 0, sizeof f);
  f.torch_version = "2.11.0+cu130";
  f.cxx11_abi = 1;
  f.backend = DLX_BACKEND_CUDA;
  f.python_abi_tag = "cpython-311-x86_64-linux-gnu";
  f.dlpack_major = 1;
  f.dlpack_minor = 3;
  f.source_digest = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  f.flags = "-O2 -DFOO";
  return f;
}

static void test_identity_fields(void **state) {
  (void)state;
  dlx_addon_facts f = base();
  char id[1024];
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), 0);
  char flags_hex[65];
  dlx_digest_hex(f.flags, strlen(f.flags), flags_hex);
  char want[1024];
  snprintf(want, sizeof want,
           "dlx-torch-addon;torch=2.11.0+cu130;cxx11abi=1;backend=cuda;"
           "python=cpython-311-x86_64-linux-gnu;dlpack=1.3;source=%s;flags=%s",
           f.source_digest, flags_hex);
  assert_string_equal(id, want);
  assert_null(strchr(id, '\n'));

  /* any non-zero ABI flag reads as 1; NULL flags are the empty string's digest */
  f.cxx11_abi = 7;
  f.flags = NULL;
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), 0);
  assert_non_null(strstr(id, ";cxx11abi=1;"));
  assert_non_null(
      strstr(id, ";flags=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  f.cxx11_abi = 0;
  f.flags = "has;semicolons\nand newlines"; /* hashed, so harmless */
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), 0);
  assert_non_null(strstr(id, ";cxx11abi=0;"));
  assert_null(strchr(id, '\n'));
}

/* Every field, changed alone, changes both the identity and the file name. */
static void test_each_field_matters(void **state) {
  (void)state;
  dlx_addon_facts f0 = base();
  char id0[1024], name0[256];
  assert_int_equal(dlx_addon_identity(&f0, id0, sizeof id0), 0);
  assert_int_equal(dlx_addon_filename(&f0, name0, sizeof name0), 0);
  for (int field = 0; field < 8; ++field) {
    dlx_addon_facts f = base();
    switch (field) {
      case 0: f.torch_version = "2.11.0+cu128"; break; /* build tag only */
      case 1: f.cxx11_abi = 0; break;
      case 2: f.backend = DLX_BACKEND_ROCM; break;
      case 3: f.python_abi_tag = "cpython-312-x86_64-linux-gnu"; break;
      case 4: f.dlpack_major = 2; break;
      case 5: f.dlpack_minor = 4; break;
      case 6:
        f.source_digest = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab";
        break;
      case 7: f.flags = "-O2 -DFOO "; break; /* one trailing space */
    }
    char id[1024], name[256];
    assert_int_equal(dlx_addon_identity(&f, id, sizeof id), 0);
    assert_int_equal(dlx_addon_filename(&f, name, sizeof name), 0);
    if (strcmp(id, id0) == 0) fail_msg("field %d does not change the identity", field);
    if (strcmp(name, name0) == 0) fail_msg("field %d does not change the file name", field);
  }
}

static void test_filename_format(void **state) {
  (void)state;
  dlx_addon_facts f = base();
  char id[1024], name[256], hex[65], want[256];
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), 0);
  dlx_digest_hex(id, strlen(id), hex);
  snprintf(want, sizeof want, "libdlx_torch_2.11_cuda_%.12s.so", hex);
  assert_int_equal(dlx_addon_filename(&f, name, sizeof name), 0);
  assert_string_equal(name, want);
  assert_int_equal(strlen(name), strlen("libdlx_torch_2.11_cuda_") + 12 + 3);

  f.torch_version = "1.13.0a0+git49444c3";
  f.backend = DLX_BACKEND_TORCH_NPU;
  assert_int_equal(dlx_addon_filename(&f, name, sizeof name), 0);
  assert_memory_equal(name, "libdlx_torch_1.13_torch_npu_", strlen("libdlx_torch_1.13_torch_npu_"));
  f.torch_version = "2.5";
  f.backend = DLX_BACKEND_CPU;
  assert_int_equal(dlx_addon_filename(&f, name, sizeof name), 0);
  assert_memory_equal(name, "libdlx_torch_2.5_cpu_", strlen("libdlx_torch_2.5_cpu_"));

  /* not "<digits>.<digits>..." */
  const char *bad[] = {"abc", "2", "2.", ".5", "v2.1.0", "2.x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    f.torch_version = bad[i];
    assert_int_equal(dlx_addon_filename(&f, name, sizeof name), -1);
  }
  /* too small a buffer */
  f = base();
  assert_int_equal(dlx_addon_filename(&f, name, strlen(want)), -1);
  assert_int_equal(dlx_addon_filename(&f, name, strlen(want) + 1), 0);
}

static void test_identity_rejects(void **state) {
  (void)state;
  char id[1024];
  dlx_addon_facts f = base();
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), 0);
  size_t need = strlen(id) + 1;
  assert_int_equal(dlx_addon_identity(&f, id, need), 0);
  assert_int_equal(dlx_addon_identity(&f, id, need - 1), -1);
  assert_string_equal(id, ""); /* never a truncated identity */

  f = base();
  f.torch_version = NULL;
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), -1);
  f = base();
  f.torch_version = "";
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), -1);
  f = base();
  f.python_abi_tag = "cpython;311";
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), -1);
  f = base();
  f.source_digest = "abc\n";
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), -1);
  f = base();
  f.source_digest = NULL;
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), -1);
  f = base();
  f.backend = DLX_BACKEND_COUNT;
  assert_int_equal(dlx_addon_identity(&f, id, sizeof id), -1);
  char name[256];
  assert_int_equal(dlx_addon_filename(&f, name, sizeof name), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_vectors),
      cmocka_unit_test(test_sha256_accelerated_matches_portable),   cmocka_unit_test(test_identity_fields),
      cmocka_unit_test(test_each_field_matters), cmocka_unit_test(test_filename_format),
      cmocka_unit_test(test_identity_rejects),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
