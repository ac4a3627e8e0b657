// parse_number: the one rule every front end (pa-lab, pa-bench, pa-viewer)
// uses for what text is a number; each front end words its own error.
#include <catch2/catch_test_macros.hpp>
#include <limits>
#include <string>

#include "pa/core/parse_number.hpp"

using namespace pa;

TEST_CASE("parse_number: the whole text as one base-10 integer, within the type", "[core][parse]") {
  CHECK(parse_number<int>("0") == 0);
  CHECK(parse_number<int>("128") == 128);
  CHECK(parse_number<int>("-3") == -3);  // the caller bounds it (--block's merge is -3)
  CHECK(parse_number<int>("2147483647") == std::numeric_limits<int>::max());
  CHECK(parse_number<long long>("2147483648") == 2147483648LL);
  CHECK(parse_number<long long>("9223372036854775807") == std::numeric_limits<long long>::max());
  int refused = 0;
  for (const char* text : {"", " 1", "1 ", "+1", "1x", "x1", "1.5", "0x10", "1e3", "2147483648", "-2147483649", "١٢"}) {
    INFO("'" << text << "'");
    CHECK_FALSE(parse_number<int>(text).has_value());
    ++refused;
  }
  CHECK(refused == 12);
  CHECK_FALSE(parse_number<unsigned>("-1").has_value());
  CHECK_FALSE(parse_number<long long>("9223372036854775808").has_value());
}

TEST_CASE("parse_number: a finite floating-point value, the whole text", "[core][parse]") {
  CHECK(parse_number<float>("0.5") == 0.5f);
  CHECK(parse_number<float>("4") == 4.0f);
  CHECK(parse_number<double>("1e-3") == 1e-3);
  CHECK(parse_number<double>("-2.25") == -2.25);
  int refused = 0;
  for (const char* text : {"", "inf", "-inf", "nan", "infinity", " 1", "1 ", "+1", "1.5x", "1,5", "1e999"}) {
    INFO("'" << text << "'");
    CHECK_FALSE(parse_number<double>(text).has_value());
    CHECK_FALSE(parse_number<float>(text).has_value());
    ++refused;
  }
  CHECK(refused == 11);
  CHECK_FALSE(parse_number<float>("1e39").has_value());  // beyond float, though a double holds it
  CHECK(parse_number<double>("1e39") == 1e39);
}
