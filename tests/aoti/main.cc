// dlx_aoti_run: a C++ program without Python that registers dlx kernels as torch operators
// (dlx_torch_register) and runs an AOTInductor package holding them. Driven by
// tests/python/compilers/programs/test_aoti_cxx.py:
//   dlx_aoti_run [--register LIB NS]... [--schema NS::NAME]... [--call NS::NAME N]...
//                [--run PACKAGE INPUTS]
// Each step prints one line: "register ok" / "register error: MESSAGE", the schema torch
// holds, and per case of INPUTS (lines "x N v... y M v...", float32 1-d tensors in the
// package's argument order) the result's shape and values; --run first checks the package's
// dlx digests (dlx_torch_check_package: "check error: MESSAGE"). Exit status 0 when every step
// succeeded, 1 otherwise.
#include <dlx/dlx_torch.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

int Run(const char *package, const char *inputs) {
  // Before loading it (its loader already looks its operators up): the package's dlx
  // operators must be served by the libraries it was made with.
  std::unordered_map<std::string, std::string> metadata =
      torch::inductor::AOTIModelPackageLoader::load_metadata_from_package(package, "model");
  std::vector<const char *> keys, values;
  for (const auto &kv : metadata)
    keys.push_back(kv.first.c_str()), values.push_back(kv.second.c_str());
  char err[1024];
  if (dlx_torch_check_package(keys.data(), values.data(), keys.size(), err, sizeof err) != 0) {
    std::printf("check error: %s\n", err);
    return 1;
  }
  torch::inductor::AOTIModelPackageLoader loader(package);
  std::ifstream in(inputs);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<at::Tensor> args;
    std::string name;
    int64_t n;
    while (fields >> name >> n) {
      at::Tensor t = at::empty({n}, at::kFloat);
      for (int64_t i = 0; i < n; ++i) fields >> t.data_ptr<float>()[i];
      args.push_back(t);
    }
    std::vector<at::Tensor> outs = loader.run(args);
    for (const at::Tensor &o : outs) {
      at::Tensor c = o.contiguous().to(at::kDouble);
      std::printf("result");
      for (int64_t d : c.sizes()) std::printf(" %lld", static_cast<long long>(d));
      std::printf(" :");
      for (int64_t i = 0; i < c.numel(); ++i) std::printf(" %.9g", c.data_ptr<double>()[i]);
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--register") == 0 && i + 2 < argc) {
      char err[1024];
      if (dlx_torch_register(argv[i + 1], argv[i + 2], err, sizeof err) == 0) {
        std::printf("register ok\n");
      } else {
        std::printf("register error: %s\n", err);
        status = 1;
      }
      i += 2;
    } else if (std::strcmp(argv[i], "--schema") == 0 && i + 1 < argc) {
      auto op = c10::Dispatcher::singleton().findSchema({argv[++i], ""});
      if (op) {
        std::printf("schema %s\n", c10::toString(op->schema()).c_str());
      } else {
        std::printf("schema error: no operator %s\n", argv[i]);
        status = 1;
      }
    } else if (std::strcmp(argv[i], "--call") == 0 && i + 2 < argc) {
      // the operator called directly (the dispatcher, boxed) on one float32 tensor of N
      try {
        auto op = c10::Dispatcher::singleton().findSchemaOrThrow(argv[i + 1], "");
        std::vector<c10::IValue> stack{at::ones({std::atoll(argv[i + 2])}, at::kFloat)};
        op.callBoxed(&stack);
        std::printf("call ok\n");
      } catch (const c10::Error &e) {
        std::printf("call error: %s\n", e.what_without_backtrace());
        status = 1;
      }
      i += 2;
    } else if (std::strcmp(argv[i], "--run") == 0 && i + 2 < argc) {
      try {
        status |= Run(argv[i + 1], argv[i + 2]);
      } catch (const std::exception &e) {
        std::printf("run error: %s\n", e.what());
        status = 1;
      }
      i += 2;
    } else {
      std::fprintf(stderr, "usage: %s [--register LIB NS]... [--schema NS::NAME]... "
                           "[--call NS::NAME N]... [--run PACKAGE INPUTS]\n", argv[0]);
      return 2;
    }
    std::fflush(stdout);
  }
  return status;
}
