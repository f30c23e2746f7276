/*
 * dlx_torch.h - dlx's torch operators in a C or C++ program without Python.
 *
 * A program that links libtorch and dlx's torch operators (CMake: find_package(Torch),
 * find_package(dlx), target_link_libraries(app PRIVATE dlx::torch_ops)) calls
 * dlx_torch_register once per kernel library; an AOTInductor package that
 * `dlx.torch.register(lib, ns)` compiled in Python then finds its ns::NAME operators.
 * The operators are the ones dlx.torch.register installs (the same C++ kernel, the same
 * schema); they live as long as the process.
 */
#ifndef DLX_DLX_TORCH_H_
#define DLX_DLX_TORCH_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Registers the declared kernels of a kernel library as torch operators ns::NAME.
 *
 * \param library_path The kernel library's file (a shared object built with DLX_KERNEL); it
 *   is loaded with dlopen and stays loaded for the process's life.
 * \param ns The operator namespace, a C identifier (letters, digits, '_'), the one the Python
 *   program passed to dlx.torch.register; it must not be registered already in this process.
 * \param err Where a failure's NUL-terminated message is written (may be NULL when errlen is 0).
 * \param errlen The size of err in bytes.
 * \return 0 when every kernel with a declared signature torch can express is registered
 *   (defined with the schema Python derives, implemented on CPU, CUDA and PrivateUse1);
 *   -1 with the reason in err otherwise (nothing is registered then unless the namespace
 *   was defined first). Thread-safe as torch's registration is.
 */
int dlx_torch_register(const char *library_path, const char *ns, char *err, size_t errlen);

/*!
 * \brief Whether this process serves an AOTInductor package's dlx operators with the
 *   libraries the package was made with. Call it after loading the package and before its
 *   first run.
 *
 * dlx.torch.aoti_compile_and_package writes, per namespace of dlx operators the program
 * calls, the metadata entry "dlx.digest.<ns>" -> the sha256 (64 lowercase hex digits) of
 * the library registered under it then. The check passes when each such entry names a
 * namespace this process registered with dlx_torch_register from a library of exactly that
 * content; a package with no dlx entries (a plain torch one) passes.
 *
 * \param keys, values The package's metadata pairs as NUL-terminated strings, n of each:
 *   torch::inductor::AOTIModelPackageLoader::get_metadata()'s keys and values.
 * \param err Where a refusal's NUL-terminated message is written (may be NULL when errlen
 *   is 0): it names the namespace, the package's digest and the library registered under
 *   it here with its digest.
 * \param errlen The size of err in bytes.
 * \return 0, or -1 when a namespace is not registered here, is registered from another
 *   library, or an entry is malformed (a key not naming a namespace, a value not a digest,
 *   a dlx manifest without digest entries). Thread-safe.
 */
int dlx_torch_check_package(const char *const *keys, const char *const *values, size_t n,
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* DLX_DLX_TORCH_H_ */
