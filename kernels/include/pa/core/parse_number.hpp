// One number from a whole command-line value. pa-lab, pa-bench and pa-viewer
// each word their own errors (naming the option and what it accepts); what
// counts as a number is decided here, once: the entire text, base 10, no
// leading spaces or '+', nothing after the digits, within the type's range,
// and for floating point a finite value ("inf" and "nan" are refused).
#pragma once

#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace pa {

template <class T>
std::optional<T> parse_number(std::string_view text) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "parse_number reads integers and floats");
  T out{};
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, out);
  if (text.empty() || ec != std::errc() || p != end) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(out)) return std::nullopt;
  }
  return out;
}

}  // namespace pa
