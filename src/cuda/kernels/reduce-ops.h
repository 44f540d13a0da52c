/*
 * The element-wise reduction behind tensorcomm's device kernels, written once
 * for both sides: nvcc compiles it into reduce.cu's kernels, g++ into the CUDA
 * test double's host copies of them, so the double computes the same bits as
 * the GPU.
 *
 * Semantics are reduceArrays' (src/tensor/reduce-kernels.ts): inputs fold
 * left to right; float16/bfloat16 accumulate in float32 and round once, to
 * nearest even; integers wrap like their C type; avg is sum / count, the
 * integer one truncated toward zero; float min/max propagate NaN and order -0
 * below +0 (Math.min/Math.max); bool folds its raw bytes logically
 * (sum/avg/max/bor = or, prod/min/band = and, bxor = xor). A single input is
 * copied bit for bit.
 */
#ifndef TENSORCOMM_REDUCE_OPS_H
#define TENSORCOMM_REDUCE_OPS_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TC_HOST_DEVICE inline
#endif

namespace tc {

enum class Op { Sum, Avg, Prod, Min, Max, Band, Bor, Bxor };

TC_HOST_DEVICE uint32_t bits_of(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

TC_HOST_DEVICE uint64_t bits_of(double x) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

TC_HOST_DEVICE float float_from_bits(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

TC_HOST_DEVICE double double_from_bits(uint64_t bits) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double x;
  memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

TC_HOST_DEVICE float float16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Subnormal: mantissa * 2^-24, exact in float32.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  return float_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/** The float16 nearest `value`, ties to even; NaN stays NaN (quiet), overflow goes to infinity. */
TC_HOST_DEVICE uint16_t float_to_float16(float value) {
  const uint32_t x = bits_of(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exponent = (x >> 23) & 0xffu;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xff) {
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa != 0 ? 0x200u | (mantissa >> 13) : 0));
  }
  const int rebased = static_cast<int>(exponent) - 112;
  if (rebased >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (rebased <= 0) {
    if (rebased < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    const int shift = 14 - rebased;
    const uint32_t half = 1u << (shift - 1);
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t rounded = mantissa >> shift;
    if (rest > half || (rest == half && (rounded & 1u))) rounded++;
    return static_cast<uint16_t>(sign | rounded);
  }
  uint32_t rounded = (static_cast<uint32_t>(rebased) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  // A carry out of the mantissa correctly bumps the exponent, up to infinity.
  if (rest > 0x1000u || (rest == 0x1000u && (rounded & 1u))) rounded++;
  return static_cast<uint16_t>(sign | rounded);
}

TC_HOST_DEVICE float bfloat16_to_float(uint16_t h) { return float_from_bits(static_cast<uint32_t>(h) << 16); }

/** The bfloat16 nearest `value`, ties to even; NaN stays NaN (quiet). */
TC_HOST_DEVICE uint16_t float_to_bfloat16(float value) {
  const uint32_t x = bits_of(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/** Math.min / Math.max: NaN wins, and of two zeros min takes -0, max +0. */
template <class F>
TC_HOST_DEVICE F float_min(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return bits_of(a) > bits_of(b) ? a : b;  // only zeros differ here; -0 has the sign bit
  return a < b ? a : b;
}

template <class F>
TC_HOST_DEVICE F float_max(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return bits_of(a) < bits_of(b) ? a : b;
  return a > b ? a : b;
}

enum class Kind { Float, Integer, Bool };

/**
 * How a dtype sits in memory (`storage`) and is folded (`value`). Native
 * types fold as themselves; float16 and bfloat16 fold in float32.
 */
template <class T>
struct Native {
  typedef T storage;
  typedef T value;
  static TC_HOST_DEVICE value load(storage s) { return s; }
  static TC_HOST_DEVICE storage store(value v) { return v; }
};

struct Float16Codec {
  typedef uint16_t storage;
  typedef float value;
  static TC_HOST_DEVICE value load(storage s) { return float16_to_float(s); }
  static TC_HOST_DEVICE storage store(value v) { return float_to_float16(v); }
};

struct Bfloat16Codec {
  typedef uint16_t storage;
  typedef float value;
  static TC_HOST_DEVICE value load(storage s) { return bfloat16_to_float(s); }
  static TC_HOST_DEVICE storage store(value v) { return float_to_bfloat16(v); }
};

template <class Codec>
struct FloatType : Codec {
  typedef typename Codec::value value;
  static constexpr Kind kind = Kind::Float;
  static TC_HOST_DEVICE value add(value a, value b) { return a + b; }
  static TC_HOST_DEVICE value multiply(value a, value b) { return a * b; }
  static TC_HOST_DEVICE value min(value a, value b) { return float_min(a, b); }
  static TC_HOST_DEVICE value max(value a, value b) { return float_max(a, b); }
  static TC_HOST_DEVICE value average(value sum, uint64_t count) { return sum / static_cast<value>(count); }
};

/**
 * An integer dtype. Arithmetic runs in `Wide`, unsigned and at least as wide
 * as int, so it wraps instead of overflowing a signed type (undefined in C++),
 * and is cut back to T's width on the way out.
 */
template <class T, class Wide, bool Signed>
struct IntegerType : Native<T> {
  typedef T value;
  static constexpr Kind kind = Kind::Integer;
  static TC_HOST_DEVICE value add(value a, value b) {
    return static_cast<T>(static_cast<Wide>(a) + static_cast<Wide>(b));
  }
  static TC_HOST_DEVICE value multiply(value a, value b) {
    return static_cast<T>(static_cast<Wide>(a) * static_cast<Wide>(b));
  }
  static TC_HOST_DEVICE value min(value a, value b) { return a < b ? a : b; }
  static TC_HOST_DEVICE value max(value a, value b) { return a > b ? a : b; }
  static TC_HOST_DEVICE value average(value sum, uint64_t count) {
    // C division truncates toward zero; the divisor is the input count, never negative.
    if (Signed) return static_cast<T>(static_cast<int64_t>(sum) / static_cast<int64_t>(count));
    return static_cast<T>(static_cast<uint64_t>(sum) / count);
  }
};

/** bool as Tensor stores it: one byte, 0 or 1, folded bitwise so the bytes are not normalized. */
struct BoolType : Native<uint8_t> {
  static constexpr Kind kind = Kind::Bool;
};

typedef FloatType<Native<double>> Float64;
typedef FloatType<Native<float>> Float32;
typedef FloatType<Float16Codec> Float16;
typedef FloatType<Bfloat16Codec> Bfloat16;
typedef IntegerType<int64_t, uint64_t, true> Int64;
typedef IntegerType<int32_t, uint32_t, true> Int32;
typedef IntegerType<int16_t, uint32_t, true> Int16;
typedef IntegerType<int8_t, uint32_t, true> Int8;
typedef IntegerType<uint8_t, uint32_t, false> Uint8;
// NCCL's unsigned types; tensorcomm's own dtypes have no kernels for them.
typedef IntegerType<uint32_t, uint32_t, false> Uint32;
typedef IntegerType<uint64_t, uint64_t, false> Uint64;
typedef BoolType Bool;

template <Op OP, class D>
TC_HOST_DEVICE typename D::value fold(typename D::value a, typename D::value b) {
  if constexpr (D::kind == Kind::Bool) {
    if constexpr (OP == Op::Prod || OP == Op::Min || OP == Op::Band) return a & b;
    else if constexpr (OP == Op::Bxor) return a ^ b;
    else return a | b;
  } else if constexpr (OP == Op::Sum || OP == Op::Avg) {
    return D::add(a, b);
  } else if constexpr (OP == Op::Prod) {
    return D::multiply(a, b);
  } else if constexpr (OP == Op::Min) {
    return D::min(a, b);
  } else if constexpr (OP == Op::Max) {
    return D::max(a, b);
  } else {
    static_assert(D::kind == Kind::Integer, "band/bor/bxor are defined for integer and bool dtypes only");
    if constexpr (OP == Op::Band) return a & b;
    else if constexpr (OP == Op::Bor) return a | b;
    else return a ^ b;
  }
}

/** op(inputs[0][i], ..., inputs[count-1][i]) for count >= 1; reads every input before the caller stores. */
template <Op OP, class D>
TC_HOST_DEVICE typename D::storage reduce_element(const typename D::storage *const *inputs, uint64_t count,
                                                  uint64_t i) {
  if (count == 1) return inputs[0][i];
  typename D::value sum = D::load(inputs[0][i]);
  for (uint64_t j = 1; j < count; j++) sum = fold<OP, D>(sum, D::load(inputs[j][i]));
  if constexpr (OP == Op::Avg && D::kind != Kind::Bool) sum = D::average(sum, count);
  return D::store(sum);
}

}  // namespace tc

/*
 * Every kernel tensorcomm has, as X(op, OP, dtype, TYPE) with op and dtype the
 * names in tc_reduce_<op>_<dtype> (src/nccl/api.ts): five arithmetic ops for
 * every dtype, and the three bitwise ones for the integer dtypes and bool.
 */
#define TC_REDUCE_ARITHMETIC(X, dtype, TYPE)                                                               \
  X(sum, tc::Op::Sum, dtype, TYPE)                                                                         \
  X(avg, tc::Op::Avg, dtype, TYPE)                                                                         \
  X(prod, tc::Op::Prod, dtype, TYPE) X(min, tc::Op::Min, dtype, TYPE) X(max, tc::Op::Max, dtype, TYPE)
#define TC_REDUCE_BITWISE(X, dtype, TYPE) \
  X(band, tc::Op::Band, dtype, TYPE) X(bor, tc::Op::Bor, dtype, TYPE) X(bxor, tc::Op::Bxor, dtype, TYPE)
#define TC_REDUCE_ALL(X, dtype, TYPE) TC_REDUCE_ARITHMETIC(X, dtype, TYPE) TC_REDUCE_BITWISE(X, dtype, TYPE)

#define TC_REDUCE_KERNELS(X)                    \
  TC_REDUCE_ARITHMETIC(X, float64, tc::Float64) \
  TC_REDUCE_ARITHMETIC(X, float32, tc::Float32) \
  TC_REDUCE_ARITHMETIC(X, float16, tc::Float16) \
  TC_REDUCE_ARITHMETIC(X, bfloat16, tc::Bfloat16) \
  TC_REDUCE_ALL(X, int64, tc::Int64)            \
  TC_REDUCE_ALL(X, int32, tc::Int32)            \
  TC_REDUCE_ALL(X, int16, tc::Int16)            \
  TC_REDUCE_ALL(X, int8, tc::Int8)              \
  TC_REDUCE_ALL(X, uint8, tc::Uint8)            \
  TC_REDUCE_ALL(X, bool, tc::Bool)

#endif  // TENSORCOMM_REDUCE_OPS_H
