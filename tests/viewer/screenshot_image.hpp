// The PNG a screenshot test had the viewer write, as RGBA pixels, and the
// colour comparisons the tests make on it. One copy for every screenshot
// test file.
#pragma once
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <stb_image.h>

#include "core/highlight.hpp"

namespace pa::viewer::test {

struct Image {
  int w = 0, h = 0;
  std::vector<unsigned char> px;
  std::array<int, 3> at(int x, int y) const {
    const auto* p = &px[(static_cast<std::size_t>(y) * w + x) * 4];
    return {p[0], p[1], p[2]};
  }
};

inline Image load_image(const std::string& path) {
  Image im;
  int n = 0;
  unsigned char* d = stbi_load(path.c_str(), &im.w, &im.h, &n, 4);
  REQUIRE(d != nullptr);
  im.px.assign(d, d + static_cast<std::size_t>(im.w) * im.h * 4);
  stbi_image_free(d);
  return im;
}

// Each channel within tol of the other's.
inline bool same(std::array<int, 3> a, std::array<int, 3> b, int tol = 2) {
  for (int i = 0; i < 3; ++i)
    if (std::abs(a[i] - b[i]) > tol) return false;
  return true;
}

// A palette colour as the framebuffer stores it (to_u32's rounding).
inline std::array<int, 3> rgb255(Rgba c) {
  return {static_cast<int>(c.r * 255 + 0.5f), static_cast<int>(c.g * 255 + 0.5f), static_cast<int>(c.b * 255 + 0.5f)};
}

}  // namespace pa::viewer::test
