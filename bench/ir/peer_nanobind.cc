// peer_nanobind.cc - the nanobind peer: touch{k} takes k nb::ndarray<> (numpy arrays and
// torch tensors alike, each imported through its __dlpack__), each reading data pointer,
// ndim and shape[0]. bench/bench_ir.py builds it with nanobind's sources into one module.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <utility>

namespace nb = nanobind;

static volatile intptr_t sink;

template <class T, size_t>
using Param = T;

static intptr_t read(const nb::ndarray<> &a) {
  return reinterpret_cast<intptr_t>(a.data()) + a.ndim() + (a.ndim() ? a.shape(0) : 0);
}

template <size_t... I>
static void def_touch(nb::module_ &m, const char *name, std::index_sequence<I...>) {
  m.def(name, [](Param<nb::ndarray<>, I>... xs) { sink = (intptr_t(0) + ... + read(xs)); });
}

NB_MODULE(dlx_peer_nanobind, m) {
  def_touch(m, "touch1", std::make_index_sequence<1>());
  def_touch(m, "touch3", std::make_index_sequence<3>());
  def_touch(m, "touch8", std::make_index_sequence<8>());
  def_touch(m, "touch16", std::make_index_sequence<16>());
}
