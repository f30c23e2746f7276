// peer_tvmffi.cc - the tvm-ffi peer: touch{k} takes k tvm::ffi::TensorView (torch tensors
// through torch's exchange table, numpy arrays through DLPack), each reading the data
// pointer, ndim and shape[0].
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

#include <utility>

using tvm::ffi::TensorView;

static volatile intptr_t sink;

template <size_t>
using Param = TensorView;

static intptr_t read(const TensorView &t) {
  const int32_t nd = t.ndim();
  return reinterpret_cast<intptr_t>(t.data_ptr()) + nd + (nd ? t.size(0) : 0);
}

template <class Seq>
struct Touch;
template <size_t... I>
struct Touch<std::index_sequence<I...>> {
  static void fn(Param<I>... xs) { sink = (intptr_t(0) + ... + read(xs)); }
};

TVM_FFI_DLL_EXPORT_TYPED_FUNC(touch1, Touch<std::make_index_sequence<1>>::fn);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(touch3, Touch<std::make_index_sequence<3>>::fn);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(touch8, Touch<std::make_index_sequence<8>>::fn);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(touch16, Touch<std::make_index_sequence<16>>::fn);
