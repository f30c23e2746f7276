/* test_build_plan.c - dlx.build's decisions: languages, compilers, command lines, CUDA
 * architecture, cache keys and names, first errors; the dependency-file parser and the
 * build record (format and strict parse). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dlx_build_record.h"
#include "dlx_compile_command.h"
#include "dlx_depfile.h"
#include "dlx_build_plan.h"

static char err[1024];

static void test_languages(void **state) {
  (void)state;
  dlx_lang l;
  const struct {
    const char *path;
    dlx_lang lang;
  } ok[] = {{"/a/k.c", DLX_LANG_C},       {"k.cc", DLX_LANG_CXX}, {"x/k.cpp", DLX_LANG_CXX},
            {"k.cxx", DLX_LANG_CXX},      {"k.c++", DLX_LANG_CXX}, {"K.C", DLX_LANG_CXX},
            {"/p.q/k.cu", DLX_LANG_CUDA}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    assert_int_equal(dlx_lang_of_path(ok[i].path, &l, err, sizeof err), 0);
    assert_int_equal(l, ok[i].lang);
  }
  const char *bad[] = {"k.f90", "k", "/a.c/k", "k.", "k.CU", "k.h", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    assert_int_equal(dlx_lang_of_path(bad[i], &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "language"));
  }
  assert_int_equal(dlx_lang_parse("C++", &l, err, sizeof err), 0);
  assert_int_equal(l, DLX_LANG_CXX);
  assert_int_equal(dlx_lang_parse("cuda", &l, err, sizeof err), 0);
  assert_int_equal(l, DLX_LANG_CUDA);
  assert_int_equal(dlx_lang_parse("fortran", &l, err, sizeof err), -1);
  assert_non_null(strstr(err, "fortran"));
  assert_int_equal(dlx_lang_parse(NULL, &l, err, sizeof err), -1);
  assert_string_equal(dlx_lang_package(DLX_LANG_C), "gcc");
  assert_string_equal(dlx_lang_package(DLX_LANG_CXX), "g++");
  assert_non_null(strstr(dlx_lang_package(DLX_LANG_CUDA), "nvidia-cuda-toolkit"));
}

static void test_link_language(void **state) {
  (void)state;
  dlx_lang c[] = {DLX_LANG_C, DLX_LANG_C}, cx[] = {DLX_LANG_C, DLX_LANG_CXX},
           all[] = {DLX_LANG_CXX, DLX_LANG_CUDA, DLX_LANG_C};
  assert_int_equal(dlx_link_lang(c, 2), DLX_LANG_C);
  assert_int_equal(dlx_link_lang(cx, 2), DLX_LANG_CXX);  /* links the C++ runtime */
  assert_int_equal(dlx_link_lang(all, 3), DLX_LANG_CUDA); /* and the CUDA one */
}

static void test_compiler_candidates(void **state) {
  (void)state;
  char cand[3][4096];
  dlx_compiler_env none = {NULL, "  ", NULL};
  assert_int_equal(dlx_compiler_candidates(DLX_LANG_C, &none, cand), 1);
  assert_string_equal(cand[0], "cc");
  assert_int_equal(dlx_compiler_candidates(DLX_LANG_CXX, &none, cand), 1);
  assert_string_equal(cand[0], "c++"); /* a blank $CXX is unset */
  dlx_compiler_env set = {"ccache gcc", "clang++", "/opt/cuda//"};
  assert_int_equal(dlx_compiler_candidates(DLX_LANG_C, &set, cand), 1);
  assert_string_equal(cand[0], "ccache gcc");
  assert_int_equal(dlx_compiler_candidates(DLX_LANG_CUDA, &set, cand), 3);
  assert_string_equal(cand[0], "/opt/cuda/bin/nvcc");
  assert_string_equal(cand[1], "/usr/local/cuda/bin/nvcc");
  assert_string_equal(cand[2], "nvcc");
  assert_int_equal(dlx_compiler_candidates(DLX_LANG_CUDA, &none, cand), 2);
  assert_string_equal(cand[0], "/usr/local/cuda/bin/nvcc");
}

static void test_cuda_arch(void **state) {
  (void)state;
  char flag[128], why[512];
  const struct {
    const char *asked, *flag;
  } ok[] = {{"sm_80", "-gencode=arch=compute_80,code=sm_80"},
            {"86", "-gencode=arch=compute_86,code=sm_86"},
            {"9.0", "-gencode=arch=compute_90,code=sm_90"},
            {"compute_75", "-gencode=arch=compute_75,code=sm_75"},
            {"sm_90a", "-gencode=arch=compute_90a,code=sm_90a"},
            {"12.0", "-gencode=arch=compute_120,code=sm_120"}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    assert_int_equal(dlx_cuda_arch(ok[i].asked, 89, "torch", flag, sizeof flag, why, sizeof why,
                                   err, sizeof err), 0);
    assert_string_equal(flag, ok[i].flag); /* asked beats visible */
    assert_non_null(strstr(why, "cuda_arch="));
  }
  const char *bad[] = {"volta", "sm_", "8", "8.", "8.0.1", "sm_8x0", "1234567"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
    assert_int_equal(dlx_cuda_arch(bad[i], 0, NULL, flag, sizeof flag, why, sizeof why, err,
                                   sizeof err), -1);
  assert_int_equal(dlx_cuda_arch(NULL, 89, "torch.cuda", flag, sizeof flag, why, sizeof why,
                                 err, sizeof err), 0);
  assert_string_equal(flag, "-gencode=arch=compute_89,code=sm_89");
  assert_non_null(strstr(why, "visible GPU"));
  assert_non_null(strstr(why, "torch.cuda"));
  assert_int_equal(dlx_cuda_arch("", 0, "no CUDA driver", flag, sizeof flag, why, sizeof why,
                                 err, sizeof err), 0);
  assert_string_equal(flag, "-gencode=arch=compute_75,code=[sm_75,compute_75]"); /* + PTX */
  assert_non_null(strstr(why, "plus PTX"));
  assert_non_null(strstr(why, "no CUDA driver"));
}

static void expect_argv(char **argv, int argc, const char *const *want, int n) {
  assert_int_equal(argc, n);
  for (int i = 0; i < n; ++i) assert_string_equal(argv[i], want[i]);
  assert_null(argv[n]);
  dlx_argv_free(argv, argc);
}

static void test_unit_and_link_argv(void **state) {
  (void)state;
  const char *inc[] = {"/dlx/include", "/my inc"}, *cfl[] = {"-O3", "-DX=1"};
  char **argv;
  int argc;
  dlx_unit_spec c = {DLX_LANG_C, "ccache gcc", "/s/k.c", "/w/0.o", "/w/0.d",
                     {inc, 2}, {cfl, 2}, NULL};
  assert_int_equal(dlx_unit_argv(&c, &argv, &argc, err, sizeof err), 0);
  const char *want_c[] = {"ccache", "gcc", "-c", "-O2", "-fPIC", "-fvisibility=hidden",
                          "-I/dlx/include", "-I/my inc", "-O3", "-DX=1", "-MD", "-MF",
                          "/w/0.d", "/s/k.c", "-o", "/w/0.o"};
  expect_argv(argv, argc, want_c, 16);

  dlx_unit_spec cu = {DLX_LANG_CUDA, "/cuda/bin/nvcc", "/s/k.cu", "/w/1.o", "/w/1.d",
                      {inc, 1}, {NULL, 0}, "-gencode=arch=compute_80,code=sm_80"};
  assert_int_equal(dlx_unit_argv(&cu, &argv, &argc, err, sizeof err), 0);
  const char *want_cu[] = {"/cuda/bin/nvcc", "-c", "-O2", "-Xcompiler", "-fPIC", "-Xcompiler",
                           "-fvisibility=hidden", "-gencode=arch=compute_80,code=sm_80",
                           "-I/dlx/include", "-MD", "-MF", "/w/1.d", "/s/k.cu", "-o", "/w/1.o"};
  expect_argv(argv, argc, want_cu, 15);
  cu.cuda_arch_flag = NULL; /* a CUDA source needs an architecture */
  assert_int_equal(dlx_unit_argv(&cu, &argv, &argc, err, sizeof err), -1);
  c.compiler = "  "; /* an empty command is no compiler */
  assert_int_equal(dlx_unit_argv(&c, &argv, &argc, err, sizeof err), -1);
  assert_non_null(strstr(err, "C compiler"));
  c.compiler = "gcc 'unterminated";
  assert_int_equal(dlx_unit_argv(&c, &argv, &argc, err, sizeof err), -1);
  assert_non_null(strstr(err, "unterminated"));

  const char *objs[] = {"/w/0.o", "/w/1.o"}, *ldf[] = {"-Wl,-z,now"}, *libs[] = {"m"};
  dlx_link_spec l = {"c++", "/out/lib.so", {objs, 2}, {ldf, 1}, {libs, 1}};
  assert_int_equal(dlx_link_argv(&l, &argv, &argc, err, sizeof err), 0);
  const char *want_l[] = {"c++", "-shared", "-o", "/out/lib.so", "/w/0.o", "/w/1.o",
                          "-Wl,-z,now", "-lm"};
  expect_argv(argv, argc, want_l, 8);
  l.objects.n = 0;
  assert_int_equal(dlx_link_argv(&l, &argv, &argc, err, sizeof err), -1);
}

static void test_argv_join_quotes(void **state) {
  (void)state;
  char *argv[] = {"cc", "-DX=1", "/my dir/k.c", "it's", "", NULL};
  char *s = dlx_argv_join(argv);
  assert_string_equal(s, "cc -DX=1 '/my dir/k.c' 'it'\\''s' ''");
  /* it reads back as the same words */
  char **back;
  int n;
  assert_int_equal(dlx_shell_split(s, &back, &n, err, sizeof err), 0);
  assert_int_equal(n, 5);
  for (int i = 0; i < 5; ++i) assert_string_equal(back[i], argv[i]);
  dlx_argv_free(back, n);
  free(s);
}

/* A fact set and its key, for the tests below to vary one field at a time. */
typedef struct {
  dlx_lang langs[2];
  const char *sources[2], *digests[2], *tools[DLX_LANG_COUNT], *commands[DLX_LANG_COUNT];
  const char *inc[2], *cfl[2], *ldf[1], *libs[1];
  dlx_build_facts f;
} facts;

static void facts_init(facts *x) {
  memset(x, 0, sizeof *x);
  x->langs[0] = DLX_LANG_C;
  x->langs[1] = DLX_LANG_CUDA;
  x->sources[0] = "/s/a.c";
  x->sources[1] = "/s/b.cu";
  x->digests[0] = "1111111111111111111111111111111111111111111111111111111111111111";
  x->digests[1] = "2222222222222222222222222222222222222222222222222222222222222222";
  x->tools[DLX_LANG_C] = "/usr/bin/gcc-12";
  x->tools[DLX_LANG_CUDA] = "/cuda/bin/nvcc";
  x->commands[DLX_LANG_C] = "cc";
  x->commands[DLX_LANG_CUDA] = "/cuda/bin/nvcc";
  x->inc[0] = "/dlx/include";
  x->inc[1] = "/mine";
  x->cfl[0] = "-O3";
  x->cfl[1] = "-DX";
  x->ldf[0] = "-s";
  x->libs[0] = "m";
  x->f = (dlx_build_facts){"k", 0x00010001u, 2, x->langs, x->sources, x->digests, x->tools,
                           x->commands, {x->inc, 2}, {x->cfl, 2}, {x->ldf, 1}, {x->libs, 1},
                           "-gencode=arch=compute_75,code=[sm_75,compute_75]"};
}

static void key_of(facts *x, char out[65]) { assert_int_equal(dlx_build_key1(&x->f, out), 0); }

static void test_key1_covers_every_fact(void **state) {
  (void)state;
  facts x;
  char base[65], k[65];
  facts_init(&x);
  key_of(&x, base);
  key_of(&x, k);
  assert_string_equal(base, k); /* stable */
#define CHANGED(stmt)        \
  do {                       \
    facts_init(&x);          \
    stmt;                    \
    key_of(&x, k);           \
    assert_string_not_equal(base, k); \
  } while (0)
  CHANGED(x.f.name = "k2");
  CHANGED(x.f.abi_version = 0x00010002u);
  CHANGED(x.langs[0] = DLX_LANG_CXX);
  CHANGED(x.sources[0] = "/s/other.c");
  CHANGED(x.digests[1] = "3333333333333333333333333333333333333333333333333333333333333333");
  CHANGED(x.tools[DLX_LANG_C] = "/usr/bin/gcc-13");
  CHANGED(x.commands[DLX_LANG_C] = "gcc");
  CHANGED(x.inc[1] = "/theirs");
  CHANGED(x.cfl[0] = "-O2");
  CHANGED(x.f.cflags.n = 1);
  CHANGED(x.ldf[0] = "-g");
  CHANGED(x.libs[0] = "dl");
  CHANGED(x.f.cuda_arch_flag = "-gencode=arch=compute_80,code=sm_80");
  /* a flag moved from one list to the next is a different build */
  CHANGED((x.f.cflags.n = 1, x.ldf[0] = "-DX"));
  /* words never run together: "-O3" "-DX" is not "-O3 -DX" */
  CHANGED((x.cfl[0] = "-O3 -DX", x.f.cflags.n = 1));
  facts_init(&x);
  x.f.source_digests = NULL;
  assert_int_equal(dlx_build_key1(&x.f, k), -1);
}

static void test_key2_covers_versions_and_headers(void **state) {
  (void)state;
  const char *k1 = "abababababababababababababababababababababababababababababababab";
  const char *v[DLX_LANG_COUNT] = {"v1", NULL, NULL};
  const char *paths[] = {"/i/a.h", "/i/b.h"}, *dig[] = {"d1", "d2"};
  char base[65], k[65];
  assert_int_equal(dlx_build_key2(k1, v, 2, paths, dig, base), 0);
  const char *v2[DLX_LANG_COUNT] = {"v2", NULL, NULL};
  assert_int_equal(dlx_build_key2(k1, v2, 2, paths, dig, k), 0);
  assert_string_not_equal(base, k);
  const char *dig2[] = {"d1", "d3"};
  assert_int_equal(dlx_build_key2(k1, v, 2, paths, dig2, k), 0);
  assert_string_not_equal(base, k);
  assert_int_equal(dlx_build_key2(k1, v, 1, paths, dig, k), 0);
  assert_string_not_equal(base, k);
  assert_int_equal(dlx_build_key2("short", v, 1, paths, dig, k), -1);
}

static void test_names(void **state) {
  (void)state;
  const char *key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  char out[256];
  assert_int_equal(dlx_build_lib_name("saxpy", key, out, sizeof out), 0);
  assert_string_equal(out, "libsaxpy-0123456789abcdef0123.so");
  assert_int_equal(dlx_build_manifest_name("saxpy", key, out, sizeof out), 0);
  assert_string_equal(out, "saxpy-0123456789abcdef0123.build");
  assert_int_equal(dlx_build_lock_name("saxpy", key, out, sizeof out), 0);
  assert_string_equal(out, "saxpy-0123456789abcdef0123.lock");
  assert_int_equal(dlx_build_inline_name("k", DLX_LANG_CUDA, key, out, sizeof out), 0);
  assert_string_equal(out, "src-k-0123456789abcdef0123.cu");
  assert_int_equal(dlx_build_lib_name("saxpy", key, out, 10), -1);
  const char *bad[] = {"", ".hidden", "-opt", "a/b", "..", "a b", "x\n", NULL};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    assert_int_equal(dlx_build_name_ok(bad[i]), 0);
    assert_int_equal(dlx_build_lib_name(bad[i], key, out, sizeof out), -1);
  }
  char longname[80];
  memset(longname, 'a', sizeof longname - 1);
  longname[79] = '\0';
  assert_int_equal(dlx_build_name_ok(longname), 0);
  assert_int_equal(dlx_build_name_ok("my_kernels-2.v1"), 1);
}

static void test_first_errors(void **state) {
  (void)state;
  char out[512];
  const char *gcc = "k.c: In function 'f':\n"
                    "k.c:3:10: error: 'y' undeclared\n"
                    "    3 | return y;\n"
                    "k.c:4:1: warning: unused\n"
                    "k.c:5:2: error: expected ';'\n";
  assert_int_equal(dlx_first_errors(gcc, 8, out, sizeof out), 2);
  assert_string_equal(out, "k.c:3:10: error: 'y' undeclared\nk.c:5:2: error: expected ';'\n");
  assert_int_equal(dlx_first_errors(gcc, 1, out, sizeof out), 1);
  assert_int_equal(dlx_first_errors("/usr/bin/ld: k.o: undefined reference to `g'\n", 8, out,
                                    sizeof out), 1);
  /* no error line: the first lines */
  assert_int_equal(dlx_first_errors("Killed\nsomething\n", 8, out, sizeof out), 2);
  assert_string_equal(out, "Killed\nsomething\n");
  assert_int_equal(dlx_first_errors(NULL, 8, out, sizeof out), 0);
  assert_string_equal(out, "");
  /* whole lines only, never past the buffer */
  char tiny[12];
  assert_int_equal(dlx_first_errors(gcc, 8, tiny, sizeof tiny), 0);
  assert_string_equal(tiny, "");
}

/* ---- dependency files ------------------------------------------------------------ */

typedef struct {
  char paths[16][256];
  int n, refuse_at;
} got_deps;

static int collect(void *ctx, const char *path) {
  got_deps *g = ctx;
  if (g->n == g->refuse_at) return -1;
  snprintf(g->paths[g->n++], 256, "%s", path);
  return 0;
}

static int parse_deps(const char *text, got_deps *g) {
  memset(g, 0, sizeof *g);
  g->refuse_at = -1;
  return dlx_depfile_parse(text, strlen(text), collect, g, err, sizeof err);
}

static void test_depfile_gcc_and_nvcc(void **state) {
  (void)state;
  got_deps g;
  const char *gcc = "/w/0.o: /s/k.c /usr/include/stdc-predef.h \\\n"
                    " /dlx/include/dlx/dlx.h /my\\ dir/odd\\#name$$x.h \\\n"
                    " /usr/include/stdint.h\n";
  assert_int_equal(parse_deps(gcc, &g), 5);
  assert_string_equal(g.paths[0], "/s/k.c");
  assert_string_equal(g.paths[2], "/dlx/include/dlx/dlx.h");
  assert_string_equal(g.paths[3], "/my dir/odd#name$x.h");
  assert_string_equal(g.paths[4], "/usr/include/stdint.h");
  /* several rules (nvcc, -MP), CRLF, a repeated path given once, no final newline */
  const char *multi = "a.o : a.cu b.h\r\nb.h:\n\nx.o: b.h \\\r\n c.h";
  assert_int_equal(parse_deps(multi, &g), 3);
  assert_string_equal(g.paths[0], "a.cu");
  assert_string_equal(g.paths[1], "b.h");
  assert_string_equal(g.paths[2], "c.h");
  /* a target with an escaped blank; a ':' inside a path is not a rule's end */
  assert_int_equal(parse_deps("my\\ obj.o: C:x.h\n", &g), 1);
  assert_string_equal(g.paths[0], "C:x.h");
  assert_int_equal(parse_deps("", &g), 0);
  assert_int_equal(parse_deps("\n\n", &g), 0);
}

/* As gcc 12 and clang 14 write them (captured): Make's quoting of blanks after
 * backslashes, '#', '$', and a newline inside a path written as it is. */
static void test_depfile_make_quoting(void **state) {
  (void)state;
  got_deps g;
  const char *gcc = "/c/cache nl\nx/kernels/.work-k-1/0-k.c.o: /s/nl\nx/k.c \\\n"
                    " /usr/include/stdc-predef.h /i/x\\#y$$z/h\\ 1.h \\\n"
                    " /b/back\\\\\\ slash/k.c /t/tab\\\tx/k.c /e/two\\\\ /f/tr\\ail \\\n"
                    " /n/nl\nline/g.h\n";
  assert_int_equal(parse_deps(gcc, &g), 8);
  assert_string_equal(g.paths[0], "/s/nl\nx/k.c");
  assert_string_equal(g.paths[2], "/i/x#y$z/h 1.h");
  assert_string_equal(g.paths[3], "/b/back\\ slash/k.c"); /* 3 backslashes: 1 and a space */
  assert_string_equal(g.paths[4], "/t/tab\tx/k.c");
  assert_string_equal(g.paths[5], "/e/two\\");            /* 2 and a blank: 1, the end */
  assert_string_equal(g.paths[6], "/f/tr\\ail");          /* other backslashes are literal */
  assert_string_equal(g.paths[7], "/n/nl\nline/g.h");
  /* nvcc's "target : deps", then another rule */
  assert_int_equal(parse_deps("o : /a/x\ny.h\np.o: /b/c.h\n", &g), 2);
  assert_string_equal(g.paths[0], "/a/x\ny.h");
  assert_string_equal(g.paths[1], "/b/c.h");
  /* a line that is neither a rule nor a path's rest is still refused */
  assert_int_equal(parse_deps("o: a\n\nstray\n", &g), -1);
}

static void test_depfile_refusals(void **state) {
  (void)state;
  got_deps g;
  assert_int_equal(parse_deps("no rule here\n", &g), -1);
  assert_non_null(strstr(err, "without ':'"));
  assert_int_equal(dlx_depfile_parse("a: b\0c", 6, collect, &g, err, sizeof err), -1);
  assert_non_null(strstr(err, "NUL"));
  memset(&g, 0, sizeof g);
  g.refuse_at = 1;
  assert_int_equal(dlx_depfile_parse("o: x y z\n", 9, collect, &g, err, sizeof err), -1);
  assert_non_null(strstr(err, "'y' refused"));
}

/* ---- build records ---------------------------------------------------------------- */

#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_manifest_round_trip(void **state) {
  (void)state;
  dlx_manifest m = {0};
  m.name = "k";
  m.key1 = D64;
  m.lib = "libk-0123456789abcdef0123.so";
  m.arch = "CUDA architecture sm_75 plus PTX";
  m.tools[DLX_LANG_C] = (dlx_manifest_tool){"/usr/bin/gcc-12", "1:2:3:4", D64, "gcc 12.2.0"};
  m.tools[DLX_LANG_CUDA] = (dlx_manifest_tool){"/cuda/bin/nvcc", "5:6:7:8", D64, ""};
  dlx_manifest_file srcs[] = {{D64, "/s/a b.c"}}, deps[] = {{D64, "/i/x.h"}, {D64, "/i/y.h"}};
  m.sources = srcs;
  m.n_sources = 1;
  m.deps = deps;
  m.n_deps = 2;
  const char *cmds[] = {"cc -c a.c", "cc -shared -o x"};
  m.commands = cmds;
  m.n_commands = 2;
  char *text = dlx_manifest_format(&m);
  assert_non_null(text);
  dlx_manifest r;
  assert_int_equal(dlx_manifest_parse(text, strlen(text), &r, err, sizeof err), 0);
  assert_string_equal(r.name, "k");
  assert_string_equal(r.key1, D64);
  assert_string_equal(r.lib, m.lib);
  assert_string_equal(r.arch, m.arch);
  assert_string_equal(r.tools[DLX_LANG_C].path, "/usr/bin/gcc-12");
  assert_string_equal(r.tools[DLX_LANG_C].sig, "1:2:3:4");
  assert_string_equal(r.tools[DLX_LANG_C].version, "gcc 12.2.0");
  assert_string_equal(r.tools[DLX_LANG_CUDA].version, "(no --version output)");
  assert_null(r.tools[DLX_LANG_CXX].path);
  assert_int_equal(r.n_sources, 1);
  assert_string_equal(r.sources[0].path, "/s/a b.c");
  assert_int_equal(r.n_deps, 2);
  assert_string_equal(r.deps[1].path, "/i/y.h");
  assert_int_equal(r.n_commands, 2);
  assert_string_equal(r.commands[1], "cc -shared -o x");
  dlx_manifest_free(&r);
  free(text);
  /* a path with a newline (any byte but NUL is a path's): version 2, escaped, and read
   * back the same; backslashes too */
  srcs[0].path = "/s/a\nb.c";
  deps[0].path = "/i\\n/x\\.h";
  cmds[0] = "cc -c '/s/a\nb.c'";
  text = dlx_manifest_format(&m);
  assert_non_null(text);
  assert_memory_equal(text, "dlx-build 2\n", 12);
  assert_non_null(strstr(text, "source " D64 " /s/a\\nb.c\n"));
  assert_int_equal(dlx_manifest_parse(text, strlen(text), &r, err, sizeof err), 0);
  assert_string_equal(r.sources[0].path, "/s/a\nb.c");
  assert_string_equal(r.deps[0].path, "/i\\n/x\\.h");
  assert_string_equal(r.deps[1].path, "/i/y.h");
  assert_string_equal(r.commands[0], "cc -c '/s/a\nb.c'");
  dlx_manifest_free(&r);
  free(text);
}

static void test_manifest_parse_is_strict(void **state) {
  (void)state;
  dlx_manifest m;
  const char *head = "dlx-build 1\nname k\nkey " D64 "\nlib libk.so\n";
  char text[2048];
#define PARSES(extra, want)                                                     \
  do {                                                                          \
    snprintf(text, sizeof text, "%s%s", head, extra);                           \
    assert_int_equal(dlx_manifest_parse(text, strlen(text), &m, err, sizeof err), want); \
    dlx_manifest_free(&m);                                                      \
  } while (0)
  PARSES("", 0);
  PARSES("future-keyword anything\n", 0); /* a newer dlx's lines are skipped */
  PARSES("dep " D64 " /x.h\n", 0);
  PARSES("dep 0123 /x.h\n", -1);            /* not a digest */
  PARSES("dep " D64 "\n", -1);              /* no path */
  PARSES("dep " D64 " \n", -1);             /* empty path */
  PARSES("tool c 1:2 " D64 " /cc\n", -1);   /* a tool without its version */
  PARSES("tool fortran 1:2 " D64 " /f\nversion fortran x\n", -1);
  PARSES("tool c 1:2 " D64 " /cc\nversion c gcc\n", 0);
  PARSES("version c gcc\n", -1);            /* a version without its tool */
  PARSES("name again\n", -1);               /* repeated */
  PARSES("\n", -1);                         /* an empty line */
  PARSES("dep " D64 " /x.h", -1);           /* unfinished last line */
  assert_int_equal(dlx_manifest_parse("dlx-build 2\n", 12, &m, err, sizeof err), -1);
  /* version 1 has no escapes (its backslashes are themselves); version 2's are strict */
  PARSES("dep " D64 " /a\\nb\n", 0);
  snprintf(text, sizeof text, "%s%s", head, "dep " D64 " /a\\nb\n");
  assert_int_equal(dlx_manifest_parse(text, strlen(text), &m, err, sizeof err), 0);
  assert_string_equal(m.deps[0].path, "/a\\nb");
  dlx_manifest_free(&m);
  snprintf(text, sizeof text, "dlx-build 2\nname k\nkey " D64 "\nlib libk.so\ndep " D64
           " /a\\nb\\\\c\n");
  assert_int_equal(dlx_manifest_parse(text, strlen(text), &m, err, sizeof err), 0);
  assert_string_equal(m.deps[0].path, "/a\nb\\c");
  dlx_manifest_free(&m);
  snprintf(text, sizeof text, "dlx-build 2\nname k\nkey " D64 "\nlib libk.so\ndep " D64
           " /a\\tb\n");
  assert_int_equal(dlx_manifest_parse(text, strlen(text), &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "escapes nothing"));
  assert_int_equal(dlx_manifest_parse("dlx-build 1\nname k\n", 19, &m, err, sizeof err), -1);
  assert_non_null(strstr(err, "no name, key or lib"));
  assert_int_equal(dlx_manifest_parse("dlx-build 1\n\0", 13, &m, err, sizeof err), -1);
  assert_int_equal(dlx_manifest_parse("", 0, &m, err, sizeof err), -1);
  assert_int_equal(dlx_is_digest(D64), 1);
  assert_int_equal(dlx_is_digest("0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"),
                   0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_languages),
      cmocka_unit_test(test_link_language),
      cmocka_unit_test(test_compiler_candidates),
      cmocka_unit_test(test_cuda_arch),
      cmocka_unit_test(test_unit_and_link_argv),
      cmocka_unit_test(test_argv_join_quotes),
      cmocka_unit_test(test_key1_covers_every_fact),
      cmocka_unit_test(test_key2_covers_versions_and_headers),
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_first_errors),
      cmocka_unit_test(test_depfile_gcc_and_nvcc),
      cmocka_unit_test(test_depfile_make_quoting),
      cmocka_unit_test(test_depfile_refusals),
      cmocka_unit_test(test_manifest_round_trip),
      cmocka_unit_test(test_manifest_parse_is_strict),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
