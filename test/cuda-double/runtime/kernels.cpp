/*
 * cudaLibraryLoadData / cudaLibraryGetKernel / cudaLibraryUnload / cudaLaunchKernel.
 * A library is PTX text; its kernels are the .entry names it declares that
 * the double has a host implementation of: tensorcomm's reductions, built
 * from the same reduce-ops.h as the CUDA source.
 */
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "engine.h"
#include "reduce-ops.h"
#include "tcdouble-control.h"

namespace tcdouble {
namespace {

/** Every parameter tensorcomm's kernels take is 64 bits: out, inputs, count, n. */
typedef void (*HostKernel)(void *out, const void *inputs, uint64_t count, uint64_t n);

template <tc::Op OP, class TYPE>
void host_kernel(void *out, const void *inputs, uint64_t count, uint64_t n) {
  typedef typename TYPE::storage T;
  if (count == 0) return;
  T *target = static_cast<T *>(out);
  const T *const *sources = static_cast<const T *const *>(inputs);
  for (uint64_t i = 0; i < n; i++) target[i] = tc::reduce_element<OP, TYPE>(sources, count, i);
}

#define TC_HOST_KERNEL_ENTRY(op, OP, dtype, TYPE) {"tc_reduce_" #op "_" #dtype, host_kernel<OP, TYPE>},

const std::map<std::string, HostKernel> &host_kernels() {
  static const auto *table = new std::map<std::string, HostKernel>{TC_REDUCE_KERNELS(TC_HOST_KERNEL_ENTRY)};
  return *table;
}

constexpr unsigned kKernelParameters = 4;

struct Library {
  std::set<std::string> entries;
};

struct Kernel {
  uint64_t library;
  std::string name;
  HostKernel run;
};

struct Kernels {
  std::map<uint64_t, Library> libraries;
  std::map<uint64_t, Kernel> kernels;
};

Kernels &kernels() {
  static auto *k = new Kernels();
  return *k;
}

/** The names of the PTX's `.entry` directives. */
std::set<std::string> ptx_entries(const std::string &ptx) {
  std::set<std::string> names;
  const std::string directive = ".entry";
  for (size_t at = ptx.find(directive); at != std::string::npos; at = ptx.find(directive, at + 1)) {
    size_t start = at + directive.size();
    while (start < ptx.size() && (ptx[start] == ' ' || ptx[start] == '\t')) start++;
    size_t end = start;
    while (end < ptx.size() && (isalnum(static_cast<unsigned char>(ptx[end])) || ptx[end] == '_' || ptx[end] == '$')) {
      end++;
    }
    if (end > start) names.insert(ptx.substr(start, end - start));
  }
  return names;
}

class KernelOp : public Op {
 public:
  KernelOp(const Kernel &kernel, void *const *parameters) : name_(kernel.name), run_(kernel.run) {
    // Parameters are captured at launch, as CUDA does.
    for (unsigned i = 0; i < kKernelParameters; i++) memcpy(&values_[i], parameters[i], sizeof values_[i]);
  }
  bool advance() override {
    run_(reinterpret_cast<void *>(values_[0]), reinterpret_cast<const void *>(values_[1]), values_[2], values_[3]);
    return true;
  }
  std::string describe() const override { return "kernel " + name_; }

 private:
  std::string name_;
  HostKernel run_;
  uint64_t values_[kKernelParameters];
};

bool valid_launch(dim3 grid, dim3 block) {
  const uint64_t threads = static_cast<uint64_t>(block.x) * block.y * block.z;
  return grid.x >= 1 && grid.x <= 0x7fffffffu && grid.y >= 1 && grid.y <= 65535 && grid.z >= 1 && grid.z <= 65535 &&
         block.x >= 1 && block.x <= 1024 && block.y >= 1 && block.y <= 1024 && block.z >= 1 && block.z <= 64 &&
         threads <= 1024;
}

void drop_all() {
  kernels().libraries.clear();
  kernels().kernels.clear();
}

const bool registered = (on_reset(drop_all), true);

}  // namespace
}  // namespace tcdouble

using namespace tcdouble;

cudaError_t CUDARTAPI cudaLibraryLoadData(cudaLibrary_t *library, const void *code, enum cudaJitOption *jitOptions,
                                          void **jitOptionsValues, unsigned int numJitOptions,
                                          enum cudaLibraryOption *libraryOptions, void **libraryOptionValues,
                                          unsigned int numLibraryOptions) {
  Call call;
  if (int failure = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(failure));
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  const bool options_given = (numJitOptions == 0 || (jitOptions != nullptr && jitOptionsValues != nullptr)) &&
                             (numLibraryOptions == 0 || (libraryOptions != nullptr && libraryOptionValues != nullptr));
  if (library == nullptr || code == nullptr || !options_given) return fail(cudaErrorInvalidValue);
  // Only PTX text: cubins and fatbins need a GPU to mean anything.
  const std::string ptx(static_cast<const char *>(code));
  if (ptx.find(".version") == std::string::npos) return fail(cudaErrorInvalidPtx);
  const uint64_t id = call.s.next_id++;
  kernels().libraries.emplace(id, Library{ptx_entries(ptx)});
  *library = handle_of<cudaLibrary_t>(id);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaLibraryGetKernel(cudaKernel_t *pKernel, cudaLibrary_t library, const char *name) {
  Call call;
  if (int failure = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(failure));
  if (pKernel == nullptr || name == nullptr) return fail(cudaErrorInvalidValue);
  const uint64_t library_id = id_of(library);
  auto found = kernels().libraries.find(library_id);
  if (found == kernels().libraries.end()) return fail(cudaErrorInvalidResourceHandle);
  if (found->second.entries.count(name) == 0) return fail(cudaErrorSymbolNotFound);
  auto implementation = host_kernels().find(name);
  if (implementation == host_kernels().end()) {
    fprintf(stderr, "tensorcomm CUDA double: the PTX declares %s, but the double has no host implementation of it\n",
            name);
    return fail(cudaErrorSymbolNotFound);
  }
  // The same kernel asked for twice is the same handle.
  for (const auto &entry : kernels().kernels) {
    if (entry.second.library == library_id && entry.second.name == name) {
      *pKernel = handle_of<cudaKernel_t>(entry.first);
      return cudaSuccess;
    }
  }
  const uint64_t id = call.s.next_id++;
  kernels().kernels.emplace(id, Kernel{library_id, name, implementation->second});
  *pKernel = handle_of<cudaKernel_t>(id);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaLibraryUnload(cudaLibrary_t library) {
  Call call;
  if (int failure = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(failure));
  const uint64_t library_id = id_of(library);
  if (kernels().libraries.erase(library_id) == 0) return fail(cudaErrorInvalidResourceHandle);
  for (auto it = kernels().kernels.begin(); it != kernels().kernels.end();) {
    it = it->second.library == library_id ? kernels().kernels.erase(it) : std::next(it);
  }
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                                       cudaStream_t stream) {
  Call call;
  if (int failure = call.injected_failure(__func__)) return fail(static_cast<cudaError_t>(failure));
  (void)sharedMem;  // the host implementations use no shared memory
  auto found = kernels().kernels.find(id_of(func));
  if (found == kernels().kernels.end()) return fail(cudaErrorInvalidDeviceFunction);
  if (!valid_launch(gridDim, blockDim)) return fail(cudaErrorInvalidConfiguration);
  if (args == nullptr) return fail(cudaErrorInvalidValue);
  Stream *target;
  if (cudaError_t error = find_stream(call.s, stream, &target)) return fail(error);
  enqueue(call.s, *target, std::make_unique<KernelOp>(found->second, args));
  return cudaSuccess;
}

int tcdouble_live_libraries(void) {
  Call call;
  return static_cast<int>(kernels().libraries.size());
}
