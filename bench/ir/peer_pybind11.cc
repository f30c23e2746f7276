// peer_pybind11.cc - the pybind11 peer: touch_np{k} takes k py::array, touch_pt{k} takes
// k at::Tensor (torch/extension.h), each reading data pointer, ndim and shape[0].
#include <torch/extension.h>

#include <pybind11/numpy.h>

#include <utility>

namespace py = pybind11;

static volatile intptr_t sink;

template <class T, size_t>
using Param = T;

static intptr_t read(const py::array &a) {
  return reinterpret_cast<intptr_t>(a.data()) + a.ndim() + (a.ndim() ? a.shape(0) : 0);
}
static intptr_t read(const at::Tensor &t) {
  const int64_t nd = t.dim();
  return reinterpret_cast<intptr_t>(t.data_ptr()) + nd + (nd ? t.size(0) : 0);
}

template <class T, size_t... I>
static void def_touch(py::module_ &m, const char *name, std::index_sequence<I...>) {
  m.def(name, [](Param<T, I>... xs) { sink = (intptr_t(0) + ... + read(xs)); });
}

PYBIND11_MODULE(dlx_peer_pybind11, m) {
  def_touch<py::array>(m, "touch_np1", std::make_index_sequence<1>());
  def_touch<py::array>(m, "touch_np3", std::make_index_sequence<3>());
  def_touch<py::array>(m, "touch_np8", std::make_index_sequence<8>());
  def_touch<py::array>(m, "touch_np16", std::make_index_sequence<16>());
  def_touch<at::Tensor>(m, "touch_pt1", std::make_index_sequence<1>());
  def_touch<at::Tensor>(m, "touch_pt3", std::make_index_sequence<3>());
  def_touch<at::Tensor>(m, "touch_pt8", std::make_index_sequence<8>());
  def_touch<at::Tensor>(m, "touch_pt16", std::make_index_sequence<16>());
}
