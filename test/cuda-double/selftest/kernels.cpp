// The reduction kernels through cudaLibraryLoadData / cudaLibraryGetKernel / cudaLaunchKernel, checked against
// values worked out by hand and against vectors computed by tensorcomm's TypeScript reduceArrays.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "check.h"

namespace {

std::string read_file(const char *path) {
  std::ifstream file(path, std::ios::binary);
  CHECK(file.good());
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

cudaLibrary_t load(const std::string &ptx) {
  cudaLibrary_t library;
  CUDA_OK(cudaLibraryLoadData(&library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  return library;
}

cudaKernel_t kernel(cudaLibrary_t library, const std::string &name) {
  cudaKernel_t found;
  CUDA_OK(cudaLibraryGetKernel(&found, library, name.c_str()));
  return found;
}

/** Launches `k` on `count` inputs of `bytes_each` bytes (n elements each); returns the output bytes. */
std::vector<unsigned char> launch(cudaKernel_t k, const std::vector<std::vector<unsigned char>> &inputs, uint64_t n,
                                  bool in_place = false) {
  std::vector<void *> pointers;
  for (const auto &input : inputs) pointers.push_back(device_copy(input));
  void **table = device_copy(pointers);
  const size_t bytes = inputs[0].size();
  void *out = in_place ? pointers[0] : device_copy(std::vector<unsigned char>(bytes, 0xee));
  uint64_t count = inputs.size();
  void *args[] = {&out, &table, &count, &n};
  CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void *>(k), dim3(2), dim3(64), args, 0, nullptr));
  const std::vector<unsigned char> result = host_copy(static_cast<unsigned char *>(out), bytes);
  if (!in_place) CUDA_OK(cudaFree(out));
  CUDA_OK(cudaFree(table));
  for (void *pointer : pointers) CUDA_OK(cudaFree(pointer));
  return result;
}

template <class T>
std::vector<unsigned char> bytes_of(const std::vector<T> &values) {
  std::vector<unsigned char> bytes(values.size() * sizeof(T));
  memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <class T>
std::vector<T> run(cudaLibrary_t library, const char *name, const std::vector<std::vector<T>> &inputs,
                   bool in_place = false) {
  std::vector<std::vector<unsigned char>> raw;
  for (const auto &input : inputs) raw.push_back(bytes_of(input));
  const std::vector<unsigned char> out = launch(kernel(library, name), raw, inputs[0].size(), in_place);
  std::vector<T> values(inputs[0].size());
  memcpy(values.data(), out.data(), out.size());
  return values;
}

uint32_t bits(float x) {
  uint32_t b;
  memcpy(&b, &x, 4);
  return b;
}

void hand_checked(cudaLibrary_t library) {
  // float16: 1 + 2^-11 is a tie, to even (1.0); with another 2^-11 the float32 sum is 1 + 2^-10 exactly.
  CHECK((run<uint16_t>(library, "tc_reduce_sum_float16", {{0x3c00}, {0x1000}}) == std::vector<uint16_t>{0x3c00}));
  CHECK((run<uint16_t>(library, "tc_reduce_sum_float16", {{0x3c00}, {0x1000}, {0x1000}}) ==
         std::vector<uint16_t>{0x3c01}));
  // Integer avg truncates toward zero; int8 sums wrap before dividing (300 wraps to 44).
  CHECK((run<int32_t>(library, "tc_reduce_avg_int32", {{-7, 7}, {2, 2}}) == std::vector<int32_t>{-2, 4}));
  CHECK((run<int8_t>(library, "tc_reduce_avg_int8", {{100}, {100}, {100}}) == std::vector<int8_t>{14}));
  CHECK((run<uint8_t>(library, "tc_reduce_avg_uint8", {{200}, {100}}) == std::vector<uint8_t>{22}));
  CHECK((run<int16_t>(library, "tc_reduce_prod_int16", {{300}, {300}}) == std::vector<int16_t>{24464}));  // 90000 wraps
  // Float min/max: NaN wins, -0 is below +0.
  const std::vector<float> maxed =
      run<float>(library, "tc_reduce_max_float32", {{NAN, 1.0f, -0.0f}, {1.0f, NAN, 0.0f}});
  CHECK(std::isnan(maxed[0]) && std::isnan(maxed[1]) && bits(maxed[2]) == 0x00000000u);
  const std::vector<float> minned = run<float>(library, "tc_reduce_min_float32", {{0.0f, 3.0f}, {-0.0f, -2.0f}});
  CHECK(bits(minned[0]) == 0x80000000u && minned[1] == -2.0f);
  // bool folds the raw bytes: sum is or, prod is and, bxor is xor.
  CHECK((run<uint8_t>(library, "tc_reduce_sum_bool", {{0, 1, 0}, {2, 0, 0}}) == std::vector<uint8_t>{2, 1, 0}));
  CHECK((run<uint8_t>(library, "tc_reduce_prod_bool", {{1, 1}, {1, 0}}) == std::vector<uint8_t>{1, 0}));
  CHECK((run<uint8_t>(library, "tc_reduce_bxor_bool", {{1}, {1}, {1}}) == std::vector<uint8_t>{1}));
  // In place: out is inputs[0].
  CHECK((run<double>(library, "tc_reduce_avg_float64", {{1.0, 2.0}, {2.0, 4.0}}, true) ==
         std::vector<double>{1.5, 3.0}));
}

std::set<std::string> entries(const std::string &ptx) {
  std::set<std::string> names;
  std::istringstream lines(ptx);
  std::string word;
  while (lines >> word) {
    if (word == ".entry" && lines >> word) names.insert(word.substr(0, word.find('(')));
  }
  return names;
}

void errors(cudaLibrary_t library) {
  cudaLibrary_t other;
  CHECK_CUDA(cudaLibraryLoadData(&other, "not ptx", nullptr, nullptr, 0, nullptr, nullptr, 0), cudaErrorInvalidPtx);
  CHECK_CUDA(cudaLibraryLoadData(&other, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0), cudaErrorInvalidValue);
  cudaKernel_t k;
  CHECK_CUDA(cudaLibraryGetKernel(&k, library, "tc_reduce_band_float32"), cudaErrorSymbolNotFound);
  CHECK_CUDA(cudaLibraryGetKernel(&k, library, "nope"), cudaErrorSymbolNotFound);
  CHECK_CUDA(cudaLibraryGetKernel(&k, reinterpret_cast<cudaLibrary_t>(0x77), "tc_reduce_sum_int8"),
             cudaErrorInvalidResourceHandle);
  // A PTX without the kernel does not have it, whatever the double could run.
  const cudaLibrary_t empty = load(".version 9.0\n.target sm_75\n");
  CHECK_CUDA(cudaLibraryGetKernel(&k, empty, "tc_reduce_sum_int8"), cudaErrorSymbolNotFound);
  CUDA_OK(cudaLibraryUnload(empty));
  k = kernel(library, "tc_reduce_sum_int8");
  CHECK(kernel(library, "tc_reduce_sum_int8") == k);
  void *args[4] = {};
  CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void *>(k), dim3(1), dim3(2048), args, 0, nullptr),
             cudaErrorInvalidConfiguration);
  CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void *>(k), dim3(1), dim3(32), nullptr, 0, nullptr),
             cudaErrorInvalidValue);
  CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void *>(0x55), dim3(1), dim3(32), args, 0, nullptr),
             cudaErrorInvalidDeviceFunction);
}

}  // namespace

void test_kernels(const char *ptx_path) {
  const std::string ptx = read_file(ptx_path);
  const cudaLibrary_t library = load(ptx);
  // Every kernel of tensorcomm's contract is in the PTX, and the double runs each of them.
  const std::set<std::string> names = entries(ptx);
  CHECK(names.size() == 68);
  for (const std::string &name : names) kernel(library, name);
  hand_checked(library);
  errors(library);
  const cudaKernel_t k = kernel(library, "tc_reduce_sum_int8");
  CUDA_OK(cudaLibraryUnload(library));
  CHECK_CUDA(cudaLibraryUnload(library), cudaErrorInvalidResourceHandle);
  void *args[4] = {};
  CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void *>(k), dim3(1), dim3(32), args, 0, nullptr),
             cudaErrorInvalidDeviceFunction);
}

/**
 * Vectors file (little-endian), written by test/cuda-double.test.ts from reduceArrays: a u32 case count, then per
 * case the kernel name (u32 length, bytes), u32 element size, u32 input count, u64 n, the inputs' bytes one after
 * another, and the expected output's bytes. Float results compare NaN-to-NaN whatever the payload.
 */
void test_kernel_vectors(const char *ptx_path, const char *vectors_path) {
  const cudaLibrary_t library = load(read_file(ptx_path));
  const std::string data = read_file(vectors_path);
  size_t at = 0;
  auto take = [&](size_t bytes) {
    CHECK(at + bytes <= data.size());
    const char *start = data.data() + at;
    at += bytes;
    return start;
  };
  auto u32 = [&] {
    uint32_t value;
    memcpy(&value, take(4), 4);
    return value;
  };
  const uint32_t cases = u32();
  for (uint32_t c = 0; c < cases; c++) {
    const uint32_t name_length = u32();
    const std::string name(take(name_length), name_length);
    const uint32_t size = u32();
    const uint32_t count = u32();
    uint64_t n;
    memcpy(&n, take(8), 8);
    std::vector<std::vector<unsigned char>> inputs;
    for (uint32_t i = 0; i < count; i++) {
      const char *bytes = take(n * size);
      inputs.emplace_back(bytes, bytes + n * size);
    }
    const char *expected = take(n * size);
    const std::vector<unsigned char> got = launch(kernel(library, name), inputs, n);
    const bool is_float = name.find("float") != std::string::npos;
    for (uint64_t i = 0; i < n; i++) {
      const unsigned char *want = reinterpret_cast<const unsigned char *>(expected) + i * size;
      const unsigned char *have = got.data() + i * size;
      if (memcmp(want, have, size) == 0) continue;
      bool both_nan = false;
      if (is_float) {
        auto nan = [&](const unsigned char *p) {
          if (size == 8) { double v; memcpy(&v, p, 8); return std::isnan(v); }
          if (size == 4) { float v; memcpy(&v, p, 4); return std::isnan(v); }
          uint16_t h;
          memcpy(&h, p, 2);
          const bool bfloat = name.find("bfloat16") != std::string::npos;
          return bfloat ? (h & 0x7fff) > 0x7f80 : (h & 0x7fff) > 0x7c00;
        };
        both_nan = nan(want) && nan(have);
      }
      if (both_nan) continue;
      std::string want_hex, have_hex;
      char digits[3];
      for (uint32_t b = size; b-- > 0;) {
        snprintf(digits, sizeof digits, "%02x", want[b]);
        want_hex += digits;
        snprintf(digits, sizeof digits, "%02x", have[b]);
        have_hex += digits;
      }
      fprintf(stderr, "%s with %u inputs, element %llu: expected 0x%s, got 0x%s\n", name.c_str(), count,
              static_cast<unsigned long long>(i), want_hex.c_str(), have_hex.c_str());
      exit(1);
    }
  }
  CHECK(at == data.size());
  CUDA_OK(cudaLibraryUnload(library));
}
